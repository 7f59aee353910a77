#!/usr/bin/env bash
# Builds hvd's Debian packages with CPack (cmake/HvdPackage.cmake) and checks each with lintian.
# usage: scripts/package.sh [BUILD_DIR]     (default: build/ of this checkout)
#
# Configures BUILD_DIR if it has not been (Ninja, RelWithDebInfo) and builds it, then writes
#   hvd_<version>-1_amd64.deb          hvdrun, hvdagent, libhvd.so.0, the systemd units
#   hvd-dev_<version>-1_amd64.deb      headers, CMake package
#   python3-hvd_<version>-1_all.deb    the hvd and horovod Python packages
#   hvd-mpi_<version>-1_amd64.deb      libhvd's MPI plugin (builds with MPI only)
# into BUILD_DIR/packages/ and prints lintian's findings for each. Exit status: 0 with no lintian
# error (warnings are printed, not fatal), 1 on a lintian error or a failed step.
# Runs as root on Debian 12 (or with sudo) when it must install its tools.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(realpath -m "${1:-$ROOT/build}")"
OUT="$BUILD/packages"

# Build dependencies (lintian and dpkg-dev among them), then, in case an older install-deps.sh
# ran: dpkg-shlibdeps (dpkg-dev), file (CPack finds the ELF files with it) and lintian.
"$ROOT/scripts/install-deps.sh"
missing=()
for p in dpkg-dev file lintian; do
  status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
  [[ "$status" == *"install ok installed"* ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=
  [[ $(id -u) -eq 0 ]] || SUDO=sudo
  echo "package: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
else
  cmake -S "$ROOT" -B "$BUILD" >/dev/null # picks up cmake/HvdPackage.cmake if it is new
fi
# What the packages hold (libhvd builds its MPI plugin too); the rest of the build is not needed.
cmake --build "$BUILD" --target hvd hvdrun hvdagent hvd_python

rm -rf "$OUT"
mkdir -p "$OUT"
# cpack stages under its working directory's _CPack_Packages; keep that out of the checkout.
(cd "$OUT" && cpack --config "$BUILD/CPackConfig.cmake" -B "$OUT")
rm -rf "$OUT/_CPack_Packages"

shopt -s nullglob
debs=("$OUT"/*.deb)
if ((${#debs[@]} == 0)); then
  echo "package: cpack wrote no .deb into $OUT" >&2
  exit 1
fi

errors=0
for deb in "${debs[@]}"; do
  echo "== $(basename "$deb")"
  dpkg-deb --field "$deb" Package Version Architecture Depends Recommends | sed 's/^/   /'
  # lintian exits non-zero for errors; its findings are what decides, read from its output.
  findings="$(lintian --tag-display-limit 0 "$deb" 2>&1 |
              grep -v '^running with root privileges' || true)"
  if [[ -n "$findings" ]]; then
    printf '%s\n' "$findings" | sed 's/^/   lintian: /'
  else
    echo "   lintian: no findings"
  fi
  if grep -q '^E: ' <<<"$findings"; then
    errors=$((errors + 1))
  fi
done

if ((errors)); then
  echo "package: lintian reports errors in $errors package(s)" >&2
  exit 1
fi
echo "package: ${#debs[@]} packages in $OUT, no lintian errors"
echo "install on a node: apt install $OUT/hvd_*.deb $OUT/python3-hvd_*.deb (README \"Installing with Debian packages\")"
