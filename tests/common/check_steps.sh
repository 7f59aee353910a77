# Steps of the shell checks (tests/install, tests/packaging), sourced after CHECK_NAME is set
# ("install check", "packaging check"): each failure names the check, the step and what the
# step printed.

# fail WHAT [OUTPUT]: ends the check, with OUTPUT indented under the message.
fail() {
  echo "$CHECK_NAME failed: $1" >&2
  [[ $# -gt 1 ]] && printf '%s\n' "$2" | sed 's/^/  | /' >&2
  exit 1
}
# expect STEP PATTERN OUTPUT: OUTPUT must contain a line matching PATTERN (extended regex).
expect() {
  grep -Eq -- "$2" <<<"$3" || fail "$1: no line matches '$2'" "$3"
}
# run STEP CMD...: runs CMD, fails the check with its output if it fails; prints its output.
run() {
  local step="$1" out
  shift
  out="$("$@" 2>&1)" || fail "$step: exit status $?" "$out"
  printf '%s' "$out"
}
