# shellcheck shell=bash
# Helpers shared by the throw-away cluster scripts (netns-cluster.sh, slurm-cluster.sh), which
# source this file after setting SCRIPT_NAME (for messages) and defining usage().

die() {
  echo "$SCRIPT_NAME: $*" >&2
  exit 1
}
usage_error() {
  echo "$SCRIPT_NAME: $*" >&2
  usage >&2
  exit 2
}
log() { echo "$SCRIPT_NAME: $*" >&2; }

# Interface names are at most 15 characters: "P-br", "P-v12", "P-vctl" must fit.
check_prefix() {
  [[ "$1" =~ ^[a-z][a-z0-9]{0,9}$ ]] ||
    usage_error "prefix '$1' must be 1-10 lowercase letters/digits, starting with a letter"
}

# True while process $1 runs: exists and is not a zombie (a daemon orphaned by `up` is reaped by
# init, which may take a while after it exited).
running() {
  local stat
  stat="$(cat "/proc/$1/stat" 2> /dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat:0:1}" != Z ]]
}
