#!/usr/bin/env bash
# Autotune benchmark: ResNet-50's gradient pattern (bench/resnet50_parameters.tsv, 161 float32
# tensors, 97.5 MiB; hvd-fusion-bench submits them in backward order each step and waits) at
# np N, over loopback (one host: shared memory) and over N network-namespace hosts whose veth
# links tbf shapes to RATE each way (scripts/netns-cluster.sh; one rank per host, TCP), with:
#   defaults   the engine's own knobs (128 MiB fusion, 1 ms cycles, cache on)
#   sweep      a grid of --fusion-threshold-mb {0,1,4,16,64,128} x --cycle-time-ms {1,4,16}, one
#              run each; the best (lowest median step time) is re-run as "best" below
#   autotune   hvdrun --autotune with Horovod's sample settings (--warmup-samples,
#              --steps-per-sample, --bayes-samples), the search inside the bench's untimed
#              warm-up steps (budget x (steps per sample + 3), enough for any search to end;
#              the run fails unless the log's last row, the choice, is there), then S timed steps
# defaults, best and autotune run R times each, interleaved (the shared machines this runs on
# drift over tens of seconds); a cell is the median of its R runs' median step times. The table
# gives ms per step, the throughput (MB/s of gradients), the configuration autotune chose, and
# autotune's throughput as a share of the sweep's best (target: >= 90%).
#
# usage: bench/autotune.sh [BUILD_DIR] [--np N (4)] [--repeats R (3)] [--steps S (20)]
#                          [--rate RATE (4gbit)] [--no-netns] [--warmup-samples W (3)]
#                          [--steps-per-sample K (10)] [--bayes-samples B (20)]
#                          [--quick (1 repeat, 10 steps, K 4, B 10: a smoke run)]
# The netns part needs root and `ip netns` (skipped with a message otherwise, or --no-netns).
# Build first: cmake --build BUILD --target hvdrun hvdagent hvd-fusion-bench
# Raw outputs are kept in BUILD_DIR/bench-autotune/. Exits non-zero if a run fails or is wrong.
set -euo pipefail

usage() { sed -n '18,21s/^# //p' "$0"; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD=build NP=4 REPEATS=3 STEPS=20 RATE=4gbit NETNS_ON=1 WARMUP_SAMPLES=3 PER_SAMPLE=10 BAYES=20
while [[ $# -gt 0 ]]; do
  case "$1" in
    --np) NP="${2:?--np needs a number}"; shift ;;
    --repeats) REPEATS="${2:?--repeats needs a number}"; shift ;;
    --steps) STEPS="${2:?--steps needs a number}"; shift ;;
    --rate) RATE="${2:?--rate needs a tc rate such as 4gbit}"; shift ;;
    --no-netns) NETNS_ON=0 ;;
    --warmup-samples) WARMUP_SAMPLES="${2:?}"; shift ;;
    --steps-per-sample) PER_SAMPLE="${2:?}"; shift ;;
    --bayes-samples) BAYES="${2:?}"; shift ;;
    --quick) REPEATS=1 STEPS=10 PER_SAMPLE=4 BAYES=10 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "autotune.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) BUILD="$1" ;;
  esac
  shift
done
for v in "$NP" "$REPEATS" "$STEPS" "$PER_SAMPLE" "$BAYES"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] ||
    { echo "autotune.sh: --np, --repeats, --steps, --steps-per-sample and --bayes-samples expect positive integers" >&2; exit 2; }
done
[[ "$WARMUP_SAMPLES" =~ ^[0-9]+$ ]] ||
  { echo "autotune.sh: --warmup-samples expects a non-negative integer" >&2; exit 2; }
BUILD="$(cd "$BUILD" && pwd)"
HVDRUN="$BUILD/bin/hvdrun"
BENCH="$BUILD/bin/hvd-fusion-bench"
for f in "$HVDRUN" "$BENCH"; do
  [[ -x "$f" ]] || { echo "autotune.sh: $f is missing (build it first)" >&2; exit 1; }
done
OUT="$BUILD/bench-autotune"
rm -rf "$OUT"
mkdir -p "$OUT"

# The most samples a search takes (engine/autotune.h: warm-up + Bayesian + 2 for the cache; no
# hierarchical allreduce for host buffers), and untimed steps enough for all of them.
BUDGET=$((WARMUP_SAMPLES + BAYES + 2))
TUNE_WARMUP=$((BUDGET * (PER_SAMPLE + 3)))

