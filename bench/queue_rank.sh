#!/bin/sh
# A rank of bench/launch.sh's queue hand-off benchmark (under hvdrun: HVD_RANK).
#
# usage: queue_rank.sh hold DIR    wait for DIR/go, then write the time (ns since the epoch) to
#                                  DIR/end.RANK and exit 0 (job A, which holds the GPUs)
#        queue_rank.sh start DIR   write the time to DIR/start.RANK at once and exit 0 (job B,
#                                  queued behind A)
# The hand-off is the last DIR/start.* minus the last DIR/end.*.
set -eu
mode="${1:?usage: queue_rank.sh hold|start DIR}"
dir="${2:?usage: queue_rank.sh hold|start DIR}"
rank="${HVD_RANK:?HVD_RANK is not set}"
case "$mode" in
  hold)
    while [ ! -e "$dir/go" ]; do sleep 0.02; done
    date +%s%N > "$dir/end.$rank"
    ;;
  start) date +%s%N > "$dir/start.$rank" ;;
  *) echo "queue_rank.sh: unknown mode $mode" >&2; exit 2 ;;
esac
