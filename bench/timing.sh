# shellcheck shell=bash disable=SC2034  # MS and FAILURES are for the scripts that source this
# Timing helpers sourced by bench/launch.sh and bench/output.sh: wall time of one command in
# ms, and the median and min of a list. The caller sets RUN_TIMEOUT (seconds), LOG (a file for
# the command's output) and BENCH_NAME (for messages).
FAILURES=0
# bounded CMD...: runs CMD under `timeout` (SIGTERM to its process group after RUN_TIMEOUT
# seconds, SIGKILL 5 s later) and returns its status. In the background and waited for, with
# stdin kept, so that a signal's trap runs at once rather than when CMD ends; an EXIT trap
# calls stop_bounded to stop the run in progress.
BOUNDED_PID=""
bounded() {
  local rc=0
  timeout -k 5 "$RUN_TIMEOUT" "$@" <&0 &
  BOUNDED_PID=$!
  wait "$BOUNDED_PID" || rc=$?
  BOUNDED_PID=""
  return "$rc"
}
# stop_bounded: stops the run in progress, if any (timeout passes the SIGTERM on to its process
# group, SIGKILL 5 s later), and waits for it.
stop_bounded() {
  [[ -n "$BOUNDED_PID" ]] || return 0
  kill -TERM "$BOUNDED_PID" 2> /dev/null || true
  wait "$BOUNDED_PID" 2> /dev/null || true
  BOUNDED_PID=""
}
# time_ms NAME CMD...: runs CMD and sets MS to its wall time in ms (microsecond resolution); on
# failure prints its output to stderr, counts it and sets MS empty. A run still going after
# RUN_TIMEOUT seconds is stopped (see bounded) and fails, saying so.
# (Not run in a subshell, so that FAILURES counts.)
MS=""
time_ms() {
  local name="$1" start end rc=0
  shift
  start="${EPOCHREALTIME/[.,]/}"
  bounded "$@" > "$LOG" 2>&1 || rc=$?
  end="${EPOCHREALTIME/[.,]/}"
  if [[ $rc != 0 ]]; then
    {
      # (124 alone does not say it: hvdrun exits 124 for a job's own --time-limit.)
      if [[ $rc == 124 || $rc == 137 ]] && ((end - start >= RUN_TIMEOUT * 1000000)); then
        echo "$BENCH_NAME: FAILED ($name, timed out after $RUN_TIMEOUT s): $*"
      else
        echo "$BENCH_NAME: FAILED ($name, exit $rc): $*"
      fi
      tail -n 20 "$LOG"
    } >&2
    FAILURES=$((FAILURES + 1))
    MS=""
    return 0
  fi
  MS="$(awk -v us="$((end - start))" 'BEGIN { printf "%.3f", us / 1000 }')"
}

# stats V...: prints "median min" of the values (ms).
stats() {
  [[ $# -gt 0 ]] || { echo "nan nan"; return; }
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
    END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "%.1f %.1f\n", m, v[1] }'
}