CLUSTER=""
cleanup() { [[ -z "$CLUSTER" ]] || "$ROOT/scripts/netns-cluster.sh" down --prefix "$CLUSTER" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# run SETTING LABEL WARMUP [hvdrun options...]: one run; prints its median step time (ms).
run() {
  local setting="$1" label="$2" warmup="$3"
  shift 3
  local log="$OUT/$setting.$label.$((++RUNS)).log"
  local where=()
  [[ "$setting" == loopback ]] || where=(-H "$HOSTS_SPEC" --key-file "$KEY")
  if ! timeout 900 "$HVDRUN" -np "$NP" "${where[@]}" "$@" -- "$BENCH" --steps "$STEPS" \
      --warmup "$warmup" >"$log" 2>&1; then
    echo "autotune.sh: $setting $label failed (see $log):" >&2
    tail -5 "$log" >&2
    exit 1
  fi
  local result
  result="$(grep -o 'RESULT .*' "$log" | tail -1)"
  [[ "$result" == *" wrong=0"* ]] || { echo "autotune.sh: $setting $label: wrong elements ($log)" >&2; exit 1; }
  sed -n 's/.* median_ms=\([0-9.]*\).*/\1/p' <<<"$result"
}
RUNS=0

RESULTS="$OUT/results.txt"
: >"$RESULTS"
bench_setting() {  # SETTING
  local setting="$1" best="" best_ms="" f c ms
  echo "== $setting: sweep" >&2
  for f in 0 1 4 16 64 128; do
    for c in 1 4 16; do
      ms="$(run "$setting" "sweep-f$f-c$c" 3 --fusion-threshold-mb "$f" --cycle-time-ms "$c")"
      echo "   fusion $f MiB, cycle $c ms: $ms ms/step" >&2
      echo "$setting sweep $f $c $ms" >>"$RESULTS"
      if [[ -z "$best_ms" ]] || awk -v a="$ms" -v b="$best_ms" 'BEGIN { exit !(a < b) }'; then
        best="$f $c" best_ms="$ms"
      fi
    done
  done
  read -r f c <<<"$best"
  echo "== $setting: defaults, best (fusion $f MiB, cycle $c ms), autotune; $REPEATS rounds" >&2
  local r csv
  for ((r = 1; r <= REPEATS; ++r)); do
    echo "$setting defaults - - $(run "$setting" defaults 3)" >>"$RESULTS"
    echo "$setting best $f $c $(run "$setting" best 3 --fusion-threshold-mb "$f" --cycle-time-ms "$c")" >>"$RESULTS"
    csv="$OUT/$setting.autotune.$r.csv"
    ms="$(run "$setting" autotune "$TUNE_WARMUP" --autotune --autotune-log-file "$csv" \
      --autotune-warmup-samples "$WARMUP_SAMPLES" --autotune-steps-per-sample "$PER_SAMPLE" \
      --autotune-bayes-opt-max-samples "$BAYES")"
    local rows
    rows=$(($(wc -l <"$csv") - 1))
    ((rows >= 2 && rows <= BUDGET - WARMUP_SAMPLES + 1)) ||
      { echo "autotune.sh: $csv has $rows rows (expected 2..$((BUDGET - WARMUP_SAMPLES + 1)))" >&2; exit 1; }
    # The choice: the log's last row (cache, cycle ms, fusion MiB).
    IFS=, read -r _ _ _ cache cycle fusion _ < <(tail -1 "$csv")
    echo "$setting autotune $fusion $cycle $ms $cache" >>"$RESULTS"
  done
}

bench_setting loopback

if [[ $NETNS_ON == 1 ]]; then
  WHY=""
  if [[ $EUID -ne 0 ]]; then WHY="needs root for network namespaces"
  elif ! ip netns list >/dev/null 2>&1; then WHY="'ip netns' is not available"
  elif [[ ! -x "$BUILD/bin/hvdagent" ]]; then WHY="no $BUILD/bin/hvdagent (build it)"
  fi
  if [[ -n "$WHY" ]]; then
    echo "autotune.sh: netns part skipped: $WHY" >&2
  else
    CLUSTER="bat$$"
    env_lines="$("$ROOT/scripts/netns-cluster.sh" up "$NP" --prefix "$CLUSTER" --bin "$BUILD/bin" \
      --log-level warn 2>"$OUT/netns.log")" || { cat "$OUT/netns.log" >&2; exit 1; }
    KEY="$(sed -n 's/^KEY=//p' <<<"$env_lines")"
    HOSTS_SPEC="$(sed -n 's/^HOSTS=//p' <<<"$env_lines" | sed 's/,/:1,/g'):1"
    for ((i = 0; i < NP; ++i)); do
      tc qdisc replace dev "$CLUSTER-v$i" root tbf rate "$RATE" burst 1mb latency 20ms
      ip netns exec "$CLUSTER-h$i" tc qdisc replace dev eth0 root tbf rate "$RATE" burst 1mb latency 20ms
    done
    bench_setting "netns-$RATE"
  fi
fi

python3 - "$RESULTS" "$NP" "$REPEATS" <<'EOF'
import statistics, sys
path, np, repeats = sys.argv[1], sys.argv[2], sys.argv[3]
BYTES = 102228128  # the 161 tensors of bench/resnet50_parameters.tsv, as hvd-fusion-bench says
rows = [line.split() for line in open(path)]
print("\nResNet-50 gradient step (161 tensors, 97.5 MiB), np %s, median of %s runs per cell "
      "(ms/step, MB/s)" % (np, repeats))
print("%-16s %-18s %-30s %-44s %s" % ("setting", "defaults", "sweep best", "autotune (its choice)",
                                    "autotune/best"))
for setting in dict.fromkeys(r[0] for r in rows):
    def cell(kind):
        ms = statistics.median(float(r[4]) for r in rows if r[0] == setting and r[1] == kind)
        return ms, BYTES / ms / 1e3
    d, b, a = cell("defaults"), cell("best"), cell("autotune")
    best = next(r for r in rows if r[0] == setting and r[1] == "best")
    choices = ["%s MiB %s ms%s" % (r[2], r[3], "" if r[5] == "1" else " nocache")
               for r in rows if r[0] == setting and r[1] == "autotune"]
    print("%-16s %-18s %-30s %-44s %.0f%%" % (
        setting, "%.1f %6.0f" % d, "%.1f %6.0f (%s MiB, %s ms)" % (b[0], b[1], best[2], best[3]),
        "%.1f %6.0f (%s)" % (a[0], a[1], "; ".join(choices)), 100 * a[1] / b[1]))
EOF
