#!/usr/bin/env bash
# Elastic benchmark: how long a job stands still when a worker fails, and how long a new host
# takes to join, for hvd's elastic mode beside the full restart of the same job (hvdrun
# --max-restarts 1, and torchrun --max-restarts 1), in one run on this machine.
#
# usage: bench/elastic.sh [BUILD_DIR] [--repeats R (default 3)]
#
# The job is bench/elastic_train.py (torch's import and an 8.4 M-parameter model build at
# start-up, 40 steps, a commit or checkpoint every 5; Debian's python3-torch under
# /usr/bin/python3), 4 ranks on this machine:
#   elastic fail   hvdrun -np 4 --min-np 2 -H localhost:2,127.0.0.1:2 (two names of this machine,
#                  two hosts of the job); rank 3 fails at step 20, so host 127.0.0.1 is
#                  blacklisted: from its failure to the first step done at 2 ranks
#   elastic grow   hvdrun -np 2 --min-np 2 --host-discovery-script (localhost:2); at step 20 the
#                  script starts listing 127.0.0.1:2: from then to the first step done at 4 ranks
#   hvd restart    hvdrun -np 4 --max-restarts 1 --restart-min-uptime 0: rank 3 fails at step
#                  20, every rank is stopped and started again, the job resumes from its last
#                  checkpoint: from the failure to the first step of the new attempt
#   torchrun       torchrun --standalone --nproc_per_node 4 --max_restarts 1, the same job on
#                  torch.distributed (gloo, DDP): from the failure to the first step after it
# Each is run R times, interleaved; the table has the median and min in seconds and the full
# restarts' median over elastic's (the target: elastic resumes at least 5x faster than
# hvdrun's full restart). Absolute figures drift on a shared machine; read the ratios.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
REPEATS=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeats) REPEATS="$2"; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) BUILD="$(cd "$1" && pwd)"; shift ;;
  esac
done
PYTHON=/usr/bin/python3
HVDRUN="$BUILD/bin/hvdrun"
TRAIN="$ROOT/bench/elastic_train.py"
[[ -x "$HVDRUN" ]] || { echo "bench/elastic.sh: no $HVDRUN (build hvd first)" >&2; exit 2; }
"$PYTHON" -c 'import torch' 2>/dev/null || {
  echo "bench/elastic.sh: no torch for $PYTHON (apt-get install python3-torch)" >&2; exit 2; }
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# Seconds from the first "FAIL t" (or the mark file's time) to the first "T t size N ..." after
# it with the given size, or ("restarted") of a later attempt; "-" when the log has none.
measure() {  # LOG SIZE [MARKFILE]
  "$PYTHON" - "$@" <<'EOF'
import re, sys
log, size = sys.argv[1], sys.argv[2]
text = open(log, errors="replace").read()
if len(sys.argv) > 3:
    start = float(open(sys.argv[3]).read())
else:
    fails = [float(t) for t in re.findall(r"FAIL (\d+\.\d+)", text)]
    if not fails:
        print("-"); sys.exit()
    start = fails[0]
for t, n, a in re.findall(r"T (\d+\.\d+) size (\d+) step \d+ attempt (\d+)", text):
    if float(t) > start and (n == size if size != "restarted" else int(a) > 0):
        print("%.3f" % (float(t) - start)); sys.exit()
print("-")
EOF
}

run_elastic_fail() {  # LOG
  timeout 300 "$HVDRUN" -np 4 --min-np 2 -H localhost:2,127.0.0.1:2 --no-tag-output -- \
    "$PYTHON" "$TRAIN" --mode elastic --fail-rank 3 --fail-step 20 >"$1" 2>&1 || true
  measure "$1" 2
}

run_elastic_grow() {  # LOG
  local hosts="$WORK/hosts" mark="$WORK/grow.mark" pid i
  printf 'localhost:2\n' >"$hosts"
  printf '#!/bin/sh\ncat %s\n' "$hosts" >"$WORK/discover.sh"
  chmod +x "$WORK/discover.sh"
  rm -f "$mark"
  timeout 300 "$HVDRUN" -np 2 --min-np 2 --host-discovery-script "$WORK/discover.sh" \
    --no-tag-output -- "$PYTHON" "$TRAIN" --mode elastic --steps 100 >"$1" 2>&1 &
  pid=$!
  for ((i = 0; i < 1200; ++i)); do
    grep -q "size 2 step 20 " "$1" && break
    sleep 0.05
  done
  date +%s.%N >"$mark"
  printf 'localhost:2\n127.0.0.1:2\n' >"$hosts"
  wait "$pid" || true
  measure "$1" 4 "$mark"
}

run_hvd_restart() {  # LOG
  rm -f "$WORK/ckpt"
  timeout 300 "$HVDRUN" -np 4 --max-restarts 1 --restart-min-uptime 0 --no-tag-output -- \
    "$PYTHON" "$TRAIN" --mode restart --fail-rank 3 --fail-step 20 --checkpoint "$WORK/ckpt" \
    >"$1" 2>&1 || true
  measure "$1" restarted
}

run_torchrun() {  # LOG
  rm -f "$WORK/ckpt"
  # Debian 12's torch 1.13 cannot parse --redirects/--tee's default (bench/launch.sh says why).
  timeout 300 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node 4 \
    --max_restarts 1 --redirects 2 --tee 2 "$TRAIN" --mode torchrun --fail-rank 3 \
    --fail-step 20 --checkpoint "$WORK/ckpt" >"$1" 2>&1 || true
  measure "$1" restarted
}

declare -A RESULTS
KINDS=(elastic_fail elastic_grow hvd_restart torchrun)
for ((r = 1; r <= REPEATS; ++r)); do
  for kind in "${KINDS[@]}"; do
    value="$("run_$kind" "$WORK/$kind.$r.log")"
    RESULTS[$kind]+="$value "
    echo "  repeat $r: $kind ${value} s" >&2
    [[ "$value" != "-" ]] || { echo "    (no figure; the log follows)" >&2; tail -20 "$WORK/$kind.$r.log" >&2; }
  done
done

"$PYTHON" - "${RESULTS[elastic_fail]}" "${RESULTS[elastic_grow]}" "${RESULTS[hvd_restart]}" \
  "${RESULTS[torchrun]}" <<'EOF'
import statistics, sys
names = ["elastic: failure -> resumed at 2 ranks", "elastic: host listed -> training at 4",
         "hvdrun --max-restarts 1: failure -> resumed", "torchrun --max-restarts 1: failure -> resumed"]
figures = [[float(v) for v in arg.split() if v != "-"] for arg in sys.argv[1:]]
med = [statistics.median(f) if f else float("nan") for f in figures]
print()
print("%-46s %9s %9s %5s" % ("np 4 on this machine (seconds)", "median", "min", "runs"))
for name, f, m in zip(names, figures, med):
    print("%-46s %9.3f %9.3f %5d" % (name, m, min(f) if f else float("nan"), len(f)))
print()
print("full restart / elastic resume (medians): hvdrun %.1fx, torchrun %.1fx" % (
    med[2] / med[0], med[3] / med[0]))
EOF
