#!/usr/bin/env bash
# Process-set benchmark: two disjoint halves of np 4 allreducing at once, each in its own process
# set, beside a job of np 2 alone, through the engine both times, in one run.
#
# usage: bench/process_sets.sh [--repeats R (default 3)] [--quick] [BUILD_DIR]
#
# Runs, interleaved R times:
#   sets   hvd-local-run -np 4 -- hvd-bench --process-sets ...   (ranks 0,1 and 2,3 at once)
#   alone  hvd-local-run -np 2 -- hvd-bench --engine ...         (the same allreduce, 2 ranks)
# and prints per size the best (lowest) time of each, as busbw: set {0,1}, set {2,3}, the job
# of np 2 alone, and each set's share of it. On a machine with at least 4 cores the sets should
# come close to 1.0 (they share no link and no rank); on fewer cores they share the CPUs. Raw
# outputs are kept in BUILD_DIR/bench-process-sets/. Exits non-zero if a run fails or reports
# wrong elements.
set -euo pipefail

usage() { sed -n '5,5s/^# //p' "$0"; }

REPEATS=3
QUICK=0
BUILD=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeats) REPEATS="${2:?--repeats needs a number}"; shift ;;
    --quick) QUICK=1 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "process_sets.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) BUILD="$1" ;;
  esac
  shift
done
[[ "$REPEATS" =~ ^[1-9][0-9]*$ ]] || { echo "process_sets.sh: --repeats expects a positive integer" >&2; exit 2; }
BUILD="$(cd "$BUILD" && pwd)"
BIN="$BUILD/bin"
OUT="$BUILD/bench-process-sets"
mkdir -p "$OUT"
ARGS=(-b 8 -e 64M -f 4 -n 20 -w 3)
[[ $QUICK == 1 ]] && ARGS=(-b 8 -e 1M -f 8 -n 5 -w 1)

for ((i = 1; i <= REPEATS; i++)); do
  timeout 600 "$BIN/hvd-local-run" -np 4 -- "$BIN/hvd-bench" --process-sets "${ARGS[@]}" \
    > "$OUT/sets.$i.txt"
  timeout 600 "$BIN/hvd-local-run" -np 2 -- "$BIN/hvd-bench" --engine "${ARGS[@]}" \
    > "$OUT/alone.$i.txt"
done
for f in "$OUT"/sets.*.txt "$OUT"/alone.*.txt; do
  grep -q "Out of bounds values : 0 OK" "$f" || { echo "process_sets.sh: $f reports wrong elements or failed" >&2; exit 1; }
done

# Rows: size then time (us) per group; keep each size's lowest time per column over repeats.
best() {  # files... -> "size t1 [t2]" lines
  awk '!/^#/ && NF >= 8 {
         size = $1; n = 0
         for (i = 5; i + 3 <= NF; i += 4) { n++; t = $i
           key = size SUBSEP n
           if (!(key in m) || t < m[key]) m[key] = t }
         cols[size] = n; if (!(size in seen)) { order[++rows] = size; seen[size] = 1 } }
       END { for (r = 1; r <= rows; r++) { s = order[r]; line = s
               for (c = 1; c <= cols[s]; c++) line = line " " m[s SUBSEP c]
               print line } }' "$@"
}
join <(best "$OUT"/sets.*.txt | sort -n) <(best "$OUT"/alone.*.txt | sort -n) | sort -n |
  awk 'BEGIN {
         printf "# allreduce float32 sum through the engine, busbw (GB/s), best of repeats\n"
         printf "# %12s %12s %12s %12s %10s %10s\n", "size (B)", "set {0,1}", "set {2,3}", "np 2 alone", "{0,1}/alone", "{2,3}/alone" }
       { b1 = $1 / $2 / 1e3; b2 = $1 / $3 / 1e3; b0 = $1 / $4 / 1e3   # busbw = algbw at n = 2
         printf "  %12d %12.3f %12.3f %12.3f %10.2f %10.2f\n", $1, b1, b2, b0, b1 / b0, b2 / b0 }'
