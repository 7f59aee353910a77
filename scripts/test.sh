#!/usr/bin/env bash
# Installs the dependencies, builds hvd, and runs the whole test suite through ctest (unit,
# multi-process, the hvd.torch pytest suite, and multi-host e2e over network namespaces, which
# need root: CI runs as root);
# then builds and runs the unit and multi-process tests once more under AddressSanitizer and
# UndefinedBehaviorSanitizer, and the engine's tests (background thread, submitters on many
# threads, the timeline's writer) under ThreadSanitizer. Exits non-zero on any failure.
#
#   scripts/test.sh                 everything
#   HVD_TEST_SKIP_SANITIZE=1 ...    skip the sanitizer passes (local iteration)
#   HVD_BUILD_DIR / HVD_ASAN_BUILD_DIR / HVD_TSAN_BUILD_DIR   build directories (default build/,
#                                   build-asan/, build-tsan/)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HVD_BUILD_DIR:-$ROOT/build}"
ASAN_BUILD="${HVD_ASAN_BUILD_DIR:-$ROOT/build-asan}"
TSAN_BUILD="${HVD_TSAN_BUILD_DIR:-$ROOT/build-tsan}"
# The engine's unit tests (ranks as threads, each with an engine thread and submitters) and
# the mesh's (a listener thread per rank hands connections to the channels' threads).
TSAN_TESTS=(engine_logic_test engine_test engine_negotiation_test timeline_test engine_device_test
  device_backend_test c_engine_api_test mesh_test process_sets_test autotune_test straggler_test)
JOBS="$(nproc)"

"$ROOT/scripts/install-deps.sh"

section() { printf '\n=== %s ===\n' "$*"; }

section "configure and build ($BUILD)"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$JOBS"

section "unit tests"
ctest --test-dir "$BUILD" -L unit --output-on-failure -j"$JOBS"
section "multi-process tests"
# Serial: these fork many ranks each and measure fault-detection times.
ctest --test-dir "$BUILD" -L mp --output-on-failure
section "hvd.torch (pytest under hvdrun at np 2 and np 3, Debian's python3-torch)"
# Serial: each run is a job of several ranks.
ctest --test-dir "$BUILD" -L python --output-on-failure
section "multi-host tests (network namespaces; skipped unless root)"
# Serial: hosts are netns on this machine with one hvdagent each (scripts/netns-cluster.sh), the
# tests share one cluster and measure failure-detection times. Normal build only.
ctest --test-dir "$BUILD" -L e2e --output-on-failure
section "GPU tests (skipped, with the reason, where no GPU is visible; scripts/gpu-check.sh runs them on a GPU machine)"
ctest --test-dir "$BUILD" -L gpu --output-on-failure
# ctest does not show why a test skipped: say it once (exit 77 is the skip).
if [[ -x "$BUILD/bin/hvd-gpu-check" ]]; then
  { "$BUILD/bin/hvd-gpu-check" || [[ $? == 77 ]]; } | sed 's/^/  hvd-gpu-check: /'
fi

if [[ "${HVD_TEST_SKIP_SANITIZE:-0}" != 1 ]]; then
  section "AddressSanitizer + UndefinedBehaviorSanitizer build ($ASAN_BUILD)"
  cmake -S "$ROOT" -B "$ASAN_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHVD_SANITIZE=ON \
    >/dev/null
  cmake --build "$ASAN_BUILD" -j"$JOBS"
  section "unit and multi-process tests under ASan+UBSan"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  ctest --test-dir "$ASAN_BUILD" -L unit --output-on-failure -j"$JOBS"
  ctest --test-dir "$ASAN_BUILD" -L mp --output-on-failure

  section "ThreadSanitizer build of the engine tests ($TSAN_BUILD)"
  cmake -S "$ROOT" -B "$TSAN_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHVD_SANITIZE=thread >/dev/null
  cmake --build "$TSAN_BUILD" -j"$JOBS" --target "${TSAN_TESTS[@]}"
  section "engine tests under ThreadSanitizer"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
  for t in "${TSAN_TESTS[@]}"; do
    # A hang is a failure: each binary gets a deadline, as every ctest has.
    timeout --kill-after=10 900 "$TSAN_BUILD/bin/$t" --gtest_brief=1
  done
fi

section "all tests passed"
