#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds a separate project against it with
# find_package(hvd), and runs that program on 1 rank by hand and on 3 ranks with the installed
# hvdrun; the installed hvdagent must start far enough to report its version.
# usage: check_install.sh BUILD_DIR SOURCE_DIR
#
# Every check captures a command's whole output before matching it: `cmd | grep -q` under
# pipefail fails at random when grep exits at its first match and cmd then dies of SIGPIPE.
# Every failure says which step failed and shows what it saw.
set -euo pipefail
BUILD="$1"
SOURCE="$2"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

CHECK_NAME="install check"
# shellcheck source=../common/check_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/check_steps.sh"
# The real path libhvd.so resolves to for a program, as the dynamic loader reports it.
libhvd_of() {
  local out
  out="$(run "ldd $1" ldd "$1")"
  local path
  path="$(awk '$1 ~ /^libhvd\.so/ { print $3 }' <<<"$out")"
  [[ -n "$path" && "$path" != "not" ]] || fail "ldd $1: libhvd.so not resolved" "$out"
  readlink -f "$path"
}

run "cmake --install" cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
for f in include/hvd/hvd.hpp include/hvd/hvd.h lib/cmake/hvd/hvdConfig.cmake bin/hvdrun \
         bin/hvdagent; do
  [[ -f "$TMP/prefix/$f" ]] || fail "not installed: $f"
done
installed_lib="$(readlink -f "$TMP/prefix/lib/libhvd.so")"

run "configure the consumer" cmake -S "$SOURCE/tests/install" -B "$TMP/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$TMP/prefix" -DHVD_EXAMPLE_SOURCE="$SOURCE/examples/allreduce_c.c" \
  >/dev/null
run "build the consumer" cmake --build "$TMP/consumer" >/dev/null

# The consumer must use the installed library, not the build tree's.
lib="$(libhvd_of "$TMP/consumer/consumer")"
[[ "$lib" == "$installed_lib" ]] || fail "the consumer loads $lib, not $installed_lib"
out="$(HVD_RANK=0 HVD_SIZE=1 HVD_LOCAL_RANK=0 HVD_LOCAL_SIZE=1 HVD_CROSS_RANK=0 \
  HVD_CROSS_SIZE=1 HVD_JOB_ID=install run "consumer on 1 rank" "$TMP/consumer/consumer")"
expect "consumer on 1 rank" "correct on 1 ranks" "$out"

# The installed tools find the installed libhvd, not the build tree's.
for tool in hvdrun hvdagent; do
  lib="$(libhvd_of "$TMP/prefix/bin/$tool")"
  [[ "$lib" == "$installed_lib" ]] || fail "the installed $tool loads $lib, not $installed_lib"
done
out="$(run "hvdagent --version" "$TMP/prefix/bin/hvdagent" --version)"
expect "hvdagent --version" "^hvdagent " "$out"
out="$(run "hvdrun -np 3" timeout 60 "$TMP/prefix/bin/hvdrun" -np 3 -- "$TMP/consumer/consumer")"
expect "hvdrun -np 3" "correct on 3 ranks" "$out"

# The Python packages: installed where python3 finds them under the prefix, loading the
# installed libhvd; `import horovod.torch` under the installed hvdrun (when torch is there).
python=/usr/bin/python3
[[ -x "$python" ]] || python=python3
site=""
for dir in "$TMP"/prefix/lib/python3*/dist-packages; do
  [[ -d "$dir" ]] && site="$dir" && break
done
[[ -n "$site" && -f "$site/hvd/torch/__init__.py" && -f "$site/horovod/torch/__init__.py" ]] ||
  fail "the Python packages are not installed under $TMP/prefix/lib" "$(ls -R "$TMP/prefix/lib")"
out="$(PYTHONPATH="$site" run "hvd loads libhvd" "$python" -c \
  'import os, hvd._capi as c; print("libhvd", os.path.realpath(c.lib().path))')"
expect "hvd loads libhvd" "^libhvd $installed_lib\$" "$out"
if "$python" -c 'import torch' 2>/dev/null; then
  out="$(PYTHONPATH="$site" run "hvdrun -np 2 python3 (horovod.torch)" timeout 120 \
    "$TMP/prefix/bin/hvdrun" -np 2 "$python" -c 'import torch, horovod.torch as hvd
hvd.init()
print("sum", hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist())')"
  expect "hvdrun -np 2 python3 (horovod.torch)" "sum \[2.0, 2.0\]" "$out"
fi
echo "install check passed: find_package(hvd) consumer ran on 1 rank and on 3 through the installed hvdrun; hvd.torch imported from the installed packages"
