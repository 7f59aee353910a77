#!/usr/bin/env bash
# The Debian packages work from what they hold: cpack builds them from the build tree into a
# temporary directory, dpkg-deb unpacks every one into a temporary root, and the unpacked hvdrun
# runs a 2-rank horovod.torch allreduce whose Python packages and libhvd come from that root
# (checked by path: nothing from the build tree or the system). The packaged systemd unit runs
# the packaged hvdagent, every package carries its copyright and changelog, and lintian (when
# installed) finds no error.
# usage: check_packages.sh BUILD_DIR
#
# Every multi-process step runs under `timeout`; every check captures a command's whole output
# before matching it, and a failure says which step failed and shows what it saw.
set -euo pipefail
BUILD="$(realpath "$1")"
for tool in cpack dpkg-deb dpkg-shlibdeps file; do
  if ! command -v "$tool" >/dev/null; then
    echo "packaging check skipped: no $tool (scripts/install-deps.sh installs dpkg-dev)"
    exit 77
  fi
done
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
ROOT="$TMP/root"

CHECK_NAME="packaging check"
# shellcheck source=../common/check_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/check_steps.sh"

# 1. Build the packages. gzip instead of xz: the test checks contents, not compression ratios.
mkdir -p "$TMP/debs"
(cd "$TMP/debs" && run "cpack" timeout 240 env HVD_DEB_COMPRESSION=gzip \
  cpack --config "$BUILD/CPackConfig.cmake" -B "$TMP/debs" >/dev/null)
shopt -s nullglob
debs=("$TMP"/debs/*.deb)
names="$(for deb in "${debs[@]}"; do dpkg-deb --field "$deb" Package; done | sort | tr '\n' ' ')"
for package in hvd hvd-dev python3-hvd; do
  [[ " $names" == *" $package "* ]] || fail "cpack wrote no $package package" "$names"
done

# 2. Unpack them all into one root, as apt would install them (without running their scripts).
for deb in "${debs[@]}"; do
  run "dpkg-deb -x $(basename "$deb")" dpkg-deb -x "$deb" "$ROOT" >/dev/null
  package="$(dpkg-deb --field "$deb" Package)"
  for f in copyright changelog.Debian.gz; do
    [[ -f "$ROOT/usr/share/doc/$package/$f" ]] || fail "$package lacks usr/share/doc/$package/$f"
  done
done
for f in usr/bin/hvdrun usr/bin/hvdagent usr/include/hvd/hvd.hpp \
         usr/lib/python3/dist-packages/horovod/torch/__init__.py; do
  [[ -f "$ROOT/$f" ]] || fail "no package holds $f" "$(cd "$ROOT" && find . -type f | sort)"
done
lib="$(find "$ROOT/usr/lib" -name libhvd.so.0 | head -n 1)"
[[ -n "$lib" ]] || fail "no package holds libhvd.so.0" "$(cd "$ROOT" && find . | sort)"
libdir="$(dirname "$lib")"
lib_real="$(readlink -f "$lib")"

# The packaged units start the packaged agent; the Python packages name the packaged libhvd.
unit="$(cat "$ROOT/usr/lib/systemd/system/hvdagent.service")"
expect "hvdagent.service" "^ExecStart=/usr/bin/hvdagent " "$unit"
expect "user hvdagent.service" "^ExecStart=/usr/bin/hvdagent " \
  "$(cat "$ROOT/usr/lib/systemd/user/hvdagent.service")"
expect "hvd/_library.py" "^PATH = \"${libdir#"$ROOT"}/libhvd.so.0\"\$" \
  "$(cat "$ROOT/usr/lib/python3/dist-packages/hvd/_library.py")"

# 3. The unpacked programs load the unpacked libhvd by themselves (RUNPATH $ORIGIN/../lib).
for tool in hvdrun hvdagent; do
  out="$(env -u LD_LIBRARY_PATH ldd "$ROOT/usr/bin/$tool" 2>&1)" || fail "ldd $tool" "$out"
  path="$(awk '$1 ~ /^libhvd\.so/ { print $3 }' <<<"$out")"
  [[ -n "$path" && "$(readlink -f "$path")" == "$lib_real" ]] ||
    fail "the unpacked $tool loads libhvd from '$path', not $lib_real" "$out"
done
out="$(run "hvdagent --version" timeout 30 "$ROOT/usr/bin/hvdagent" --version)"
expect "hvdagent --version" "^hvdagent " "$out"

# 4. A 2-rank job of the unpacked hvdrun; each rank reports the files it runs from.
python=/usr/bin/python3
[[ -x "$python" ]] || python="$(command -v python3)"
export LD_LIBRARY_PATH="$libdir" PYTHONPATH="$ROOT/usr/lib/python3/dist-packages"
export HVD_LIBRARY="$lib" PYTHONDONTWRITEBYTECODE=1
if "$python" -c 'import torch' 2>/dev/null; then
  program='import os, torch
import hvd._capi as capi
import horovod.torch as hvd
hvd.init()
total = hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist()
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libhvd" in l})
print("rank", hvd.rank(), "of", hvd.size(), "sum", total, flush=True)
for path in [hvd.__file__, capi.__file__] + maps:
    print("rank", hvd.rank(), "uses", os.path.realpath(path), flush=True)'
  want='\[2.0, 2.0\]'
else
  echo "packaging check: no torch for $python; the job checks libhvd's init, rank and size only"
  program='import ctypes, os, hvd._capi as capi
lib = capi.lib()
lib.check(lib.init())
rank, size = ctypes.c_int(), ctypes.c_int()
lib.check(lib.rank(ctypes.byref(rank)))
lib.check(lib.size(ctypes.byref(size)))
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libhvd" in l})
print("rank", rank.value, "of", size.value, "sum", "n/a", flush=True)
for path in [capi.__file__] + maps:
    print("rank", rank.value, "uses", os.path.realpath(path), flush=True)
lib.check(lib.shutdown())'
  want='n/a'
fi
out="$(cd "$TMP" && run "hvdrun -np 2" timeout 120 "$ROOT/usr/bin/hvdrun" -np 2 \
  "$python" -c "$program")"
for rank in 0 1; do
  expect "hvdrun -np 2 (rank $rank)" "rank $rank of 2 sum $want" "$out"
  expect "hvdrun -np 2 (rank $rank's libhvd)" "rank $rank uses $lib_real\$" "$out"
done
# Every Python module and library a rank used lies in the unpacked root.
strays="$(grep -E 'rank [01] uses ' <<<"$out" | grep -v " uses $ROOT/" || true)"
[[ -z "$strays" ]] || fail "ranks used files outside the unpacked root" "$strays"
[[ "$out" != *"$BUILD/"* ]] || fail "the job used files of the build tree $BUILD" "$out"

# 5. lintian: warnings are listed by scripts/package.sh; an error fails.
if command -v lintian >/dev/null; then
  findings="$(timeout 180 lintian --tag-display-limit 0 "${debs[@]}" 2>&1 || true)"
  if grep -q '^E: ' <<<"$findings"; then
    fail "lintian reports errors" "$(grep '^E: ' <<<"$findings")"
  fi
  lintian_note="lintian: no errors, $(grep -c '^W: ' <<<"$findings" || true) warnings"
else
  lintian_note="lintian not installed: not run"
fi
echo "packaging check passed: ${names% } unpacked; the unpacked hvdrun ran 2 ranks from them; $lintian_note"
