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

require_root_and_netns() {
  [[ $EUID -eq 0 ]] || die "needs root (network namespaces)"
  command -v ip > /dev/null || die "needs iproute2 (ip)"
  ip netns list > /dev/null 2>&1 || die "'ip netns' is not available here"
}

# Interface names are at most 15 characters: "P-br", "P-v249", "P-vctl" must fit.
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

# Creates network namespace NS with a veth pair (VETH here, eth0 there) whose end here joins
# BRIDGE, and gives eth0 ADDR/24, loopback, and a default route via SUBNET.1 (the bridge).
add_namespace_on_bridge() { # NS VETH BRIDGE ADDR SUBNET
  local ns="$1" veth="$2" bridge="$3" addr="$4" subnet="$5"
  ip netns add "$ns"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  ip link set "$veth" master "$bridge"
  ip link set "$veth" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via "$subnet.1"
}

# SIGTERM to the processes named by the pid files PIDFILE... that are among INSIDE (" pid pid ",
# the processes in the cluster's namespaces: a stale pid file, after a reboot, must not name
# someone else's process), then a wait of at most $STOP_GRACE_S seconds for them to end.
stop_gracefully() { # INSIDE PIDFILE...
  local inside="$1" pidfile pid pids=() deadline
  shift
  for pidfile in "$@"; do
    [[ -f "$pidfile" ]] || continue
    pid="$(cat "$pidfile" 2> /dev/null || true)"
    if [[ -n "$pid" && "$inside" == *" $pid "* ]]; then pids+=("$pid"); fi
  done
  for pid in ${pids[@]+"${pids[@]}"}; do
    kill -TERM "$pid" 2> /dev/null || true
  done
  deadline=$((SECONDS + STOP_GRACE_S))
  for pid in ${pids[@]+"${pids[@]}"}; do
    while running "$pid" && [[ $SECONDS -lt $deadline ]]; do
      sleep 0.05
    done
  done
}
