#!/usr/bin/env bash
# What watching a job costs: the engine's straggler tracking (every rank records each op's wait;
# every HVD_STRAGGLER_WINDOW ops the ranks allgather them) on (the default window, 256) and off
# (0), for the 8-byte allreduce latency through the engine (hvd-bench --engine, 2000
# iterations) and for ResNet-50's gradient step (hvd-fusion-bench, 161 tensors, 97.5 MiB), at
# np N, alternately R times in one run; a cell is the median of its R runs. Also the same job
# started through a local hvdagent serving --metrics-listen and scraped every 100 ms by this
# script, against the same agent without metrics (the agent's side of the cost).
#
# usage: bench/observability.sh [BUILD_DIR] [--np N (2)] [--repeats R (5)]
# Build first: cmake --build BUILD --target hvdrun hvdagent hvd-bench hvd-fusion-bench
set -euo pipefail

usage() { sed -n '9p' "$0" | sed 's/^# //'; }

BUILD=build NP=2 REPEATS=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    --np) NP="${2:?--np needs a number}"; shift ;;
    --repeats) REPEATS="${2:?--repeats needs a number}"; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "observability.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) BUILD="$1" ;;
  esac
  shift
done
for v in "$NP" "$REPEATS"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] ||
    { echo "observability.sh: --np and --repeats expect positive integers" >&2; exit 2; }
done
BUILD="$(cd "$BUILD" && pwd)"
for f in hvdrun hvdagent hvd-bench hvd-fusion-bench; do
  [[ -x "$BUILD/bin/$f" ]] || { echo "observability.sh: $BUILD/bin/$f is missing (build it first)" >&2; exit 1; }
done
WORK="$(mktemp -d)"
AGENT_PID=""
SCRAPER_PID=""
cleanup() {
  [[ -z "$SCRAPER_PID" ]] || kill "$SCRAPER_PID" 2>/dev/null || true
  [[ -z "$AGENT_PID" ]] || { kill "$AGENT_PID" 2>/dev/null; wait "$AGENT_PID" 2>/dev/null; } || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# latency WINDOW [hvdrun options]: the engine's 8-byte allreduce time in us.
latency() {
  local window="$1"
  shift
  timeout 300 "$BUILD/bin/hvdrun" -np "$NP" "$@" --no-tag-output -x "HVD_STRAGGLER_WINDOW=$window" \
    -- "$BUILD/bin/hvd-bench" --engine --coll allreduce -b 8 -e 8 -n 2000 -w 200 2>&1 |
    awk '$1 == 8 && $8 == 0 { print $5 }' | tail -1
}
# step WINDOW [hvdrun options]: the ResNet-50 gradient step's median in ms.
step() {
  local window="$1"
  shift
  timeout 300 "$BUILD/bin/hvdrun" -np "$NP" "$@" -x "HVD_STRAGGLER_WINDOW=$window" \
    -- "$BUILD/bin/hvd-fusion-bench" --steps 20 --warmup 3 2>&1 |
    sed -n 's/.*RESULT .* median_ms=\([0-9.]*\).* wrong=0.*/\1/p' | tail -1
}

RESULTS="$WORK/results"
for ((r = 1; r <= REPEATS; ++r)); do
  for window in 0 256; do
    v="$(latency "$window")"; [[ -n "$v" ]] || { echo "observability.sh: latency run failed" >&2; exit 1; }
    echo "latency $window $v" >>"$RESULTS"
    v="$(step "$window")"; [[ -n "$v" ]] || { echo "observability.sh: step run failed" >&2; exit 1; }
    echo "step $window $v" >>"$RESULTS"
  done
done

# The agent's side: the same step through a local agent, with and without a scraped endpoint.
KEY="$WORK/cluster.key"
"$BUILD/bin/hvdrun" keygen --key-file "$KEY" >/dev/null
start_agent() {  # [--metrics-listen ...]
  HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$BUILD/bin/hvdagent" --listen 127.0.0.1:0 --port-file "$WORK/port" --key-file "$KEY" \
    --state-dir "$WORK/state" --allow-run-as-root --log-level warn "$@" >"$WORK/agent.log" 2>&1 &
  AGENT_PID=$!
  for _ in $(seq 100); do [[ -s "$WORK/port" ]] && break; sleep 0.1; done
  [[ -s "$WORK/port" ]] || { echo "observability.sh: the agent did not start" >&2; cat "$WORK/agent.log" >&2; exit 1; }
}
stop_agent() {
  kill "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true
  AGENT_PID=""
  rm -f "$WORK/port" "$WORK/mport"
}
for ((r = 1; r <= REPEATS; ++r)); do
  for metrics in off on; do
    if [[ $metrics == on ]]; then
      start_agent --metrics-listen 127.0.0.1:0 --metrics-port-file "$WORK/mport"
      for _ in $(seq 100); do [[ -s "$WORK/mport" ]] && break; sleep 0.1; done
      python3 -c 'import sys, time, urllib.request
while True:
    try:
        urllib.request.urlopen(sys.argv[1], timeout=5).read()
    except OSError:
        pass
    time.sleep(0.1)' "http://127.0.0.1:$(cat "$WORK/mport")/metrics" &
      SCRAPER_PID=$!
    else
      start_agent
    fi
    v="$(step 256 -H "localhost:$NP" --agent-port "$(cat "$WORK/port")" --key-file "$KEY")"
    [[ -n "$v" ]] || { echo "observability.sh: agent step run failed" >&2; cat "$WORK/agent.log" >&2; exit 1; }
    echo "agent-step $metrics $v" >>"$RESULTS"
    [[ -z "$SCRAPER_PID" ]] || { kill "$SCRAPER_PID"; wait "$SCRAPER_PID" 2>/dev/null || true; SCRAPER_PID=""; }
    stop_agent
  done
done

python3 - "$RESULTS" "$NP" "$REPEATS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def med(kind, setting):
    return statistics.median(float(r[2]) for r in rows if r[0] == kind and r[1] == setting)
print("np %s, median of %s alternating runs" % (sys.argv[2], sys.argv[3]))
print("%-44s %12s %12s %8s" % ("", "off", "on", "on/off"))
for kind, off, on, label in (("latency", "0", "256", "8 B engine allreduce (us), stragglers"),
                             ("step", "0", "256", "ResNet-50 step (ms), stragglers"),
                             ("agent-step", "off", "on", "ResNet-50 step via agent (ms), metrics")):
    a, b = med(kind, off), med(kind, on)
    print("%-44s %12.2f %12.2f %8.3f" % (label, a, b, b / a))
EOF
