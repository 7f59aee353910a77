#!/usr/bin/env bash
# The GPU checks, in one call, on a machine with an NVIDIA GPU, the CUDA toolkit (with NCCL),
# CMake, ninja and a C++ compiler, but none of Debian's packages and no network:
#   1. builds libhvd with the NCCL backend and the GPU programs from tests/gpu/standalone,
#      against the header-only copies in third_party/gpu-deps (made by scripts/gpu-deps.sh on a
#      machine with Debian's packages; the device tool carries that folder along);
#   2. one rank, NCCL: every collective, every dtype and every op on device buffers, checked
#      value by value (hvd-gpu-check --backend nccl);
#   3. two ranks sharing the one GPU over the host-staged path (hvd-gpu-check --np 2
#      --backend host; NCCL itself refuses two ranks on one GPU);
#   4. hvd-gpu-bench: hvd::allreduce on device buffers, 64 KiB .. 1 GiB, beside a plain
#      ncclAllReduce loop at np 1, as a table;
#   5. hvd.torch on CUDA tensors with the machine's own torch (tests/python/gpu/cuda_check.py,
#      integer scale factors and in-flight names included):
#      np 1 over NCCL, np 2 sharing the GPU over the host-staged path; the ranks meet through a
#      file store (HVD_STORE_FILE), since hvdrun needs gRPC, which this machine lacks;
#   6. process sets on CUDA tensors (tests/python/gpu/cuda_process_sets.py): np 2 over NCCL,
#      each rank a set of its own with a one-rank communicator of its own, and np 4 over the
#      host-staged path with the pairs [0, 1] and [2, 3] besides.
# Each step has a deadline; the whole run is meant to take well under 8 minutes. A short
# summary comes last; the exit status is non-zero if any step failed.
#
#   scripts/gpu-check.sh        (HVD_GPU_BUILD_DIR, HVD_DEPS_DIR override the folders)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HVD_GPU_BUILD_DIR:-$ROOT/build-gpu}"
DEPS="${HVD_DEPS_DIR:-$ROOT/third_party/gpu-deps}"
LOGS="$BUILD/logs"
JOBS="$(nproc)"
START=$SECONDS
SUMMARY=()
FAILED=0

if [[ ! -f "$DEPS/include/boost/asio.hpp" ]]; then
  echo "gpu-check: $DEPS has no headers: run scripts/gpu-deps.sh where Debian's packages are" \
    "installed and bring third_party/gpu-deps along" >&2
  exit 2
fi
mkdir -p "$LOGS"

# step NAME DEADLINE COMMAND...: runs it with its output in $LOGS/NAME.log (and on the
# terminal), records PASS / FAIL / SKIP (exit 77) and the seconds it took.
step() {
  local name="$1" deadline="$2"
  shift 2
  local t0=$SECONDS rc
  printf '\n=== %s ===\n' "$name"
  timeout --kill-after=10 "$deadline" "$@" 2>&1 | tee "$LOGS/$name.log"
  rc=${PIPESTATUS[0]}
  local took=$((SECONDS - t0)) verdict=PASS
  if ((rc == 77)); then
    verdict="SKIP ($(grep -m1 '^SKIP' "$LOGS/$name.log" || echo 'exit 77'))"
  elif ((rc == 124 || rc == 137)); then
    verdict="FAIL (no result within ${deadline} s)"
    FAILED=1
  elif ((rc != 0)); then
    verdict="FAIL (exit $rc; $LOGS/$name.log)"
    FAILED=1
  fi
  SUMMARY+=("$(printf '%-22s %4ss  %s' "$name" "$took" "$verdict")")
  return $rc
}

# NCCL: the CUDA toolkit's, or else the one PyTorch's wheels bring (nvidia-nccl-*), which has
# nccl.h and libnccl.so.2 under one folder; the loader also looks in $NCCL_HOME/lib.
if [[ -z "${NCCL_HOME:-}" ]] && ! ls /usr/local/cuda/include/nccl.h /usr/include/nccl.h \
  > /dev/null 2>&1; then
  wheel="$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2> /dev/null || true)"
  if [[ -n "$wheel" && -f "$wheel/include/nccl.h" ]]; then
    export NCCL_HOME="$wheel"
    echo "gpu-check: NCCL from $NCCL_HOME"
  fi
fi
gpu="$(nvidia-smi -L 2>/dev/null | head -1 || true)"
echo "gpu-check: ${gpu:-nvidia-smi not found}; nvcc: $(nvcc --version 2>/dev/null | tail -1)"

# torch_ranks N BACKEND [SCRIPT]: N ranks of SCRIPT (default tests/python/gpu/cuda_check.py) on
# this machine's torch, the worker environment hvdrun would set, a file store in a fresh
# directory; fails if any fails.
torch_ranks() {
  local n="$1" backend="$2" script="${3:-$ROOT/tests/python/gpu/cuda_check.py}" lib store r rc=0
  lib="$(find "$BUILD" -name 'libhvd.so*' -type f | head -1)"
  store="$(mktemp -d)"
  local pids=()
  for ((r = 0; r < n; ++r)); do
    HVD_RANK=$r HVD_SIZE=$n HVD_LOCAL_RANK=$r HVD_LOCAL_SIZE=$n HVD_CROSS_RANK=0 \
      HVD_CROSS_SIZE=1 HVD_JOB_ID="gpu-check-torch-$n" HVD_STORE_FILE="$store" \
      HVD_GPU_BACKEND="$backend" HVD_LIBRARY="$lib" HVD_TIMEOUT=60 \
      PYTHONPATH="$ROOT/python" python3 "$script" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
  rm -rf "$store"
  return $rc
}

generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
if step build 300 bash -c "cmake -S '$ROOT/tests/gpu/standalone' -B '$BUILD' ${generator[*]} \
      -DHVD_DEPS_DIR='$DEPS' > '$LOGS/configure.log' 2>&1 || { cat '$LOGS/configure.log'; exit 1; }
    grep -E 'hvd: (found|Boost)' '$LOGS/configure.log'
    cmake --build '$BUILD' -j$JOBS --target hvd-gpu-check hvd-gpu-bench 2>&1 | tail -3
    exit \${PIPESTATUS[0]}"; then
  step nccl-np1-collectives 240 "$BUILD/bin/hvd-gpu-check" --backend nccl
  step host-staged-np2 240 "$BUILD/bin/hvd-gpu-check" --np 2 --backend host
  step bench-allreduce 240 "$BUILD/bin/hvd-gpu-bench" -b 64K -e 1G -n 20 -w 5
  step torch-cuda-np1-nccl 150 torch_ranks 1 nccl
  step torch-cuda-np2-staged 150 torch_ranks 2 host
  step torch-sets-np2-nccl 120 torch_ranks 2 nccl "$ROOT/tests/python/gpu/cuda_process_sets.py"
  step torch-sets-np4-staged 120 torch_ranks 4 host "$ROOT/tests/python/gpu/cuda_process_sets.py"
fi

printf '\n=== summary (%s s) ===\n' "$((SECONDS - START))"
printf '%s\n' "${SUMMARY[@]}"
if [[ -f "$LOGS/bench-allreduce.log" ]]; then
  grep -E '^ +(65536|1048576|67108864|1073741824) ' "$LOGS/bench-allreduce.log" |
    awk '{printf "bench %10s B: hvd %8.2f GB/s, nccl %8.2f GB/s, hvd/nccl time %s\n", $1, $4, $6, $7}'
fi
exit $FAILED
