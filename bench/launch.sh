#!/usr/bin/env bash
# Launch benchmark: wall time of starting a job that does init + barrier + exit, hvdrun beside
# Open MPI's mpirun, in one run on this machine; and how fast the agents hand GPUs on and restart.
#
# usage: bench/launch.sh [BUILD_DIR] [--repeats R (default 7)] [--np "1 2 4 8" | --np ""] [--no-agents] [--no-torch] [--no-slurm] [--no-orchestration]
#
# For each N it times, R times each and interleaved (hvd, agents, mpi, hvd, agents, mpi, ...)
# because the shared machines this runs on drift in speed over tens of seconds:
#   hvd     BUILD/bin/hvdrun -np N -- hvd-init-barrier            (embedded mode, no hvdagent)
#   agents  BUILD/bin/hvdrun -np N -H h0:N/2,h1:N/2 --key-file K -- hvd-init-barrier
#               through two hvdagents in network namespaces (scripts/netns-cluster.sh up 2;
#               N=1: h0:1; odd N: h0 gets the extra rank); hvdrun runs here, the ranks there
#   mpi     mpirun --allow-run-as-root --oversubscribe -np N --bind-to none --mca btl self,vader
#               mpi-init-barrier                                   (MPI_Init+Barrier+Finalize)
# and, in a third table, a torch.distributed job (bench/torch_init_barrier.py: gloo env:// init,
# barrier, exit; Debian's python3-torch under /usr/bin/python3) started two ways:
#   torch-hvd  BUILD/bin/hvdrun -np N -- python3 bench/torch_init_barrier.py
#   torchrun   torchrun --standalone --nproc_per_node N --redirects 2 --tee 2 ...
#              (Debian 12's torch 1.13 under Python 3.11 cannot parse the default "0" of
#              --redirects/--tee: Std("0") is no member of the Flag there; 2 = stderr, tee'd back)
# and, in a fourth table, inside a two-node Slurm cluster (scripts/slurm-cluster.sh up 2, 4 CPUs
# per node; needs root, `ip netns` and Debian's slurm-wlm), each a fresh allocation:
#   slurm-hvd  salloc -N2 -nN -K hvdrun --allow-run-as-root -- hvd-init-barrier   (N=1: -N1)
#               no host list: hvdrun starts its agents with srun and runs the ranks through them
#   srun       srun -N2 -nN --mpi=pmix mpi-init-barrier                          (N=1: -N1)
# and prints one row per N: median and min wall time of each, in ms, and the ratio to mpirun of
# the medians and of the mins; the agents' figures in a second table. The target is
# hvdrun at most 0.5x mpirun's time at every N. Absolute figures drift on a shared machine; read
# the ratios. The agents part needs root, `ip netns` and BUILD/bin/hvdagent; without them (or
# with --no-agents) it is skipped with a message. Its cluster is torn down on exit.
# --np "" skips the per-N tables (hvd, agents, mpi and torch) and needs neither Open MPI nor the
# init-barrier programs.
#
# The orchestration part (docs/architecture.md "Resources, queue and restarts"; --no-orchestration skips
# it; needs BUILD/bin/hvdagent) times R interleaved repeats of each of these, from timestamps
# (`date +%s%N`) the ranks write to a directory under /tmp, and prints median and min in ms:
#   queue hand-off  through one hvdagent on 127.0.0.1 (its own key, HVD_FAKE_GPUS=4): job A,
#               hvdrun submit -np 4 --gpu-bind visible -- sh bench/queue_rank.sh hold DIR, holds
#               all 4 GPUs; job B, the same with `start`, submitted while A runs, must be QUEUED;
#               then A's ranks are let go and each writes its time just before it exits, B's
#               ranks write theirs when they start. Hand-off = B's last rank start - A's last
#               rank end (B's first rank start is shown too). B starting before A ended fails.
#   restart     a job of 4 ranks of bench/restart_rank.sh DIR with one restart allowed: in
#               attempt 0 rank 1 writes the failure time after 0.3 s and exits 1; every rank of
#               attempt 1 writes its start time and exits 0. Restart = last start of attempt 1
#               - the failure. Started five ways:
#     hvd embedded     hvdrun -np 4 --max-restarts 1 -- sh bench/restart_rank.sh DIR
#     agents local     the same through the local hvdagent (hvdrun run --agent-port P --key-file K)
#     agents 2 netns   the same with -H h0:2,h1:2 on the netns agents above (skipped with them)
#     torchrun         torchrun --standalone --nnodes 1 --nproc_per_node 4 --max_restarts 1
#                      --redirects 2 --tee 2 --no_python sh bench/restart_rank.sh DIR (torch 1.13
#                      knows only the underscore spellings; the script reads RANK and
#                      TORCHELASTIC_RESTART_COUNT); its defaults poll the workers every 5 s
#     torchrun 0.1 s   the same with --monitor_interval 0.1, torchrun's floor
#               with the ratio of each to torchrun (defaults) and to torchrun 0.1 s. The torchrun
#               rows need only torchrun on PATH (--no-torch skips the third table, not these).
#
# Build first: cmake --build BUILD --target hvdrun hvdagent hvd-init-barrier mpi-init-barrier
# Every run has a timeout (60 s; a hang fails it and says so). Exits non-zero if any run fails or
# times out (its output is printed).
set -euo pipefail

