#!/usr/bin/env bash
# Output benchmark: wall time of a job whose ranks print many lines, through each path
# hvd has for output, beside Open MPI's mpirun printing the same lines, in one run.
#
# usage: bench/output.sh [BUILD_DIR] [--repeats R (default 5)] [--lines N (default 100000)] [--np P (default 4)]
#
# Each rank prints N/P lines ("rank R line I"). Timed, R times each and interleaved:
#   embedded  hvdrun -np P -- sh -c ...                  (no daemon)
#   agent     hvdrun run --agent-port A -np P -- sh ...  (attached, through an hvdagent on
#                                                         127.0.0.1: logged, then streamed back)
#   logs      hvdrun logs JOB                            (the agent job's whole log, afterwards)
#   mpirun    mpirun -np P sh -c ...                     (its output forwarding)
# Every run's output must have exactly N lines. Prints median and min (ms) and the ratio of the
# medians to mpirun's. Needs BUILD/bin/hvdrun and hvdagent; as root it passes hvdagent's two
# confirmations. Exits non-zero if a run fails or loses lines.
set -euo pipefail

usage() { sed -n '5,5s/^# //p' "$0"; }

REPEATS=5
LINES=100000
NP=4
BUILD=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeats) REPEATS="${2:?--repeats needs a number}"; shift ;;
    --lines) LINES="${2:?--lines needs a number}"; shift ;;
    --np) NP="${2:?--np needs a number}"; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "output.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) BUILD="$1" ;;
  esac
  shift
done
for v in "$REPEATS" "$LINES" "$NP"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "output.sh: expected a positive integer, got $v" >&2; exit 2; }
done
(( LINES % NP == 0 )) || { echo "output.sh: --lines must be a multiple of --np" >&2; exit 2; }
BIN="$(cd "$BUILD" && pwd)/bin"
for b in hvdrun hvdagent; do
  [[ -x "$BIN/$b" ]] || { echo "output.sh: missing $BIN/$b (build it first)" >&2; exit 2; }
done
command -v mpirun > /dev/null || { echo "output.sh: mpirun not found" >&2; exit 2; }

RUN_TIMEOUT=120
BENCH_NAME=output.sh
WORK="$(mktemp -d)"
LOG="$WORK/out"
AGENT_PID=""
# shellcheck source=bench/timing.sh
source "$(dirname "${BASH_SOURCE[0]}")/timing.sh"
cleanup() {
  stop_bounded
  [[ -z "$AGENT_PID" ]] || kill "$AGENT_PID" 2> /dev/null || true
  wait 2> /dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT

"$BIN/hvdrun" keygen --key-file "$WORK/key" > /dev/null
ROOT_ARGS=()
[[ $EUID -ne 0 ]] || ROOT_ARGS=(--allow-run-as-root)
HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$BIN/hvdagent" "${ROOT_ARGS[@]}" --listen 127.0.0.1:0 \
  --key-file "$WORK/key" --state-dir "$WORK/state" --port-file "$WORK/port" --log-level warn \
  > "$WORK/agent.log" 2>&1 &
AGENT_PID=$!
for _ in $(seq 100); do [[ -s "$WORK/port" ]] && break; sleep 0.05; done
[[ -s "$WORK/port" ]] || { cat "$WORK/agent.log" >&2; echo "output.sh: hvdagent did not start" >&2; exit 1; }
AGENT=(--agent-port "$(cat "$WORK/port")" --key-file "$WORK/key")

PER_RANK=$((LINES / NP))
SCRIPT='seq 1 '"$PER_RANK"' | sed "s/^/rank ${HVD_RANK:-$OMPI_COMM_WORLD_RANK} line /"'
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl "self,vader")

# checked NAME CMD...: time_ms, then the output must hold exactly LINES lines.
checked() {
  time_ms "$@"
  [[ -z "$MS" ]] && return 0
  local got
  got="$(wc -l < "$LOG")"
  if [[ $got != "$LINES" ]]; then
    echo "output.sh: $1 printed $got lines, expected $LINES" >&2
    FAILURES=$((FAILURES + 1))
    MS=""
  fi
}

declare -a EMB=() AGT=() LOGS=() MPI=()
for ((i = 0; i < REPEATS; i++)); do
  checked embedded "$BIN/hvdrun" -np "$NP" -- /bin/sh -c "$SCRIPT"
  [[ -z "$MS" ]] || EMB+=("$MS")
  checked agent "$BIN/hvdrun" run "${AGENT[@]}" -np "$NP" -- /bin/sh -c "$SCRIPT"
  [[ -z "$MS" ]] || AGT+=("$MS")
  job="$("$BIN/hvdrun" ps "${AGENT[@]}" | awk 'NR > 1 { id = $1 } END { print id }')"
  checked logs "$BIN/hvdrun" logs "${AGENT[@]}" "$job"
  [[ -z "$MS" ]] || LOGS+=("$MS")
  checked mpirun "${MPIRUN[@]}" -np "$NP" /bin/sh -c "$SCRIPT"
  [[ -z "$MS" ]] || MPI+=("$MS")
done

read -r MPI_MED MPI_MIN <<< "$(stats "${MPI[@]}")"
echo "output.sh: $NP ranks print $LINES lines in all, $REPEATS interleaved repeats (ms)"
printf '  %-34s %10s %10s %16s\n' path median min "median/mpirun"
row() {
  local name="$1" med min
  shift
  read -r med min <<< "$(stats "$@")"
  printf '  %-34s %10s %10s %16s\n' "$name" "$med" "$min" \
    "$(awk -v a="$med" -v b="$MPI_MED" 'BEGIN { printf "%.2f", a / b }')"
}
row "hvdrun embedded" "${EMB[@]}"
row "hvdrun through hvdagent (attached)" "${AGT[@]}"
row "hvdrun logs (afterwards)" "${LOGS[@]}"
row "mpirun" "${MPI[@]}"
[[ $FAILURES == 0 ]] || { echo "output.sh: $FAILURES run(s) failed" >&2; exit 1; }
