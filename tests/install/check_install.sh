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

fail() {
  echo "install check failed: $1" >&2
  [[ $# -gt 1 ]] && printf '%s\n' "$2" | sed 's/^/  | /' >&2
  exit 1
}
# expect STEP PATTERN OUTPUT: OUTPUT must contain a line matching PATTERN (extended regex).
expect() {
  grep -Eq -- "$2" <<<"$3" || fail "$1: no line matches '$2'" "$3"
}
# run STEP CMD...: runs CMD, fails the check with its output if it fails; prints its output.
run() {
  local step="$1" out
  shift
  out="$("$@" 2>&1)" || fail "$step: exit status $?" "$out"
  printf '%s' "$out"
}
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
echo "install check passed: find_package(hvd) consumer ran on 1 rank and on 3 through the installed hvdrun"
