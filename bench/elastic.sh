#!/usr/bin/env bash
# Elastic benchmark: how long a job stands still when a worker fails, and how long a new host
# takes to join, for hvd's elastic mode beside the full restart of the same job (hvdrun
# --max-restarts 1, and torchrun --max-restarts 1), in one run on this machine.
#
# usage: bench/elastic.sh [BUILD_DIR] [--repeats R (default 3)] [--no-agents]
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
# and, over two hvdagents in network namespaces (scripts/netns-cluster.sh up 2; needs root,
# `ip netns` and BUILD/bin/hvdagent, else skipped with a message; --no-agents skips it), 2 x 2:
#   netns elastic fail   hvdrun -np 4 --min-np 2 -H h0:2,h1:2 through the agents; rank 3 (on h1)
#                        fails at step 20: from its failure to the first step done at 2 ranks
#   netns elastic grow   hvdrun -np 2 --min-np 2 --host-discovery-script (h0:2; the script's
#                        first answer names the leader, h0's agent); at step 20 it lists h1:2
#                        too: from then to the first step done at 4 ranks
#   netns hvd restart    the same hosts with --max-restarts 1: to the first step of attempt 1
#   netns torchrun       torchrun --nnodes 2 --nproc_per_node 2 --max_restarts 1 in each
#                        namespace (static rendezvous at h0, gloo over eth0): rank 3 fails at
#                        step 20, both nodes' workers restart: to the first step of attempt 1
# Each is run R times, interleaved; the table has the median and min in seconds, to the first
# step begun (training resumed: the state restored, the ring formed) and to the first step
# done (that step's work added, the same for every row but the cold start's), and the full
# restarts' median over elastic's (the target: elastic resumes at least 5x faster than
# hvdrun's full restart). Absolute figures drift on a shared machine; read the ratios.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
REPEATS=3
AGENTS=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeats) REPEATS="$2"; shift 2 ;;
    --no-agents) AGENTS=0; shift ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
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
NETNS="$ROOT/scripts/netns-cluster.sh"
CLUSTER=""
cleanup() {
  [[ -z "$CLUSTER" ]] || "$NETNS" down --prefix "$CLUSTER" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

WHY_NO_AGENTS=""
if [[ $AGENTS != 1 ]]; then
  WHY_NO_AGENTS="--no-agents"
elif [[ $EUID -ne 0 ]]; then
  WHY_NO_AGENTS="needs root for network namespaces"
elif ! ip netns list >/dev/null 2>&1; then
  WHY_NO_AGENTS="'ip netns' is not available"
elif [[ ! -x "$BUILD/bin/hvdagent" ]]; then
  WHY_NO_AGENTS="no $BUILD/bin/hvdagent (build it)"
fi
A0="" A1="" KEY=""
if [[ -z "$WHY_NO_AGENTS" ]]; then
  CLUSTER="bel$$"
  if env_lines="$("$NETNS" up 2 --prefix "$CLUSTER" --bin "$BUILD/bin" --log-level warn \
      2>"$WORK/netns.log")"; then
    A0="$(sed -n 's/^ADDR_0=//p' <<<"$env_lines")"
    A1="$(sed -n 's/^ADDR_1=//p' <<<"$env_lines")"
    KEY="$(sed -n 's/^KEY=//p' <<<"$env_lines")"
  else
    cat "$WORK/netns.log" >&2
    echo "bench/elastic.sh: netns-cluster.sh up failed" >&2
    exit 1
  fi
fi

# Seconds from the first "FAIL t" (or the mark file's time) to the first step begun ("B") and
# to the first step done ("T") after it with the given size, or ("restarted") of a later
# attempt, as "BEGUN/DONE"; "-" where the log has none.
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
# Two figures: to the first step begun (training resumed: the state is there, the ring formed)
# and to the first step done (one step of this size more).
out = []
for kind in ("B", "T"):
    for t, n, a in re.findall(kind + r" (\d+\.\d+) size (\d+) step \d+ attempt (\d+)", text):
        if float(t) > start and (n == size if size != "restarted" else int(a) > 0):
            out.append("%.3f" % (float(t) - start))
            break
    else:
        out.append("-")
print("/".join(out))
EOF
}

