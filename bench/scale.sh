#!/usr/bin/env bash
# Scale benchmark: wall time of launch + init + barrier + exit as the ranks grow, on one host
# (hvdrun embedded beside mpirun) and over network-namespace hosts (hvdrun through one hvdagent
# per host), with the store requests and links per rank that the design gives at that size.
#
# usage: bench/scale.sh [BUILD_DIR] [--repeats R (default 3)] [--local "64 128 256 512"] [--hosts "16 32 64"] [--per-host "1 4 8"] [--widths "64 8"] [--mpi-max N (default 128)]
#
#   local   BUILD/bin/hvdrun -np N -- hvd-init-barrier, and mpirun --oversubscribe -np N
#           --mca btl self,vader mpi-init-barrier for N <= --mpi-max (beyond, Open MPI takes
#           minutes on 2 cores); ratio of the medians.
#   hosts   scripts/netns-cluster.sh up H, then for each R: hvdrun -np H*R -H a0:R,a1:R,...
#           --key-file K -- hvd-init-barrier (the ranks run inside the namespaces, hvdrun here).
#           Needs root and `ip netns`; skipped with a message otherwise (--hosts "" skips it).
#           Once per --tree-width W of --widths: W >= hosts - 1 is the star (the leader calls
#           every host), a smaller W relays through a tree of agents (agent/relay); the column
#           "true ms" times the same job of /bin/true, the control plane alone.
# Columns "store req/rank" and "links/rank" are the design's figures at that size
# (docs/scale.md): 7 store requests per rank at every size (Mesh.StoreWorkOfARendezvous...
# counts them); links a rank opens through init + barrier: every peer up to HVD_FULL_MESH_RANKS
# (64) ranks, beyond it 2 at init and 2 ceil(log2 n) - (1 for a power of two) after the barrier.
# Absolute figures drift on a shared machine; the ratios and the growth are what to read.
# Every run has a timeout (120 s); a failed or timed-out run is reported and makes the exit
# status non-zero. Build first: cmake --build BUILD --target hvdrun hvdagent hvd-init-barrier
# mpi-init-barrier
set -euo pipefail

usage() { sed -n '6,6s/^# //p' "$0"; }

REPEATS=3
LOCAL_NPS="64 128 256 512"
HOSTS="16 32 64"
PER_HOST="1 4 8"
WIDTHS="64 8"
MPI_MAX=128
BUILD=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeats) REPEATS="${2:?--repeats needs a number}"; shift ;;
    --local) [[ $# -ge 2 ]] || { echo "scale.sh: --local needs a list" >&2; exit 2; }; LOCAL_NPS="$2"; shift ;;
    --hosts) [[ $# -ge 2 ]] || { echo "scale.sh: --hosts needs a list" >&2; exit 2; }; HOSTS="$2"; shift ;;
    --per-host) PER_HOST="${2:?--per-host needs a list}"; shift ;;
    --widths) WIDTHS="${2:?--widths needs a list}"; shift ;;
    --mpi-max) MPI_MAX="${2:?--mpi-max needs a number}"; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "scale.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) BUILD="$1" ;;
  esac
  shift
done
for v in $REPEATS $LOCAL_NPS $HOSTS $PER_HOST $WIDTHS $MPI_MAX; do
  [[ "$v" =~ ^[0-9]+$ && "$v" -gt 0 ]] || { echo "scale.sh: expected positive integers, got '$v'" >&2; exit 2; }
done
[[ -n "${EPOCHREALTIME:-}" ]] || { echo "scale.sh: needs bash 5 (EPOCHREALTIME)" >&2; exit 2; }
BUILD="$(cd "$BUILD" && pwd)"
BIN="$BUILD/bin"
for b in hvdrun hvd-init-barrier; do
  [[ -x "$BIN/$b" ]] || { echo "scale.sh: missing $BIN/$b (build it first)" >&2; exit 2; }
done

RUN_TIMEOUT=120
BENCH_NAME=scale.sh
# shellcheck source=bench/timing.sh
source "$(dirname "${BASH_SOURCE[0]}")/timing.sh"
NETNS="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scripts/netns-cluster.sh"
LOG="$(mktemp)"
CLUSTER=""
cleanup() {
  stop_bounded
  rm -f "$LOG"
  [[ -z "$CLUSTER" ]] || "$NETNS" down --prefix "$CLUSTER" > /dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Links a rank has opened after init + barrier (see the header).
links_per_rank() {
  local n="$1" d=1 rounds=0
  if ((n <= 64)); then echo $((n - 1)); return; fi
  while ((d < n)); do d=$((d * 2)); rounds=$((rounds + 1)); done
  if ((d == n)); then echo $((2 * rounds - 1)); else echo $((2 * rounds)); fi
}

MPI_OK=1
[[ -x "$BIN/mpi-init-barrier" ]] && command -v mpirun > /dev/null || MPI_OK=0
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl "self,vader")