usage() { sed -n '5,5s/^# //p' "$0"; }

REPEATS=7
NPS="1 2 4 8"
BUILD=build
AGENTS=1
TORCH=1
SLURM=1
ORCH=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-agents) AGENTS=0 ;;
    --no-torch) TORCH=0 ;;
    --no-slurm) SLURM=0 ;;
    --no-orchestration) ORCH=0 ;;
    --np) [[ $# -ge 2 ]] || { echo "launch.sh: --np needs a list" >&2; exit 2; }; NPS="$2"; shift ;;
    --repeats) REPEATS="${2:?--repeats needs a number}"; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "launch.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) BUILD="$1" ;;
  esac
  shift
done
[[ "$REPEATS" =~ ^[1-9][0-9]*$ ]] || { echo "launch.sh: --repeats expects a positive integer" >&2; exit 2; }
for n in $NPS; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "launch.sh: --np expects positive integers, got $n" >&2; exit 2; }
done
[[ -n "${EPOCHREALTIME:-}" ]] || { echo "launch.sh: needs bash 5 (EPOCHREALTIME)" >&2; exit 2; }

BUILD="$(cd "$BUILD" && pwd)"
BIN="$BUILD/bin"
need() {
  [[ -x "$1" ]] || { echo "launch.sh: missing $1 (build it first)" >&2; exit 2; }
}
need "$BIN/hvdrun"
if [[ -n "${NPS// /}" ]]; then
  need "$BIN/hvd-init-barrier"
  need "$BIN/mpi-init-barrier"
  command -v mpirun > /dev/null || { echo "launch.sh: mpirun not found" >&2; exit 2; }
fi

