#!/usr/bin/env bash
# Installs what hvd needs, builds it, and runs the main jobs on this machine, started by hvdrun
# (embedded: no daemon, no key file):
#   1. 4 ranks of hvd-bench (allreduce, float32 sum, 1 KiB to 64 MiB), every result checked;
#      prints the nccl-tests style table.
#   2. 4 ranks of hvd-train, a data-parallel MLP trainer on the engine (examples/trainer): the
#      loss falling per epoch, the time per epoch and the share of step time spent waiting for
#      the gradients' allreduces.
#   3. 4 ranks of examples/pytorch/pytorch_synthetic_benchmark.py, an unmodified Horovod-style
#      PyTorch script (import horovod.torch as hvd) on hvd.torch, PYTHONPATH=BUILD/python: a
#      small CNN on synthetic images, the loss falling per iteration and the images per second.
#      Needs torch for /usr/bin/python3 (Debian's python3-torch); skipped with a message without.
#
#   scripts/demo.sh [NP]     (default 4)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HVD_BUILD_DIR:-$ROOT/build}"
NP="${1:-4}"

"$ROOT/scripts/install-deps.sh"
echo "== building hvd in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target hvd-bench hvd-train hvdrun hvd_python >/dev/null

echo "== running: hvdrun -np $NP -- hvd-bench --coll allreduce -b 1K -e 64M -f 4"
echo "   ($NP ranks on this machine, shared memory between them; each row is checked)"
echo
fail() {
  echo
  echo "== demo FAILED (exit $1): see the output above" >&2
  exit "$1"
}

# Only rank 0 prints the table, so untagged lines read best. timeout(1) sends SIGTERM, which
# hvdrun turns into a graceful stop of every rank.
status=0
timeout 600 "$BUILD/bin/hvdrun" -np "$NP" --no-tag-output -- \
  "$BUILD/bin/hvd-bench" --coll allreduce -b 1K -e 64M -f 4 -n 10 -w 3 -c 1 || status=$?
[[ $status -eq 0 ]] || fail $status
echo
echo "== $NP ranks allreduced 1 KiB..64 MiB, every element correct"
echo

TRAIN_ARGS=(--epochs 6 --batch 32 --hidden 128 --samples 16384)
echo "== running: hvdrun -np $NP -- hvd-train ${TRAIN_ARGS[*]}"
echo "   (data-parallel MLP: each rank trains on its 32 rows of every global batch and averages"
echo "    each layer's gradient through the engine as soon as the backward pass has it;"
echo "    'comm' is the share of step time spent waiting for those allreduces)"
echo
timeout 300 "$BUILD/bin/hvdrun" -np "$NP" --no-tag-output -- \
  "$BUILD/bin/hvd-train" "${TRAIN_ARGS[@]}" || status=$?
[[ $status -eq 0 ]] || fail $status
echo

# python3 on the PATH may be a pyenv interpreter without torch; Debian's torch is /usr/bin's.
PYTHON=python3
[[ -x /usr/bin/python3 ]] && PYTHON=/usr/bin/python3
TORCH_ARGS=(--batch-size 32 --num-warmup-batches 2 --num-batches-per-iter 10 --num-iters 6)
if "$PYTHON" -c 'import torch' 2>/dev/null; then
  echo "== running: hvdrun -np $NP -- $PYTHON examples/pytorch/pytorch_synthetic_benchmark.py ${TORCH_ARGS[*]}"
  echo "   (import horovod.torch as hvd: DistributedOptimizer averages each gradient through the"
  echo "    engine while the backward pass goes on; a small CNN learns synthetic images' classes)"
  echo
  # hvdrun passes its environment to the ranks (embedded mode), PYTHONPATH included.
  PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" timeout 300 "$BUILD/bin/hvdrun" -np "$NP" \
    --no-tag-output -- "$PYTHON" "$ROOT/examples/pytorch/pytorch_synthetic_benchmark.py" \
    "${TORCH_ARGS[@]}" || status=$?
  [[ $status -eq 0 ]] || fail $status
  echo
else
  echo "== skipping the PyTorch example: no torch for $PYTHON (apt-get install python3-torch)"
  echo
fi
echo "== demo finished: the benchmark's results were correct and the $NP-rank trainings converged"