echo "scale.sh: $REPEATS repeats; one host: ${LOCAL_NPS:-none}; netns hosts: ${HOSTS:-none} x ${PER_HOST}"
ROWS=()
for n in $LOCAL_NPS; do
  hvd=() mpi=()
  for ((r = 0; r < REPEATS; r++)); do
    time_ms "hvdrun np $n" "$BIN/hvdrun" -np "$n" -- "$BIN/hvd-init-barrier"
    [[ -z "$MS" ]] || hvd+=("$MS")
    if [[ $MPI_OK == 1 && $n -le $MPI_MAX ]]; then
      time_ms "mpirun np $n" "${MPIRUN[@]}" -np "$n" "$BIN/mpi-init-barrier"
      [[ -z "$MS" ]] || mpi+=("$MS")
    fi
  done
  read -r hm hmin <<< "$(stats ${hvd[@]+"${hvd[@]}"})"
  if [[ ${#mpi[@]} -gt 0 ]]; then
    read -r mm _ <<< "$(stats "${mpi[@]}")"
    ratio="$(awk -v a="$hm" -v b="$mm" 'BEGIN { printf "%.2f", a / b }')"
  else
    mm="-" ratio="-"
  fi
  ROWS+=("$(printf '%6s %12s %12s %12s %7s %10s %10s' "$n" "$hm" "$hmin" "$mm" "$ratio" 7 "$(links_per_rank "$n")")")
  echo "  one host np $n done" >&2
done

HOST_ROWS=()
WHY_NO_HOSTS=""
if [[ -z "${HOSTS// /}" ]]; then
  WHY_NO_HOSTS='--hosts ""'
elif [[ $EUID -ne 0 ]] || ! ip netns list > /dev/null 2>&1; then
  WHY_NO_HOSTS="needs root and 'ip netns'"
elif [[ ! -x "$BIN/hvdagent" ]]; then
  WHY_NO_HOSTS="no $BIN/hvdagent"
fi
if [[ -z "$WHY_NO_HOSTS" ]]; then
  for h in $HOSTS; do
    CLUSTER="scl$$"
    if ! env_lines="$("$NETNS" up "$h" --prefix "$CLUSTER" --bin "$BIN" --log-level warn 2> "$LOG")"; then
      cat "$LOG" >&2
      echo "scale.sh: netns-cluster.sh up $h failed" >&2
      exit 1
    fi
    key="$(sed -n 's/^KEY=//p' <<< "$env_lines")"
    port="$(sed -n 's/^PORT=//p' <<< "$env_lines")"
    addrs="$(sed -n 's/^HOSTS=//p' <<< "$env_lines")"
    for per in $PER_HOST; do
      n=$((h * per))
      list="$(tr ',' '\n' <<< "$addrs" | sed "s/\$/:$per/" | paste -sd,)"
      for w in $WIDTHS; do
        common=("$BIN/hvdrun" -np "$n" -H "$list" --key-file "$key" --agent-port "$port"
          --tree-width "$w")
        times=() trues=()
        for ((r = 0; r < REPEATS; r++)); do
          time_ms "$h hosts x $per width $w" "${common[@]}" -- "$BIN/hvd-init-barrier"
          [[ -z "$MS" ]] || times+=("$MS")
          time_ms "$h hosts x $per width $w true" "${common[@]}" -- /bin/true
          [[ -z "$MS" ]] || trues+=("$MS")
        done
        read -r tm tmin <<< "$(stats ${times[@]+"${times[@]}"})"
        read -r truem _ <<< "$(stats ${trues[@]+"${trues[@]}"})"
        shape="star"
        ((w >= h - 1)) || shape="tree"
        HOST_ROWS+=("$(printf '%6s %6s %6s %6s %5s %12s %12s %10s %10s %10s' "$h" "$per" "$n" "$w" "$shape" "$tm" "$tmin" "$truem" 7 "$(links_per_rank "$n")")")
        echo "  $h hosts x $per width $w done" >&2
      done
    done
    "$NETNS" down --prefix "$CLUSTER" > /dev/null 2>&1 || true
    CLUSTER=""
  done
fi

echo
echo "one host: launch + init + barrier + exit (ms)"
printf '%6s %12s %12s %12s %7s %10s %10s\n' np "hvd med" "hvd min" "mpirun med" ratio "store/rank" "links/rank"
printf '%s\n' "${ROWS[@]}"
echo
if [[ -n "$WHY_NO_HOSTS" ]]; then
  echo "netns hosts: skipped ($WHY_NO_HOSTS)"
else
  echo "netns hosts through hvdagent: launch + init + barrier + exit (ms)"
  printf '%6s %6s %6s %6s %5s %12s %12s %10s %10s %10s\n' hosts "r/host" np width shape "hvd med" "hvd min" "true ms" "store/rank" "links/rank"
  printf '%s\n' "${HOST_ROWS[@]}"
fi
echo "(targets: 128 ranks on one host <= 0.5x mpirun; 512 ranks over 64 agents <= 5 s; 256 -> 512 no worse than 2.5x)"
[[ $FAILURES == 0 ]] || { echo "scale.sh: $FAILURES run(s) failed" >&2; exit 1; }
