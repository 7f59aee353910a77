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
#   4. examples/pytorch/pytorch_elastic.py, Horovod's elastic API, on two hosts that are both
#      this machine (localhost and 127.0.0.1, 2 slots each, listed by a discovery script): the
#      demo kills 127.0.0.1's ranks and drops it from discovery (training goes on at 2 ranks),
#      then lists it again (training grows back to 4 ranks); rank 0 prints size and loss.
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

# The pids of the demo's elastic ranks that run as host $1.
ranks_of_host() {
  local pid
  for pid in $(pgrep -f pytorch_elastic.py); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "HOROVOD_HOSTNAME=$1"; then
      echo "$pid"
    fi
  done
}

# Waits (at most 120 s) for a line matching $2 in the log $1.
wait_for_line() {
  local i
  for ((i = 0; i < 1200; ++i)); do
    grep -q "$2" "$1" && return 0
    sleep 0.1
  done
  echo "== demo: no line matching '$2' in time" >&2
  return 1
}

elastic_demo() {
  local dir log pid
  dir="$(mktemp -d)"
  log="$dir/log"
  printf 'localhost:2\n127.0.0.1:2\n' >"$dir/hosts"
  printf '#!/bin/sh\ncat %s\n' "$dir/hosts" >"$dir/discover.sh"
  chmod +x "$dir/discover.sh"
  echo "== running: hvdrun -np 4 --min-np 2 --host-discovery-script discover.sh" \
    "--blacklist-cooldown-range 1 2 -- $PYTHON examples/pytorch/pytorch_elastic.py"
  echo "   (elastic: discover.sh lists localhost:2 and 127.0.0.1:2, two names of this machine that"
  echo "    the job treats as two hosts; the demo kills 127.0.0.1's ranks and drops it, then lists"
  echo "    it again)"
  echo
  PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" timeout 300 "$BUILD/bin/hvdrun" -np 4 \
    --min-np 2 --host-discovery-script "$dir/discover.sh" --blacklist-cooldown-range 1 2 \
    --no-tag-output -- "$PYTHON" "$ROOT/examples/pytorch/pytorch_elastic.py" --epochs 14 \
    --batch-sleep 0.02 >"$log" 2>&1 &
  pid=$!
  tail -n +1 -f --pid="$pid" "$log" &
  wait_for_line "$log" "^epoch  2:" || { kill "$pid"; fail 1; }
  echo "== demo: host 127.0.0.1 is lost: its ranks are killed and discover.sh no longer lists it"
  printf 'localhost:2\n' >"$dir/hosts"
  kill -9 $(ranks_of_host 127.0.0.1) 2>/dev/null || true
  wait_for_line "$log" "^epoch  *[0-9]*: 2 ranks" || { kill "$pid"; fail 1; }
  sleep 2
  echo "== demo: host 127.0.0.1 is back: discover.sh lists it again"
  printf 'localhost:2\n127.0.0.1:2\n' >"$dir/hosts"
  status=0
  wait "$pid" || status=$?
  sleep 0.2
  [[ $status -eq 0 ]] || fail $status
  if ! grep -q ": 2 ranks" "$log" || ! awk '/: 2 ranks/ {two = 1} two && /: 4 ranks/ {grew = 1}
      END {exit grew ? 0 : 1}' "$log"; then
    echo "== demo: the elastic job did not shrink to 2 ranks and grow back to 4" >&2
    fail 1
  fi
  rm -rf "$dir"
  echo
  echo "== the elastic job lost a host, went on at 2 ranks and grew back to 4"
  echo
}

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
  elastic_demo
else
  echo "== skipping the PyTorch examples: no torch for $PYTHON (apt-get install python3-torch)"
  echo
fi
echo "== demo finished: the benchmark's results were correct and the $NP-rank trainings converged"
