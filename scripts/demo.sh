#!/usr/bin/env bash
# Installs what hvd needs, builds it, and runs the main job on this machine: 4 ranks of
# hvd-bench (allreduce, float32 sum, 1 KiB to 64 MiB) started by hvdrun (embedded: no daemon, no
# key file), every result checked. Prints the nccl-tests style table.
#
#   scripts/demo.sh [NP]     (default 4)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HVD_BUILD_DIR:-$ROOT/build}"
NP="${1:-4}"

"$ROOT/scripts/install-deps.sh"
echo "== building hvd in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target hvd-bench hvdrun >/dev/null

echo "== running: hvdrun -np $NP -- hvd-bench --coll allreduce -b 1K -e 64M -f 4"
echo "   ($NP ranks on this machine, shared memory between them; each row is checked)"
echo
# Only rank 0 prints the table, so untagged lines read best. timeout(1) sends SIGTERM, which
# hvdrun turns into a graceful stop of every rank.
if timeout 600 "$BUILD/bin/hvdrun" -np "$NP" --no-tag-output -- \
  "$BUILD/bin/hvd-bench" --coll allreduce -b 1K -e 64M -f 4 -n 10 -w 3 -c 1; then
  echo
  echo "== demo finished: $NP ranks allreduced 1 KiB..64 MiB, every element correct"
else
  status=$?
  echo
  echo "== demo FAILED (exit $status): see the output above" >&2
  exit $status
fi
