#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds a separate project against it with
# find_package(hvd), and runs that program on 1 and 3 ranks.
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
"$BUILD/bin/hvd-local-run" -np 3 --timeout 60 -- "$TMP/consumer/consumer" | grep -q "correct on 3 ranks"
echo "install check passed: find_package(hvd) consumer ran on 1 and 3 ranks"
