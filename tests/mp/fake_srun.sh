#!/usr/bin/env bash
# A stand-in for Slurm's srun in the agents' step hvdrun runs inside an allocation
# (launcher/slurm_agents.h), for tests on one machine without Slurm: it accepts the options
# hvdrun passes (--nodelist=A,B,... and flags it ignores), then runs PROGRAM ARGS once per node
# with SLURMD_NODENAME=<node> and SLURM_LAUNCH_NODE_IPADDR=127.0.0.1, broadcasting its stdin to
# every task's stdin as srun --input=all does, and exits when every task has (status: the first
# non-zero one). Every invocation is appended to $FAKE_SRUN_LOG when set.
set -euo pipefail
nodes=()
while [[ $# -gt 0 && "$1" == --* ]]; do
  case "$1" in
    --nodelist=*) IFS=, read -r -a nodes <<< "${1#--nodelist=}" ;;
  esac
  shift
done
[[ ${#nodes[@]} -gt 0 ]] || { echo "fake_srun: no --nodelist" >&2; exit 2; }
[[ -n "${FAKE_SRUN_LOG:-}" ]] && echo "${nodes[*]} :: $*" >> "$FAKE_SRUN_LOG"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pids=()
fifos=()
for node in "${nodes[@]}"; do
  mkfifo "$dir/$node"
  fifos+=("$dir/$node")
  SLURMD_NODENAME="$node" SLURM_LAUNCH_NODE_IPADDR=127.0.0.1 "$@" < "$dir/$node" &
  pids+=($!)
done
# Broadcast stdin; the tasks' stdin ends when ours does.
tee "${fifos[@]}" > /dev/null || true
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || { rc=$?; [[ $status -ne 0 ]] || status=$rc; }
done
exit "$status"
