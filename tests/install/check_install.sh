#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds a separate project against it with
# find_package(hvd), and runs that program on 1 rank by hand and on 3 ranks with the installed
# hvdrun; the installed hvdagent must start far enough to report its version.
# usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD="$1"
SOURCE="$2"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
test -f "$TMP/prefix/include/hvd/hvd.hpp"
test -f "$TMP/prefix/include/hvd/hvd.h"
test -f "$TMP/prefix/lib/cmake/hvd/hvdConfig.cmake"
cmake -S "$SOURCE/tests/install" -B "$TMP/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$TMP/prefix" \
  -DHVD_EXAMPLE_SOURCE="$SOURCE/examples/allreduce_c.c" >/dev/null
cmake --build "$TMP/consumer" >/dev/null
# The consumer must use the installed library, not the build tree's.
ldd "$TMP/consumer/consumer" | grep -q "$TMP/prefix/lib/libhvd.so"
HVD_RANK=0 HVD_SIZE=1 HVD_LOCAL_RANK=0 HVD_LOCAL_SIZE=1 HVD_CROSS_RANK=0 HVD_CROSS_SIZE=1 \
  HVD_JOB_ID=install "$TMP/consumer/consumer" | grep -q "correct on 1 ranks"
# The installed tools find the installed libhvd, not the build tree's.
ldd "$TMP/prefix/bin/hvdrun" | grep "libhvd.so" | grep -q "$TMP/prefix/bin/../lib/libhvd.so"
"$TMP/prefix/bin/hvdagent" --version | grep -q "^hvdagent "
timeout 60 "$TMP/prefix/bin/hvdrun" -np 3 -- "$TMP/consumer/consumer" | grep -q "correct on 3 ranks"
echo "install check passed: find_package(hvd) consumer ran on 1 rank and on 3 through the installed hvdrun"
