#!/usr/bin/env bash
# Torch step benchmark: a torchvision ResNet training step on synthetic images through
# hvd.torch's DistributedOptimizer under hvdrun, beside torch's DistributedDataParallel on gloo,
# and the per-op cost of a Python submit against the C++ engine call, in one run.
#
# usage: bench/torch_step.sh [BUILD_DIR] [--np "1 2 4"] [--repeats R (1)] [--model resnet18]
#                            [--batch-size 16] [--image-size 64] [--steps 10] [--warmup 3]
#                            [--threads 1] [--latency-repeats L (3)] [--quick]
#
# Part 1, for each np, R times, interleaved (hvd, ddp, hvd, ...) since a shared machine drifts:
#   hvd  hvdrun -np N -- python3 bench/torch_step.py step --impl hvd   (import horovod.torch,
#            PYTHONPATH=BUILD/python; DistributedOptimizer with named_parameters)
#   ddp  hvdrun -np N -- python3 bench/torch_step.py step --impl ddp   (DistributedDataParallel,
#            gloo, env:// from the MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE hvdrun sets; the
#            same launcher for both, so only the data-parallel library differs)
# with the same model, batch per rank, image size, seed and torch.set_num_threads (--threads)
# per rank. It prints images per second (all ranks), scaling efficiency against np 1 of the same
# library (img/s at N / (N x img/s at 1)), the share of step time spent waiting for gradients,
# and hvd/DDP of the images per second (above 1: hvd is faster). The wait share:
#   hvd measured  time in optimizer.synchronize(), called explicitly after backward (then step()
#                 under optimizer.skip_synchronize()), over the step time;
#   est           for both: (backward [+ synchronize]) at N minus the same at np 1 of that
#                 library, over the step time at N. DDP waits inside backward, so it has only
#                 this estimate. It also counts any compute slowdown at N (ranks sharing cores,
#                 the libraries' own threads), so it is an upper bound, and the same one for both.
# Part 2, L times interleaved at np 1 and 2: the per-op cost of a tiny (1 float32) allreduce,
#   cpp     hvdrun -np N -- hvd-op-latency            (hvd::allreduceAsync + Handle::wait)
#   python  hvdrun -np N -- python3 bench/torch_step.py latency
#                                                     (hvd.allreduce_async_ + hvd.synchronize)
# in microseconds per op: seq (submit then wait, one op at a time: the round trip through the
# engine), and caller (the submitting thread's time: submit of 64 ops back to back, plus
# synchronize of each once done); the best (lowest) of L runs; python - cpp is what the binding
# adds per op. Target: at most 20 us of caller time per op.
#
# A cell is the best run of its R (L) repeats. Absolute figures drift on a shared machine; read
# the ratios. With np above the cores, ranks share cores and scaling efficiency falls for both.
# Needs /usr/bin/python3 (PYTHON overrides) with torch and torchvision (python3-torchvision is
# installed with apt-get when missing, as root). Build first:
#   cmake --build BUILD --target hvdrun hvd_python hvd-op-latency
# Raw outputs are kept in BUILD_DIR/bench-torch-step/. Exits non-zero if any run fails.
set -euo pipefail

usage() { sed -n '6,8s/^# //p' "$0"; }

NPS="1 2 4"
REPEATS=1
LAT_REPEATS=3
MODEL=resnet18
BATCH=16
IMAGE=64
STEPS=10
WARMUP=3
THREADS=1
BUILD=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --np) NPS="${2:?--np needs a list}"; shift ;;
    --repeats) REPEATS="${2:?--repeats needs a number}"; shift ;;
    --latency-repeats) LAT_REPEATS="${2:?--latency-repeats needs a number}"; shift ;;
    --model) MODEL="${2:?--model needs a name}"; shift ;;
    --batch-size) BATCH="${2:?--batch-size needs a number}"; shift ;;
    --image-size) IMAGE="${2:?--image-size needs a number}"; shift ;;
    --steps) STEPS="${2:?--steps needs a number}"; shift ;;
    --warmup) WARMUP="${2:?--warmup needs a number}"; shift ;;
    --threads) THREADS="${2:?--threads needs a number}"; shift ;;
    --quick) STEPS=4 WARMUP=1 LAT_REPEATS=1 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "torch_step.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) BUILD="$1" ;;
  esac
  shift
done
for v in "$REPEATS" "$LAT_REPEATS" "$BATCH" "$IMAGE" "$STEPS" "$THREADS" $NPS; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] ||
    { echo "torch_step.sh: expected a positive integer, got '$v'" >&2; exit 2; }
