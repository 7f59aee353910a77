#!/bin/sh
# A rank of bench/launch.sh's restart benchmark, the same file under hvdrun and torchrun.
#
# usage: restart_rank.sh DIR
#
# Attempt 0 (HVD_RESTART_COUNT, else TORCHELASTIC_RESTART_COUNT, is 0): rank 1 (HVD_RANK, else
# RANK) sleeps 0.3 s, writes the time (ns since the epoch) to DIR/fail and exits 1; every other
# rank waits to be stopped. Later attempts: each rank writes its start time to DIR/start.RANK
# and exits 0. The restart time is the last DIR/start.* minus DIR/fail.
set -eu
dir="${1:?usage: restart_rank.sh DIR}"
rank="${HVD_RANK:-${RANK:?neither HVD_RANK nor RANK is set}}"
attempt="${HVD_RESTART_COUNT:-${TORCHELASTIC_RESTART_COUNT:?neither HVD_RESTART_COUNT nor TORCHELASTIC_RESTART_COUNT is set}}"
if [ "$attempt" = 0 ]; then
  if [ "$rank" = 1 ]; then
    sleep 0.3
    date +%s%N > "$dir/fail"
    exit 1
  fi
  exec sleep 120 # stopped by the restart; the benchmark's timeout is shorter
fi
date +%s%N > "$dir/start.$rank"