RUN_TIMEOUT=60 # seconds per launch
# time_ms, bounded and stats (FAILURES, MS): shared with the other timing scripts.
BENCH_NAME=launch.sh
# shellcheck source=bench/timing.sh
source "$(dirname "${BASH_SOURCE[0]}")/timing.sh"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl "self,vader")
NETNS="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scripts/netns-cluster.sh"
LOG="$(mktemp)"
CLUSTER="" # prefix of the netns cluster while it is up
SLURM_CLUSTER_SCRIPT="$(dirname "$NETNS")/slurm-cluster.sh"
SLURM_CLUSTER="" # prefix of the Slurm cluster while it is up
ORCH_WORK=""      # the orchestration part's directory (agent state, key, timestamps)
ORCH_AGENT_PID="" # its hvdagent while it runs
cleanup() {
  stop_bounded
  rm -f "$LOG"
  if [[ -n "$ORCH_AGENT_PID" ]]; then
    # SIGTERM stops its jobs (their ranks die with it in any case); SIGKILL if it lingers.
    kill "$ORCH_AGENT_PID" 2> /dev/null || true
    for _ in $(seq 50); do
      kill -0 "$ORCH_AGENT_PID" 2> /dev/null || break
      sleep 0.1
    done
    kill -KILL "$ORCH_AGENT_PID" 2> /dev/null || true
    wait "$ORCH_AGENT_PID" 2> /dev/null || true
  fi
  [[ -z "$ORCH_WORK" ]] || rm -rf "$ORCH_WORK"
  [[ -z "$CLUSTER" ]] || "$NETNS" down --prefix "$CLUSTER" > /dev/null 2>&1 || true
  [[ -z "$SLURM_CLUSTER" ]] || "$SLURM_CLUSTER_SCRIPT" down --prefix "$SLURM_CLUSTER" > /dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The two-agent part: why it cannot run here, or nothing.
agents_unavailable() {
  if [[ $AGENTS != 1 ]]; then
    echo "--no-agents"
  elif [[ -z "${NPS// /}" && $ORCH != 1 ]]; then
    echo "--np \"\" and --no-orchestration leave nothing for it"
  elif [[ $EUID -ne 0 ]]; then
    echo "needs root for network namespaces"
  elif ! ip netns list > /dev/null 2>&1; then
    echo "'ip netns' is not available"
  elif [[ ! -x "$BIN/hvdagent" ]]; then
    echo "no $BIN/hvdagent (build it)"
  fi
}
A0="" A1="" KEY=""
WHY_NO_AGENTS="$(agents_unavailable)"
if [[ -z "$WHY_NO_AGENTS" ]]; then
  CLUSTER="bch$$"
  if env_lines="$("$NETNS" up 2 --prefix "$CLUSTER" --bin "$BIN" --log-level warn 2> "$LOG")"; then
    A0="$(sed -n 's/^ADDR_0=//p' <<< "$env_lines")"
    A1="$(sed -n 's/^ADDR_1=//p' <<< "$env_lines")"
    KEY="$(sed -n 's/^KEY=//p' <<< "$env_lines")"
  else
    cat "$LOG" >&2
    echo "launch.sh: netns-cluster.sh up failed" >&2
    exit 1
  fi
fi
# -H for N ranks on the two agents: h0:ceil(N/2),h1:floor(N/2); N=1 on h0 only.
agent_hosts() {
  local n="$1"
  if [[ $n == 1 ]]; then echo "$A0:1"; else echo "$A0:$(((n + 1) / 2)),$A1:$((n / 2))"; fi
}

if [[ -n "${NPS// /}" ]]; then
  echo "launch.sh: $REPEATS repeats each, np: $NPS (hvdrun embedded vs mpirun, init+barrier+exit)"
else
  echo "launch.sh: $REPEATS repeats each; per-np launch tables skipped: --np \"\""
fi
if [[ -n "$WHY_NO_AGENTS" ]]; then
  echo "launch.sh: two-agent part skipped: $WHY_NO_AGENTS"
else
  echo "launch.sh: and through two netns agents at $A0 and $A1 (cluster $CLUSTER)"
fi
PYTHON=/usr/bin/python3
TORCH_SCRIPT="$(dirname "${BASH_SOURCE[0]}")/torch_init_barrier.py"
WHY_NO_TORCH=""
if [[ $TORCH != 1 ]]; then
  WHY_NO_TORCH="--no-torch"
elif [[ -z "${NPS// /}" ]]; then
  WHY_NO_TORCH="--np \"\""
elif ! "$PYTHON" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2> /dev/null; then
  WHY_NO_TORCH="no torch.distributed with gloo for $PYTHON (apt-get install python3-torch)"
elif ! command -v torchrun > /dev/null; then
  WHY_NO_TORCH="no torchrun"
fi
ROWS=() AGENT_ROWS=() TORCH_ROWS=()
for n in $NPS; do
  hvd=() agt=() mpi=()
  for ((r = 0; r < REPEATS; r++)); do
    time_ms "hvdrun np $n" "$BIN/hvdrun" -np "$n" -- "$BIN/hvd-init-barrier"
    [[ -z "$MS" ]] || hvd+=("$MS")
    if [[ -z "$WHY_NO_AGENTS" ]]; then
      time_ms "hvdrun np $n via agents" "$BIN/hvdrun" -np "$n" -H "$(agent_hosts "$n")" \
        --key-file "$KEY" -- "$BIN/hvd-init-barrier"
      [[ -z "$MS" ]] || agt+=("$MS")
    fi
    time_ms "mpirun np $n" "${MPIRUN[@]}" -np "$n" "$BIN/mpi-init-barrier"
    [[ -z "$MS" ]] || mpi+=("$MS")
  done
  read -r hmed hmin <<< "$(stats ${hvd[@]+"${hvd[@]}"})"
  read -r amed amin <<< "$(stats ${agt[@]+"${agt[@]}"})"
  read -r mmed mmin <<< "$(stats ${mpi[@]+"${mpi[@]}"})"
  ROWS+=("$n $hmed $mmed $hmin $mmin")
  AGENT_ROWS+=("$n $amed $mmed $amin $mmin")
  if [[ -z "$WHY_NO_AGENTS" ]]; then
    echo "  np $n: ${#hvd[@]} hvdrun, ${#agt[@]} hvdrun via agents, ${#mpi[@]} mpirun runs ok"
  else
    echo "  np $n: ${#hvd[@]} hvdrun, ${#mpi[@]} mpirun runs ok"
  fi
done
if [[ -z "$WHY_NO_TORCH" ]]; then
  for n in $NPS; do
    th=() tr=()
    for ((r = 0; r < REPEATS; r++)); do
      time_ms "hvdrun np $n torch" "$BIN/hvdrun" -np "$n" -- "$PYTHON" "$TORCH_SCRIPT"
      [[ -z "$MS" ]] || th+=("$MS")
      time_ms "torchrun np $n" torchrun --standalone --nproc_per_node "$n" --redirects 2 --tee 2 \
        "$TORCH_SCRIPT"
      [[ -z "$MS" ]] || tr+=("$MS")
    done
    read -r hmed hmin <<< "$(stats ${th[@]+"${th[@]}"})"
    read -r tmed tmin <<< "$(stats ${tr[@]+"${tr[@]}"})"
    TORCH_ROWS+=("$n $hmed $tmed $hmin $tmin")
    echo "  np $n: ${#th[@]} hvdrun torch, ${#tr[@]} torchrun runs ok"
  done
fi

# The orchestration part: queue hand-off and restart times, from the ranks' own timestamps.
orchestration_unavailable() {
  if [[ $ORCH != 1 ]]; then
    echo "--no-orchestration"
  elif [[ ! -x "$BIN/hvdagent" ]]; then
    echo "no $BIN/hvdagent (build it)"
  fi
}
WHY_NO_ORCH="$(orchestration_unavailable)"
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
QUEUE_SCRIPT="$BENCH_DIR/queue_rank.sh"
RESTART_SCRIPT="$BENCH_DIR/restart_rank.sh"
ORCH_NP=4
# orch_fail WHAT [FILE]: counts a failed orchestration run and says why (FILE's last lines).
orch_fail() {
  echo "launch.sh: FAILED ($1)" >&2
  [[ -z "${2:-}" || ! -s "$2" ]] || tail -n 20 "$2" >&2
  FAILURES=$((FAILURES + 1))
}
# ns_range N FILE...: "first last" of the ns timestamps in the FILEs; fails unless exactly N of
# them hold one.
ns_range() {
  local want="$1" f v n=0 lo="" hi=""
  shift
  for f in "$@"; do
    [[ -s "$f" ]] || continue
    v="$(< "$f")"
    [[ "$v" =~ ^[0-9]+$ ]] || continue
    n=$((n + 1))
    [[ -n "$lo" ]] && ((lo <= v)) || lo="$v"
    [[ -n "$hi" ]] && ((hi >= v)) || hi="$v"
  done
  [[ $n == "$want" ]] || return 1
  echo "$lo $hi"
}
ns_to_ms() { awk -v ns="$1" 'BEGIN { printf "%.3f", ns / 1e6 }'; }
# orch_hvdrun OUT ERR ARGS...: hvdrun ARGS against the local agent, under the run timeout.
orch_hvdrun() {
  local out="$1" err="$2" cmd="$3"
  shift 3
  bounded "$BIN/hvdrun" "$cmd" "${ORCH_AGENT[@]}" "$@" > "$out" 2> "$err"
}
# orch_submit DIR NAME ARGS...: hvdrun submit; sets JOB_ID (empty, and a failure counted, if
# there is none).
JOB_ID=""
orch_submit() {
  local dir="$1" name="$2" rc=0
  shift 2
  JOB_ID=""
  orch_hvdrun "$dir/$name.id" "$dir/$name.err" submit "$@" || rc=$?
  if [[ $rc != 0 ]] || ! grep -Eqx 'hvd-[0-9a-f]{6}' "$dir/$name.id"; then
    [[ $rc != 124 ]] || echo "timed out after $RUN_TIMEOUT s" >> "$dir/$name.err"
    cat "$dir/$name.id" >> "$dir/$name.err"
    orch_fail "queue hand-off: hvdrun submit of job $name, exit $rc" "$dir/$name.err"
    return 1
  fi
  JOB_ID="$(< "$dir/$name.id")"
}
# handoff_once: one queue hand-off; sets HANDOFF_FIRST and HANDOFF_LAST (ms; empty on failure).
HANDOFF_FIRST="" HANDOFF_LAST=""
handoff_once() {
  local d a="" b="" rc=0 ends starts end_last start_first start_last id
  HANDOFF_FIRST="" HANDOFF_LAST=""
  d="$(mktemp -d "$ORCH_WORK/handoff.XXXXXX")"
  local job=(-np "$ORCH_NP" --gpu-bind visible -- /bin/sh "$QUEUE_SCRIPT")
  if orch_submit "$d" A "${job[@]}" hold "$d" && a="$JOB_ID" &&
    orch_submit "$d" B "${job[@]}" start "$d" && b="$JOB_ID"; then
    # B must wait for A's GPUs, else this measures nothing.
    if ! grep -q "is queued" "$d/B.err" ||
      ! orch_hvdrun "$d/B.status" "$d/B.status.err" status "$b" ||
      ! grep -q QUEUED "$d/B.status"; then
      cat "$d/B.err" "$d/B.status" "$d/B.status.err" > "$d/why" 2> /dev/null || true
      orch_fail "queue hand-off: job B ($b) was not queued behind job A ($a)" "$d/why"
    else
      touch "$d/go"
      orch_hvdrun "$d/B.attach" "$d/B.attach.err" attach "$b" || rc=$?
      if [[ $rc != 0 ]]; then
        [[ $rc != 124 ]] || echo "timed out after $RUN_TIMEOUT s" >> "$d/B.attach.err"
        orch_fail "queue hand-off: job B ($b) ended with exit $rc" "$d/B.attach.err"
      elif ! orch_hvdrun "$d/A.status" "$d/A.status.err" status "$a" ||
        ! grep -q ': COMPLETED$' "$d/A.status"; then
        orch_fail "queue hand-off: job A ($a) did not complete" "$d/A.status"
      elif ! ends="$(ns_range "$ORCH_NP" "$d"/end.*)" ||
        ! starts="$(ns_range "$ORCH_NP" "$d"/start.*)"; then
        orch_fail "queue hand-off: not every rank wrote its timestamp ($(cd "$d" && echo *))"
      else
        read -r _ end_last <<< "$ends"
        read -r start_first start_last <<< "$starts"
        if ((start_first < end_last)); then
          orch_fail "queue hand-off: a rank of job B started before job A's last rank ended (shared GPUs?)"
        else
          HANDOFF_FIRST="$(ns_to_ms $((start_first - end_last)))"
          HANDOFF_LAST="$(ns_to_ms $((start_last - end_last)))"
        fi
      fi
    fi
  fi
  # Whatever happened, neither job may hold the GPUs for the next repeat.
  touch "$d/go"
  if [[ -z "$HANDOFF_LAST" ]]; then
    for id in "$b" "$a"; do
      [[ -z "$id" ]] || orch_hvdrun /dev/null /dev/null cancel "$id" --grace 1 || true
    done
  fi
}
# restart_once NAME CMD...: CMD DIR (CMD ends in the restart script) with a fresh DIR; sets
# RESTART_MS (ms from the failure to the last rank of attempt 1; empty on failure).
RESTART_MS=""
restart_once() {
  local name="$1" d fail starts last
  shift
  RESTART_MS=""
  d="$(mktemp -d "$ORCH_WORK/restart.XXXXXX")"
  time_ms "restart, $name" "$@" "$d"
  [[ -n "$MS" ]] || return 0
  if [[ ! -s "$d/fail" ]] || ! starts="$(ns_range "$ORCH_NP" "$d"/start.*)"; then
    cp "$LOG" "$d/why"
    orch_fail "restart, $name: no failure time or not $ORCH_NP ranks restarted ($(cd "$d" && echo *))" "$d/why"
    return 0
  fi
  fail="$(< "$d/fail")"
  read -r _ last <<< "$starts"
  RESTART_MS="$(ns_to_ms $((last - fail)))"
}

HANDOFF_FIRSTS=() HANDOFF_LASTS=() R_EMB=() R_LOCAL=() R_NETNS=() R_TR=() R_TR_FAST=()
WHY_NO_TORCHRUN=""
command -v torchrun > /dev/null || WHY_NO_TORCHRUN="no torchrun on PATH"
if [[ -z "$WHY_NO_ORCH" ]]; then
  ORCH_WORK="$(mktemp -d /tmp/hvd-bench-orch.XXXXXX)"
  "$BIN/hvdrun" keygen --key-file "$ORCH_WORK/key" > /dev/null
  ORCH_ROOT_ARGS=()
  [[ $EUID -ne 0 ]] || ORCH_ROOT_ARGS=(--allow-run-as-root)
  env HVD_FAKE_GPUS="$ORCH_NP" HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$BIN/hvdagent" \
    ${ORCH_ROOT_ARGS[@]+"${ORCH_ROOT_ARGS[@]}"} --listen 127.0.0.1:0 --key-file "$ORCH_WORK/key" \
    --state-dir "$ORCH_WORK/state" --port-file "$ORCH_WORK/port" --shutdown-grace 1 \
    --log-level warn > "$ORCH_WORK/agent.log" 2>&1 &
  ORCH_AGENT_PID=$!
  for _ in $(seq 200); do
    [[ -s "$ORCH_WORK/port" ]] && break
    kill -0 "$ORCH_AGENT_PID" 2> /dev/null || break
    sleep 0.05
  done
  if [[ ! -s "$ORCH_WORK/port" ]]; then
    cat "$ORCH_WORK/agent.log" >&2
    echo "launch.sh: the orchestration part's hvdagent did not start within 10 s" >&2
    exit 1
  fi
  ORCH_AGENT=(--agent-port "$(< "$ORCH_WORK/port")" --key-file "$ORCH_WORK/key")
  echo "launch.sh: orchestration part through an hvdagent on 127.0.0.1:$(< "$ORCH_WORK/port")" \
    "with $ORCH_NP fake GPUs, timestamps under $ORCH_WORK"
  [[ -z "$WHY_NO_AGENTS" ]] || echo "launch.sh: its 2-netns restart row skipped: $WHY_NO_AGENTS"
  [[ -z "$WHY_NO_TORCHRUN" ]] || echo "launch.sh: its torchrun rows skipped: $WHY_NO_TORCHRUN"
  RESTART_JOB=(-np "$ORCH_NP" --max-restarts 1 -- /bin/sh "$RESTART_SCRIPT")
  TORCHRUN_RESTART=(torchrun --standalone --nnodes 1 --nproc_per_node "$ORCH_NP" --max_restarts 1
    --redirects 2 --tee 2)
  for ((r = 0; r < REPEATS; r++)); do
    handoff_once
    [[ -z "$HANDOFF_LAST" ]] || { HANDOFF_FIRSTS+=("$HANDOFF_FIRST"); HANDOFF_LASTS+=("$HANDOFF_LAST"); }
    restart_once "hvd embedded" "$BIN/hvdrun" "${RESTART_JOB[@]}"
    [[ -z "$RESTART_MS" ]] || R_EMB+=("$RESTART_MS")
    restart_once "agents local" "$BIN/hvdrun" run "${ORCH_AGENT[@]}" "${RESTART_JOB[@]}"
    [[ -z "$RESTART_MS" ]] || R_LOCAL+=("$RESTART_MS")
    if [[ -z "$WHY_NO_AGENTS" ]]; then
      restart_once "agents 2 netns" "$BIN/hvdrun" -H "$A0:2,$A1:2" --key-file "$KEY" \
        "${RESTART_JOB[@]}"
      [[ -z "$RESTART_MS" ]] || R_NETNS+=("$RESTART_MS")
    fi
    if [[ -z "$WHY_NO_TORCHRUN" ]]; then
      restart_once torchrun "${TORCHRUN_RESTART[@]}" --no_python /bin/sh "$RESTART_SCRIPT"
      [[ -z "$RESTART_MS" ]] || R_TR+=("$RESTART_MS")
      restart_once "torchrun 0.1 s" "${TORCHRUN_RESTART[@]}" --monitor_interval 0.1 \
        --no_python /bin/sh "$RESTART_SCRIPT"
      [[ -z "$RESTART_MS" ]] || R_TR_FAST+=("$RESTART_MS")
    fi
  done
  echo "  orchestration: ${#HANDOFF_LASTS[@]} hand-offs, restarts: ${#R_EMB[@]} embedded," \
    "${#R_LOCAL[@]} local agent, ${#R_NETNS[@]} netns agents, ${#R_TR[@]} + ${#R_TR_FAST[@]} torchrun ok"
fi

# The Slurm part: why it cannot run here, or nothing.
slurm_unavailable() {
  if [[ $SLURM != 1 ]]; then
    echo "--no-slurm"
  elif [[ -z "${NPS// /}" ]]; then
    echo "--np \"\""
  elif [[ $EUID -ne 0 ]]; then
    echo "needs root for network namespaces"
  elif ! ip netns list > /dev/null 2>&1; then
    echo "'ip netns' is not available"
  elif ! command -v slurmctld > /dev/null || ! command -v salloc > /dev/null; then
    echo "no Slurm (apt-get install slurm-wlm munge)"
  elif [[ ! -x "$BIN/hvdagent" ]]; then
    echo "no $BIN/hvdagent (build it)"
  fi
}
WHY_NO_SLURM="$(slurm_unavailable)"
SLURM_ROWS=()
if [[ -z "$WHY_NO_SLURM" ]]; then
  SLURM_CLUSTER="bsl$$"
  if env_lines="$("$SLURM_CLUSTER_SCRIPT" up 2 --prefix "$SLURM_CLUSTER" --cpus 4 2> "$LOG")"; then
    SLURM_ENV=(env "SLURM_CONF=$(sed -n 's/^SLURM_CONF=//p' <<< "$env_lines")"
      HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1)
    echo "launch.sh: and inside a two-node Slurm cluster ($SLURM_CLUSTER)"
    for n in $NPS; do
      nodes=2
      [[ $n != 1 ]] || nodes=1
      if ((n > 8)); then
        echo "  np $n: more than the Slurm cluster's 8 CPUs, skipped"
        continue
      fi
      sh=() sr=()
      for ((r = 0; r < REPEATS; r++)); do
        time_ms "salloc hvdrun np $n" "${SLURM_ENV[@]}" salloc -N"$nodes" -n"$n" -K \
          "$BIN/hvdrun" --allow-run-as-root -- "$BIN/hvd-init-barrier"
        [[ -z "$MS" ]] || sh+=("$MS")
        time_ms "srun np $n" "${SLURM_ENV[@]}" srun -N"$nodes" -n"$n" --mpi=pmix \
          "$BIN/mpi-init-barrier"
        [[ -z "$MS" ]] || sr+=("$MS")
      done
      read -r hmed hmin <<< "$(stats ${sh[@]+"${sh[@]}"})"
      read -r smed smin <<< "$(stats ${sr[@]+"${sr[@]}"})"
      SLURM_ROWS+=("$n $hmed $smed $hmin $smin")
      echo "  np $n: ${#sh[@]} salloc hvdrun, ${#sr[@]} srun runs ok"
    done
  else
    cat "$LOG" >&2
    echo "launch.sh: slurm-cluster.sh up failed" >&2
    exit 1
  fi
fi

# table TITLE LABEL [PEER] ROWS...: one line per "np med peer_med min peer_min" row, with the
# ratios; PEER (default mpirun) is given as "peer=NAME".
table() {
  local title="$1" label="$2" peer=mpirun row
  shift 2
  if [[ "${1:-}" == peer=* ]]; then
    peer="${1#peer=}"
    shift
  fi
  echo
  echo "$title"
  printf '%4s  %12s  %12s  %7s  %10s  %10s  %7s\n' np "$label med" "$peer med" ratio \
    "$label min" "$peer min" ratio
  printf '%4s  %12s  %12s  %7s  %10s  %10s  %7s\n' "" "(ms)" "(ms)" "" "(ms)" "(ms)" ""
  for row in "$@"; do
    awk -v np="${row%% *}" 'function ratio(a, b) { return (b > 0 && a == a + 0) ? sprintf("%.2f", a / b) : "nan" }
      { printf "%4s  %12s  %12s  %7s  %10s  %10s  %7s\n", np, $2, $3, ratio($2, $3), $4, $5, ratio($4, $5) }' \
      <<< "$row"
  done
}
if [[ -n "${NPS// /}" ]]; then
  table "hvdrun embedded (one host, no daemon) vs mpirun" hvdrun "${ROWS[@]}"
  if [[ -z "$WHY_NO_AGENTS" ]]; then
    table "hvdrun through two netns agents (-H h0:N/2,h1:N/2; np 1: h0:1) vs the same mpirun runs" \
      agents "${AGENT_ROWS[@]}"
  fi
  echo "(target: hvdrun at most 0.50x mpirun at every np)"
fi
if [[ -z "$WHY_NO_TORCH" ]]; then
  table "a torch.distributed script (gloo env:// init + barrier): hvdrun vs torchrun --standalone" \
    hvdrun peer=torchrun "${TORCH_ROWS[@]}"
else
  echo "launch.sh: torch part skipped: $WHY_NO_TORCH"
fi
if [[ -z "$WHY_NO_SLURM" ]]; then
  table "in a two-node Slurm cluster, a fresh allocation each: salloc hvdrun (no -H) vs srun --mpi=pmix of the MPI program" \
    hvdrun peer=srun "${SLURM_ROWS[@]}"
else
  echo "launch.sh: Slurm part skipped: $WHY_NO_SLURM"
fi

# orch_row NAME [RATIO_BASES "med min" ...] -- VALUES...: one row of median, min and, per base,
# the ratio of the medians (and of the mins for the first base).
orch_row() {
  local name="$1" med min bases=() base bmed bmin cells=()
  shift
  while [[ $# -gt 0 && $1 != -- ]]; do
    bases+=("$1")
    shift
  done
  shift
  read -r med min <<< "$(stats "$@")"
  for base in ${bases[@]+"${bases[@]}"}; do
    read -r bmed bmin <<< "$base"
    cells+=("$(awk -v a="$med" -v b="$bmed" 'BEGIN { print (b > 0 && a == a + 0) ? sprintf("%.3g", a / b) : "nan" }')")
    if [[ ${#cells[@]} == 1 ]]; then
      cells+=("$(awk -v a="$min" -v b="$bmin" 'BEGIN { print (b > 0 && a == a + 0) ? sprintf("%.3g", a / b) : "nan" }')")
    fi
  done
  printf '  %-40s %10s %10s' "$name" "$med" "$min"
  [[ ${#cells[@]} == 0 ]] || printf ' %10s' "${cells[@]}"
  printf '\n'
}
if [[ -z "$WHY_NO_ORCH" ]]; then
  echo
  echo "queue hand-off through one hvdagent (127.0.0.1, HVD_FAKE_GPUS=$ORCH_NP), $REPEATS repeat(s):"
  echo "  job A (hvdrun submit -np $ORCH_NP --gpu-bind visible) holds all $ORCH_NP GPUs; job B (the"
  echo "  same), submitted while A runs, is QUEUED. Time from A's last rank writing its end time"
  echo "  just before exit to B's first / last rank writing its start time (ms):"
  printf '  %-40s %10s %10s\n' path median min
  orch_row "hand-off to B's first rank" -- ${HANDOFF_FIRSTS[@]+"${HANDOFF_FIRSTS[@]}"}
  orch_row "hand-off to B's last rank (the figure)" -- ${HANDOFF_LASTS[@]+"${HANDOFF_LASTS[@]}"}
  echo
  echo "restart: $ORCH_NP ranks, one restart allowed; rank 1 fails (exit 1) 0.3 s into attempt 0."
  echo "  Time from its failure timestamp to the last rank of attempt 1 writing its start time (ms)."
  echo "  hvd embedded: hvdrun -np $ORCH_NP --max-restarts 1 (no daemon); agents local: the same"
  echo "  through the local hvdagent; agents 2 netns: -H h0:2,h1:2 on the two netns agents;"
  echo "  torchrun: --standalone --max_restarts 1 with its defaults (it polls its workers every"
  echo "  --monitor_interval 5 s); torchrun 0.1 s: --monitor_interval 0.1. Ratios: median/median"
  echo "  and min/min to torchrun (defaults), median/median to torchrun 0.1 s."
  TR_BASES=()
  if [[ -z "$WHY_NO_TORCHRUN" ]]; then
    TR_BASES=("$(stats ${R_TR[@]+"${R_TR[@]}"})" "$(stats ${R_TR_FAST[@]+"${R_TR_FAST[@]}"})")
    printf '  %-40s %10s %10s %10s %10s %10s\n' path median min "/torchrun" "(min)" "/tr 0.1 s"
  else
    printf '  %-40s %10s %10s\n' path median min
  fi
  orch_row "hvd embedded" ${TR_BASES[@]+"${TR_BASES[@]}"} -- ${R_EMB[@]+"${R_EMB[@]}"}
  orch_row "agents local" ${TR_BASES[@]+"${TR_BASES[@]}"} -- ${R_LOCAL[@]+"${R_LOCAL[@]}"}
  if [[ -z "$WHY_NO_AGENTS" ]]; then
    orch_row "agents 2 netns" ${TR_BASES[@]+"${TR_BASES[@]}"} -- ${R_NETNS[@]+"${R_NETNS[@]}"}
  fi
  if [[ -z "$WHY_NO_TORCHRUN" ]]; then
    orch_row "torchrun (defaults)" "${TR_BASES[@]}" -- ${R_TR[@]+"${R_TR[@]}"}
    orch_row "torchrun --monitor_interval 0.1" "${TR_BASES[@]}" -- ${R_TR_FAST[@]+"${R_TR_FAST[@]}"}
  fi
else
  echo "launch.sh: orchestration part skipped: $WHY_NO_ORCH"
fi

if [[ $FAILURES != 0 ]]; then
  echo "launch.sh: $FAILURES run(s) failed" >&2
  exit 1
fi