done
[[ "$WARMUP" =~ ^[0-9]+$ ]] || { echo "torch_step.sh: --warmup expects an integer" >&2; exit 2; }
[[ -n "${NPS// /}" ]] || { echo "torch_step.sh: --np list is empty" >&2; exit 2; }
[[ "$MODEL" =~ ^[a-z0-9_]+$ ]] || { echo "torch_step.sh: bad --model $MODEL" >&2; exit 2; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$(cd "$BUILD" && pwd)"
BIN="$BUILD/bin"
for f in "$BIN/hvdrun" "$BIN/hvd-op-latency" "$BUILD/python/horovod/torch/__init__.py"; do
  [[ -e "$f" ]] || { echo "torch_step.sh: missing $f (build it first)" >&2; exit 2; }
done
# Debian's torch is /usr/bin/python3's; a python3 earlier in PATH (pyenv's) does not see it.
PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
  if [[ -x /usr/bin/python3 ]]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
"$PYTHON" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2> /dev/null ||
  { echo "torch_step.sh: no torch with gloo for $PYTHON (apt-get install python3-torch)" >&2; exit 2; }
if ! "$PYTHON" -c 'import torchvision' 2> /dev/null; then
  if [[ $EUID -eq 0 ]] && command -v apt-get > /dev/null; then
    echo "# torch_step.sh: installing python3-torchvision"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torchvision > /dev/null 2>&1 ||
      { apt-get update -qq > /dev/null 2>&1 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torchvision > /dev/null 2>&1 || true; }
  fi
  "$PYTHON" -c 'import torchvision' 2> /dev/null ||
    { echo "torch_step.sh: no torchvision for $PYTHON (apt-get install python3-torchvision)" >&2; exit 2; }
fi

RUN_TIMEOUT=600
OUTDIR="$BUILD/bench-torch-step"
mkdir -p "$OUTDIR"
rm -f "$OUTDIR"/*.txt
RUNS="$OUTDIR/runs.tsv"
: > "$RUNS"
FAILURES=()
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"

# run_one OUT LABEL CMD...: runs CMD, appending its output to OUT; on success appends
# "LABEL-words key=value..." of its last RESULT line to RUNS and sets RESULT, else records why.
RESULT=""
run_one() {
  local out="$1" label="$2" rc=0
  shift 2
  echo "# cmd: $*" >> "$out"
  timeout -k 10 "$RUN_TIMEOUT" "$@" > "$out.part" 2>&1 || rc=$?
  cat "$out.part" >> "$out"
  RESULT="$(sed -n 's/^.*RESULT \(impl=.*\)$/\1/p' "$out.part" | tail -n 1)"
  rm -f "$out.part"
  if [[ $rc != 0 ]]; then
    FAILURES+=("$label: exit status $rc ($out)"); RESULT=""
  elif [[ -z "$RESULT" ]]; then
    FAILURES+=("$label: no RESULT line ($out)")
  elif [[ "$RESULT" == *" wrong="* && "$RESULT" != *" wrong=0" ]]; then
    FAILURES+=("$label: wrong elements: $RESULT ($out)"); RESULT=""
  else
    echo "$RESULT" >> "$RUNS"
  fi
}

STEP_ARGS=(--model "$MODEL" --batch-size "$BATCH" --image-size "$IMAGE" --steps "$STEPS"
           --warmup "$WARMUP" --threads "$THREADS")
echo "torch_step.sh: $MODEL, ${IMAGE}x${IMAGE} images, batch $BATCH per rank, $THREADS torch" \
  "thread(s) per rank, $STEPS timed steps after $WARMUP, np $NPS, $REPEATS repeat(s);" \
  "$(nproc) cores; $("$PYTHON" -c 'import sys, torch; print("python %d.%d, torch %s" % (sys.version_info[:2] + (torch.__version__,)))')"
START=$SECONDS
for ((rep = 1; rep <= REPEATS; ++rep)); do
  for np in $NPS; do
    line="  repeat $rep, np $np ($((SECONDS - START)) s):"
    for impl in hvd ddp; do
      run_one "$OUTDIR/$impl-np$np.txt" "$impl np $np" "$BIN/hvdrun" -np "$np" --no-tag-output \
        -- "$PYTHON" "$HERE/torch_step.py" step --impl "$impl" "${STEP_ARGS[@]}"
      line+=" $impl $(sed -n 's/.*img_s=\([0-9.]*\).*/\1/p' <<< "$RESULT")"
    done
    echo "$line img/s"
  done
done
for ((rep = 1; rep <= LAT_REPEATS; ++rep)); do
  for np in 1 2; do
    run_one "$OUTDIR/latency-cpp-np$np.txt" "latency cpp np $np" "$BIN/hvdrun" -np "$np" \
      --no-tag-output -- "$BIN/hvd-op-latency"
    run_one "$OUTDIR/latency-python-np$np.txt" "latency python np $np" "$BIN/hvdrun" -np "$np" \
      --no-tag-output -- "$PYTHON" "$HERE/torch_step.py" latency
  done
done
echo "# benchmarks took $((SECONDS - START)) s"
echo

awk -v nps="$NPS" -v model="$MODEL" -v image="$IMAGE" -v batch="$BATCH" -v steps="$STEPS" \
    -v reps="$REPEATS" -v lreps="$LAT_REPEATS" '
  {
    delete kv
    for (i = 1; i <= NF; ++i) { split($i, p, "="); kv[p[1]] = p[2] }
    key = kv["impl"] SUBSEP kv["np"]
    if (kv["impl"] == "hvd" || kv["impl"] == "ddp") {
      # The best run of a cell: most images per second; its other figures come with it.
      if (!(key in img) || kv["img_s"] + 0 > img[key]) {
        img[key] = kv["img_s"] + 0; stp[key] = kv["step_ms"] + 0
        bwd[key] = kv["bwd_ms"] + 0; syn[key] = kv["sync_ms"] + 0
      }
    } else {
      # Latency: the lowest of the runs, per figure.
      if (!(key in seq) || kv["seq_us"] + 0 < seq[key]) seq[key] = kv["seq_us"] + 0
      if (!(key in call) || kv["caller_us"] + 0 < call[key]) call[key] = kv["caller_us"] + 0
    }
  }
  function has(impl, np) { return (impl SUBSEP np) in img }
  function f(x, fmt) { return x == "" ? "-" : sprintf(fmt, x) }
  function eff(impl, np) {
    return (has(impl, np) && has(impl, 1)) ? img[impl, np] / (np * img[impl, 1]) : ""
  }
  # (backward [+ synchronize]) at np minus at np 1, over the step at np.
  function est(impl, np,    d) {
    if (!has(impl, np) || !has(impl, 1)) return ""
    d = (bwd[impl, np] + syn[impl, np]) - (bwd[impl, 1] + syn[impl, 1])
    return 100 * (d > 0 ? d : 0) / stp[impl, np]
  }
  END {
    printf "## %s training step, %dx%d synthetic images, batch %d per rank, %d timed steps, best of %d\n",
           model, image, image, batch, steps, reps
    fmt = "%4s | %9s %6s %8s %6s | %9s %6s %6s | %7s\n"
    printf fmt, "np", "hvd img/s", "eff", "wait", "est", "DDP img/s", "eff", "est", "hvd/DDP"
    n = split(nps, list, " ")
    for (i = 1; i <= n; ++i) {
      np = list[i]
      h = has("hvd", np); d = has("ddp", np)
      printf fmt, np, h ? sprintf("%.1f", img["hvd", np]) : "-", f(eff("hvd", np), "%.2f"),
             h ? sprintf("%.1f%%", 100 * syn["hvd", np] / stp["hvd", np]) : "-",
             f(est("hvd", np), "%.1f%%"), d ? sprintf("%.1f", img["ddp", np]) : "-",
             f(eff("ddp", np), "%.2f"), f(est("ddp", np), "%.1f%%"),
             (h && d) ? sprintf("%.2f", img["hvd", np] / img["ddp", np]) : "-"
    }
    print "# eff: img/s at np / (np x img/s at np 1), same library; wait: hvd time in"
    print "# optimizer.synchronize() / step; est: (backward [+ synchronize]) beyond np 1 / step"
    print ""
    printf "## per-op cost of a 1-element float32 allreduce (us/op), best of %d\n", lreps
    fmt = "%4s | %8s %8s %8s | %10s %10s %8s | %s\n"
    printf fmt, "np", "seq cpp", "seq py", "py-cpp", "caller cpp", "caller py", "py-cpp",
           "target py-cpp caller <= 20 us"
    for (np = 1; np <= 2; ++np) {
      if (!(("cpp", np) in seq) || !(("python", np) in seq)) {
        printf fmt, np, "-", "-", "-", "-", "-", "-", "no result"
        continue
      }
      dc = call["python", np] - call["cpp", np]
      printf fmt, np, sprintf("%.1f", seq["cpp", np]), sprintf("%.1f", seq["python", np]),
             sprintf("%.1f", seq["python", np] - seq["cpp", np]),
             sprintf("%.2f", call["cpp", np]), sprintf("%.2f", call["python", np]),
             sprintf("%.2f", dc), dc <= 20 ? "met" : "NOT met"
    }
    print "# seq: submit + wait of one op at a time (the engine round trip); caller: the"
    print "# submitting thread per op (64 submits back to back, then a wait of each done op)"
  }' "$RUNS"
echo "# raw outputs: $OUTDIR"

if [[ ${#FAILURES[@]} -gt 0 ]]; then
  echo "# FAILED (${#FAILURES[@]}):" >&2
  printf '#   %s\n' "${FAILURES[@]}" >&2
  exit 1
fi
