#!/usr/bin/env bash
# Adasum against Sum: hvd-bench's allreduce of the same float32 buffers with -o sum and
# -o adasum (docs/allreduce_ops.md), np 2, 4 and 8 on this machine, sizes 1 to 64 MiB, run
# alternately R times; a cell is the best (lowest) of its R out-of-place times. Both check every
# element (hvd-bench's own reference), so a wrong Adasum fails the run. Adasum does more work
# than Sum by design (dot products and norms per tensor, in double, and a halving-doubling
# exchange instead of the ring), so the ratio says what the better convergence costs per step.
#
# usage: bench/adasum.sh [BUILD_DIR] [--np "2 4 8"] [--repeats R (3)] [--iters N (10)]
# Build first: cmake --build BUILD --target hvdrun hvd-bench
set -euo pipefail

usage() { sed -n '9p' "$0" | sed 's/^# //'; }

BUILD=build NPS="2 4 8" REPEATS=3 ITERS=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --np) NPS="${2:?--np needs a list}"; shift ;;
    --repeats) REPEATS="${2:?--repeats needs a number}"; shift ;;
    --iters) ITERS="${2:?--iters needs a number}"; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "adasum.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) BUILD="$1" ;;
  esac
  shift
done
for v in $NPS "$REPEATS" "$ITERS"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] ||
    { echo "adasum.sh: --np, --repeats and --iters expect positive integers" >&2; exit 2; }
done
HVDRUN="$BUILD/bin/hvdrun"
BENCH="$BUILD/bin/hvd-bench"
for f in "$HVDRUN" "$BENCH"; do
  [[ -x "$f" ]] || { echo "adasum.sh: $f is missing (build it first)" >&2; exit 1; }
done
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

for np in $NPS; do
  for ((r = 1; r <= REPEATS; ++r)); do
    for op in sum adasum; do
      log="$OUT/np$np.$op.$r"
      if ! timeout 600 "$HVDRUN" -np "$np" --no-tag-output -- "$BENCH" --coll allreduce -o "$op" \
          -b 1M -e 64M -f 4 -n "$ITERS" -w 2 >"$log" 2>&1; then
        echo "adasum.sh: np $np -o $op failed:" >&2
        tail -5 "$log" >&2
        exit 1
      fi
    done
  done
done

python3 - "$OUT" "$NPS" <<'EOF'
import glob, os, sys
out, nps = sys.argv[1], sys.argv[2].split()
best = {}  # (np, op, bytes) -> us
for path in glob.glob(os.path.join(out, "np*")):
    np_, op, _ = os.path.basename(path)[2:].split(".")
    for line in open(path):
        f = line.split()
        if len(f) >= 9 and f[0].isdigit() and f[3] == op:
            key = (int(np_), op, int(f[0]))
            if int(f[8]) != 0:
                sys.exit("adasum.sh: %s reported wrong elements" % path)
            best[key] = min(best.get(key, float("inf")), float(f[5]))
sizes = sorted({k[2] for k in best})
print("allreduce float32, out-of-place time in us (best of runs): Sum / Adasum (Adasum/Sum)")
print("%-10s" % "size" + "".join("%-28s" % ("np %s" % n) for n in nps))
for s in sizes:
    row = "%-10s" % ("%d MiB" % (s >> 20))
    for n in nps:
        a, b = best.get((int(n), "sum", s)), best.get((int(n), "adasum", s))
        row += "%-28s" % ("%.0f / %.0f (%.2fx)" % (a, b, b / a) if a and b else "-")
    print(row)
EOF
