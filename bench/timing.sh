# Timing helpers sourced by bench/launch.sh and bench/output.sh: wall time of one command in
# ms, and the median and min of a list. The caller sets RUN_TIMEOUT (seconds), LOG (a file for
# the command's output) and BENCH_NAME (for messages).
FAILURES=0
# time_ms NAME CMD...: runs CMD and sets MS to its wall time in ms (microsecond resolution); on
# failure prints its output to stderr, counts it and sets MS empty. (Not run in a subshell, so
# that FAILURES counts.)
MS=""
time_ms() {
  local name="$1" start end rc=0
  shift
  start="${EPOCHREALTIME/[.,]/}"
  timeout "$RUN_TIMEOUT" "$@" > "$LOG" 2>&1 || rc=$?
  end="${EPOCHREALTIME/[.,]/}"
  if [[ $rc != 0 ]]; then
    {
      echo "$BENCH_NAME: FAILED ($name, exit $rc): $*"
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