run_elastic_fail() {  # LOG
  timeout 300 "$HVDRUN" -np 4 --min-np 2 -H localhost:2,127.0.0.1:2 --no-tag-output -- \
    "$PYTHON" "$TRAIN" --mode elastic --fail-rank 3 --fail-step 20 >"$1" 2>&1 || true
  measure "$1" 2
}

# Once the job in LOG has done step 20 at 2 ranks, the time goes to MARK and the discovery
# script's file HOSTS gets LIST (printf format) instead.
list_at_step_20() {  # LOG MARK HOSTS LIST
  local i
  for ((i = 0; i < 1200; ++i)); do
    grep -q "size 2 step 20 " "$1" && break
    sleep 0.05
  done
  date +%s.%N >"$2"
  # shellcheck disable=SC2059
  printf "$4" >"$3"
}

run_elastic_grow() {  # LOG
  local hosts="$WORK/hosts" mark="$WORK/grow.mark" pid
  printf 'localhost:2\n' >"$hosts"
  printf '#!/bin/sh\ncat %s\n' "$hosts" >"$WORK/discover.sh"
  chmod +x "$WORK/discover.sh"
  rm -f "$mark"
  timeout 300 "$HVDRUN" -np 2 --min-np 2 --host-discovery-script "$WORK/discover.sh" \
    --no-tag-output -- "$PYTHON" "$TRAIN" --mode elastic --steps 100 >"$1" 2>&1 &
  pid=$!
  list_at_step_20 "$1" "$mark" "$hosts" 'localhost:2\n127.0.0.1:2\n'
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

run_netns_elastic_fail() {  # LOG
  timeout 300 "$HVDRUN" -np 4 --min-np 2 -H "$A0:2,$A1:2" --key-file "$KEY" -x PYTHONPATH \
    --no-tag-output -- "$PYTHON" "$TRAIN" --mode elastic --fail-rank 3 --fail-step 20 \
    >"$1" 2>&1 || true
  measure "$1" 2
}

run_netns_elastic_grow() {  # LOG
  local hosts="$WORK/netns-hosts" mark="$WORK/netns-grow.mark" pid
  printf '%s:2\n' "$A0" >"$hosts"
  printf '#!/bin/sh\ncat %s\n' "$hosts" >"$WORK/netns-discover.sh"
  chmod +x "$WORK/netns-discover.sh"
  rm -f "$mark"
  timeout 300 "$HVDRUN" -np 2 --min-np 2 --host-discovery-script "$WORK/netns-discover.sh" \
    --key-file "$KEY" -x PYTHONPATH --no-tag-output -- "$PYTHON" "$TRAIN" --mode elastic \
    --steps 100 >"$1" 2>&1 &
  pid=$!
  list_at_step_20 "$1" "$mark" "$hosts" "$A0:2\\n$A1:2\\n"
  wait "$pid" || true
  measure "$1" 4 "$mark"
}

run_netns_torchrun() {  # LOG
  local i pids=()
  rm -f "$WORK/ckpt"
  # Each namespace is a node; the port is inside the namespaces this script made. gloo binds
  # eth0 (the hostname resolves outside the namespaces).
  for i in 0 1; do
    GLOO_SOCKET_IFNAME=eth0 timeout 300 ip netns exec "$CLUSTER-h$i" "$PYTHON" \
      -m torch.distributed.run --nnodes 2 --node_rank "$i" --nproc_per_node 2 --max_restarts 1 \
      --rdzv_backend static --master_addr "$A0" --master_port 29533 --redirects 2 --tee 2 \
      "$TRAIN" --mode torchrun --fail-rank 3 --fail-step 20 --checkpoint "$WORK/ckpt" \
      >"$1.node$i" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  cat "$1.node0" "$1.node1" >"$1"
  measure "$1" restarted
}

run_netns_hvd_restart() {  # LOG
  rm -f "$WORK/ckpt"
  timeout 300 "$HVDRUN" -np 4 -H "$A0:2,$A1:2" --key-file "$KEY" -x PYTHONPATH \
    --max-restarts 1 --restart-min-uptime 0 --no-tag-output -- "$PYTHON" "$TRAIN" \
    --mode restart --fail-rank 3 --fail-step 20 --checkpoint "$WORK/ckpt" >"$1" 2>&1 || true
  measure "$1" restarted
}

declare -A RESULTS
KINDS=(elastic_fail elastic_grow hvd_restart torchrun)
if [[ -z "$WHY_NO_AGENTS" ]]; then
  KINDS+=(netns_elastic_fail netns_elastic_grow netns_hvd_restart netns_torchrun)
  RESULTS[netns_elastic_fail]=""
  RESULTS[netns_elastic_grow]=""
  RESULTS[netns_hvd_restart]=""
  RESULTS[netns_torchrun]=""
else
  echo "bench/elastic.sh: the 2 x 2 netns rows are skipped: $WHY_NO_AGENTS" >&2
fi
for ((r = 1; r <= REPEATS; ++r)); do
  for kind in "${KINDS[@]}"; do
    value="$("run_$kind" "$WORK/$kind.$r.log")"
    RESULTS[$kind]+="$value "
    echo "  repeat $r: $kind ${value} s" >&2
    [[ "$value" != "-/-" ]] || { echo "    (no figure; the log follows)" >&2; tail -20 "$WORK/$kind.$r.log" >&2; }
  done
done

"$PYTHON" - "${RESULTS[elastic_fail]}" "${RESULTS[elastic_grow]}" "${RESULTS[hvd_restart]}" \
  "${RESULTS[torchrun]}" "${RESULTS[netns_elastic_fail]-}" "${RESULTS[netns_elastic_grow]-}" \
  "${RESULTS[netns_hvd_restart]-}" "${RESULTS[netns_torchrun]-}" <<'EOF'
import statistics, sys
names = ["elastic: failure -> resumed at 2 ranks", "elastic: host listed -> training at 4",
         "hvdrun --max-restarts 1: failure -> resumed", "torchrun --max-restarts 1: failure -> resumed",
         "2x2 netns elastic: failure -> resumed at 2", "2x2 netns elastic: host listed -> at 4",
         "2x2 netns hvdrun --max-restarts 1: -> resumed",
         "2x2 netns torchrun --max-restarts 1: -> resumed"]
def column(arg, i):
    return [float(v.split("/")[i]) for v in arg.split() if v.split("/")[i] != "-"]
begun = [column(arg, 0) for arg in sys.argv[1:]]
done = [column(arg, 1) for arg in sys.argv[1:]]
med = lambda f: statistics.median(f) if f else float("nan")
print()
print("%-50s %22s %22s %5s" % ("np 4, seconds", "to a step begun", "to a step done", "runs"))
print("%-50s %11s %10s %11s %10s" % ("", "median", "min", "median", "min"))
for name, b, d in zip(names, begun, done):
    if not b and not d and name.startswith("2x2"):
        continue
    print("%-50s %11.3f %10.3f %11.3f %10.3f %5d" % (
        name, med(b), min(b) if b else float("nan"), med(d), min(d) if d else float("nan"),
        len(d)))
print()
for label, f in (("to a step begun", begun), ("to a step done", done)):
    line = "full restart / elastic resume (medians, %s): hvdrun %.1fx, torchrun %.1fx" % (
        label, med(f[2]) / med(f[0]), med(f[3]) / med(f[0]))
    if f[4] and f[6]:
        line += ", 2x2 netns hvdrun %.1fx" % (med(f[6]) / med(f[4]))
    if f[4] and f[7]:
        line += ", 2x2 netns torchrun %.1fx" % (med(f[7]) / med(f[4]))
    print(line)
EOF
