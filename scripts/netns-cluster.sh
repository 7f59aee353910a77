#!/usr/bin/env bash
# A throw-away cluster of "hosts" on this machine: Linux network namespaces joined by veth pairs
# to a bridge, one hvdagent each (docs/architecture.md "Testing layers", e2e). Needs root and `ip netns`.
#
# usage: netns-cluster.sh up N [--prefix P] [--subnet 10.X.Y] [--key K] [--bin DIR]
#                              [--port PORT] [--log-level L] [--no-agents]
#        netns-cluster.sh down [--prefix P | --all]
#        netns-cluster.sh status [--prefix P]
#        netns-cluster.sh exec [--prefix P] I CMD [ARGS...]
#
# up      creates namespaces P-h0..P-h{N-1}, a bridge P-br in the root namespace with address
#         10.X.Y.1/24 (so hvdrun here reaches them), a veth pair per namespace (P-vI here, eth0
#         there) with address 10.X.Y.(I+2)/24 that exists only in that namespace, loopback up;
#         then starts `hvdagent --listen 10.X.Y.(I+2):PORT` in each and waits until each
#         listens. Without --key it creates a fresh cluster key in the state directory. On
#         success it prints KEY=VALUE lines (also in STATE/env): PREFIX, STATE, SUBNET, KEY,
#         PORT, N, NS_I, ADDR_I, and HOSTS (the -H list, "ADDR0,ADDR1,..."). Progress goes to
#         stderr. If anything fails half-way, everything created so far is removed. N is at
#         most 250 (one /24). Beyond ~40 hosts the kernel's neighbour table, which all namespaces
#         share, would overflow: `up` raises net.ipv4.neigh.default.gc_thresh1..3 to fit every
#         cluster alive and the last `down` restores the values it found.
# down    stops the agents (SIGTERM, then SIGKILL of every process left in the namespaces) and
#         deletes namespaces, veths, bridge and state. Idempotent; --all: every cluster.
# status  lists clusters (or one) with their namespaces, addresses and agent pids.
# exec    runs CMD inside namespace I of the cluster.
#
# Defaults: prefix "hvd" + 5 random hex digits (unique per run, so parallel runs do not
# collide), subnet 10.213.R with R random and unused by any route here, port 7475, binaries
# from build/bin. The prefix may also come from $HVD_NETNS_PREFIX for down/status/exec.
# State lives in $HVD_NETNS_STATE_ROOT (default /run/hvd-netns)/PREFIX: agent logs
# (hI/agent.log), pids, per-agent --state-dir (hI/agent-state). `down --all` tears down every
# cluster under that state root (and only those).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_ROOT="${HVD_NETNS_STATE_ROOT:-/run/hvd-netns}"
# One lock for every state root: parallel `up`s pick their subnets one at a time.
LOCK_FILE=/run/hvd-netns.lock
LISTEN_TIMEOUT_S=20
# Hosts are 10.X.Y.2 .. 10.X.Y.(N+1) of one /24, beside the bridge's .1.
MAX_HOSTS=250
STOP_GRACE_S=3

usage() { sed -n '5,9s/^# \{0,1\}//p' "$0"; }
SCRIPT_NAME=netns-cluster.sh
# shellcheck source=scripts/cluster-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster-lib.sh"

# --- naming -----------------------------------------------------------------------------------

ns_name() { echo "$1-h$2"; }    # PREFIX I
veth_name() { echo "$1-v$2"; }  # PREFIX I (root-namespace end)
bridge_name() { echo "$1-br"; } # PREFIX
state_dir() { echo "$STATE_ROOT/$1"; }

# Namespaces and links of a cluster that exist now (from the names, not the state: works after
# a crash that left no state behind).
cluster_namespaces() {
  ip netns list 2> /dev/null | awk '{ print $1 }' | grep -E "^$1-h[0-9]+$" | sort -V || true
}
cluster_links() {
  ip -o link show 2> /dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' |
    grep -E "^$1-(br|v[0-9]+)$" || true
}

# --- subnet -----------------------------------------------------------------------------------

# True if some route or address here overlaps 10.X.Y.0/24 (the default route aside).
subnet_in_use() {
  local subnet="$1"
  {
    ip -4 route show table all 2> /dev/null | awk '$1 != "default" && $1 != "broadcast" &&
      $1 != "local" && $1 != "unreachable" { print $1 } $1 == "broadcast" || $1 == "local" { print $2 }'
    ip -4 -o addr show 2> /dev/null | awk '{ print $4 }'
  } | awk -v net="$subnet.0/24" '
    function ip2n(s, a) { split(s, a, "."); return ((a[1] * 256 + a[2]) * 256 + a[3]) * 256 + a[4] }
    function lo(c, p) { split(c, p, "/"); if (p[2] == "") p[2] = 32
                        return ip2n(p[1]) - ip2n(p[1]) % 2 ^ (32 - p[2]) }
    function hi(c, p) { split(c, p, "/"); if (p[2] == "") p[2] = 32
                        return lo(c) + 2 ^ (32 - p[2]) - 1 }
    BEGIN { nlo = lo(net); nhi = hi(net); found = 0 }
    $1 ~ /^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+(\/[0-9]+)?$/ {
      if (lo($1) <= nhi && hi($1) >= nlo) found = 1 }
    END { exit found ? 0 : 1 }'
}

pick_subnet() {
  local tries r subnet
  for ((tries = 0; tries < 50; tries++)); do
    r=$((RANDOM % 254 + 1))
    subnet="10.213.$r"
    subnet_in_use "$subnet" || {
      echo "$subnet"
      return 0
    }
  done
  die "no free 10.213.X.0/24 subnet found"
}

# --- the kernel's neighbour table --------------------------------------------------------------

# The ARP entries of every namespace live in one table of the kernel's, whose limits
# (net.ipv4.neigh.default.gc_thresh1..3, settable only here in the root namespace) default to
# 128/512/1024: a cluster of ~40 hosts that all talk to each other outgrows them, and then new
# connections fail ("neighbour table overflow" in dmesg). Each cluster registers its size under
# NEIGH_DIR; the limits are raised to fit every cluster alive, never below what they were before
# the first one, and restored to those values when the last one goes down. Call under the lock.
NEIGH_DIR=/run/hvd-netns.neigh
NEIGH_SYSCTL=/proc/sys/net/ipv4/neigh/default

neigh_apply() {
  local f prefix n need=0 k orig want
  [[ -d "$NEIGH_DIR" ]] || return 0
  for f in "$NEIGH_DIR"/*.hosts; do
    [[ -f "$f" ]] || continue
    prefix="$(basename "$f" .hosts)"
    # A cluster whose `up` was killed outright left its file but no namespaces.
    if [[ -z "$(cluster_namespaces "$prefix")" ]]; then
      rm -f "$f"
      continue
    fi
    n="$(cat "$f")"
    # Each namespace may hold an entry for every other and for the bridge; the bridge one for each.
    need=$((need + (n + 1) * (n + 1)))
  done
  for k in 1 2 3; do
    orig="$(cat "$NEIGH_DIR/orig$k")"
    want=$((need << (k - 1)))  # keep gc_thresh1 <= gc_thresh2 <= gc_thresh3
    [[ $want -gt $orig ]] || want=$orig
    echo "$want" > "$NEIGH_SYSCTL/gc_thresh$k"
  done
  if [[ $need == 0 ]]; then
    rm -rf "$NEIGH_DIR"
  fi
}

neigh_register() { # PREFIX N
  local k
  if [[ ! -d "$NEIGH_DIR" ]]; then
    mkdir -p "$NEIGH_DIR"
    for k in 1 2 3; do cat "$NEIGH_SYSCTL/gc_thresh$k" > "$NEIGH_DIR/orig$k"; done
  fi
  echo "$2" > "$NEIGH_DIR/$1.hosts"
  neigh_apply
}

neigh_unregister() { # PREFIX (after its namespaces are gone)
  [[ -d "$NEIGH_DIR" ]] || return 0
  rm -f "$NEIGH_DIR/$1.hosts"
  neigh_apply
}

# --- down -------------------------------------------------------------------------------------


# Pids of every process inside the cluster's namespaces.
namespace_pids() {
  local ns
  for ns in $(cluster_namespaces "$1"); do
    ip netns pids "$ns" 2> /dev/null || true
  done
}

cluster_down() {
  local prefix="$1" pid ns link deadline state
  state="$(state_dir "$prefix")"
  # Agents first, gracefully: each stops its jobs' process groups. Only pids that are inside the
  # cluster's namespaces: a stale state dir (after a reboot) must not name someone else's process.
  stop_gracefully " $(namespace_pids "$prefix" | tr '\n' ' ') " "$state"/h*/agent.pid
  # Whatever is left in the namespaces (workers, stragglers): their groups, then themselves.
  for pid in $(namespace_pids "$prefix"); do
    kill -KILL -- "-$pid" 2> /dev/null || true
    kill -KILL "$pid" 2> /dev/null || true
  done
  deadline=$((SECONDS + 5))
  while [[ -n "$(namespace_pids "$prefix")" && $SECONDS -lt $deadline ]]; do
    sleep 0.1
  done
  [[ -z "$(namespace_pids "$prefix")" ]] ||
    log "warning: processes still in $prefix namespaces: $(namespace_pids "$prefix" | tr '\n' ' ')"
  for ns in $(cluster_namespaces "$prefix"); do
    ip netns delete "$ns" 2> /dev/null || log "warning: cannot delete namespace $ns"
  done
  for link in $(cluster_links "$prefix"); do
    ip link delete "$link" 2> /dev/null || true
  done
  {
    flock 9
    neigh_unregister "$prefix"
  } 9> "$LOCK_FILE"
  rm -rf "$state"
}

# --- up ---------------------------------------------------------------------------------------

UP_PREFIX=""
UP_DONE=0
on_up_exit() {
  local rc=$?
  if [[ $UP_DONE != 1 && -n "$UP_PREFIX" ]]; then
    log "up failed (exit $rc): removing what was created for $UP_PREFIX"
    cluster_down "$UP_PREFIX" || true
  fi
  exit "$rc"
}

# Generates a cluster key at $1 (0600): hvdrun keygen when there is one, else 32 random bytes.
make_key() {
  local key="$1" bin="$2"
  if [[ -x "$bin/hvdrun" ]] && "$bin/hvdrun" keygen --key-file "$key" > /dev/null 2>&1; then
    return 0
  fi
  rm -f "$key"
  (umask 077 && head -c 32 /dev/urandom > "$key")
}

# True once namespace $1 has a TCP listener on exactly $2 (IPv4ADDR:PORT). gRPC binds an IPv6
# socket to the v4-mapped address, which ss shows as [::ffff:ADDR]:PORT.
listening_on() {
  local socks
  socks="$(ip netns exec "$1" ss -Hltn "sport = :${2##*:}" 2> /dev/null | awk '{ print $4 }' |
    sed 's/^\[::ffff:\(.*\)\]:/\1:/')" || return 1
  grep -qxF "$2" <<< "$socks"
}

start_agent() {
  local prefix="$1" i="$2" addr="$3" port="$4" key="$5" bin="$6" loglevel="$7"
  local ns dir pid
  ns="$(ns_name "$prefix" "$i")"
  dir="$(state_dir "$prefix")/h$i"
  mkdir -p "$dir/agent-state"
  local confirm=()
  [[ $EUID -ne 0 ]] || confirm=(env HVD_ALLOW_RUN_AS_ROOT_CONFIRM=1)
  # setsid: the agent leads its own process group and session, apart from whoever ran `up`.
  # (No job control in a script, so setsid execs in place and $! is the agent's pid.)
  ip netns exec "$ns" ${confirm[@]+"${confirm[@]}"} setsid "$bin/hvdagent" \
    --listen "$addr:$port" --key-file "$key" --state-dir "$dir/agent-state" \
    --allow-run-as-root --log-level "$loglevel" < /dev/null > "$dir/agent.log" 2>&1 &
  pid=$!
  echo "$pid" > "$dir/agent.pid"
}

wait_listening() {
  local prefix="$1" i="$2" addr="$3" port="$4"
  local ns dir pid deadline
  ns="$(ns_name "$prefix" "$i")"
  dir="$(state_dir "$prefix")/h$i"
  pid="$(cat "$dir/agent.pid")"
  deadline=$((SECONDS + LISTEN_TIMEOUT_S))
  until listening_on "$ns" "$addr:$port"; do
    if ! running "$pid"; then
      log "hvdagent in $ns exited before listening on $addr:$port; its log:"
      tail -n 20 "$dir/agent.log" >&2 || true
      return 1
    fi
    if [[ $SECONDS -ge $deadline ]]; then
      log "hvdagent in $ns does not listen on $addr:$port after ${LISTEN_TIMEOUT_S}s; its log:"
      tail -n 20 "$dir/agent.log" >&2 || true
      return 1
    fi
    sleep 0.05
  done
}

cmd_up() {
  local n="" prefix="" subnet="" key="" bin="$ROOT/build/bin" port=7475 loglevel=info agents=1
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --prefix) prefix="${2:?--prefix needs a value}"; shift ;;
      --subnet) subnet="${2:?--subnet needs a value}"; shift ;;
      --key) key="${2:?--key needs a file}"; shift ;;
      --bin) bin="${2:?--bin needs a directory}"; shift ;;
      --port) port="${2:?--port needs a number}"; shift ;;
      --log-level) loglevel="${2:?--log-level needs a level}"; shift ;;
      --no-agents) agents=0 ;;
      -h | --help) usage; exit 0 ;;
      -*) usage_error "unknown option $1" ;;
      *) [[ -z "$n" ]] || usage_error "unexpected argument $1"; n="$1" ;;
    esac
    shift
  done
  [[ "$n" =~ ^[1-9][0-9]{0,2}$ && $n -le $MAX_HOSTS ]] ||
    usage_error "up expects N in 1..$MAX_HOSTS, got '${n}'"
  [[ "$port" =~ ^[1-9][0-9]{0,4}$ && $port -le 65535 ]] || usage_error "bad --port '$port'"
  [[ -n "$prefix" ]] || prefix="hvd$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n' | cut -c1-5)"
  check_prefix "$prefix"
  require_root_and_netns
  if [[ $agents == 1 ]]; then
    bin="$(cd "$bin" 2> /dev/null && pwd)" || die "--bin: no directory $bin"
    [[ -x "$bin/hvdagent" ]] || die "no $bin/hvdagent (build it, or pass --bin DIR)"
  fi
  [[ -z "$key" || -f "$key" ]] || die "--key: no file $key"
  [[ -z "$(cluster_namespaces "$prefix")$(cluster_links "$prefix")" ]] ||
    die "a cluster named $prefix exists already (netns-cluster.sh down --prefix $prefix)"

  local state
  state="$(state_dir "$prefix")"
  mkdir -p "$STATE_ROOT"
  UP_PREFIX="$prefix"
  trap on_up_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mkdir -m 0700 "$state"

  local br
  br="$(bridge_name "$prefix")"
  {
    # Subnet choice and bridge address under one lock, so parallel `up`s pick different subnets.
    flock 9
    if [[ -z "$subnet" ]]; then
      subnet="$(pick_subnet)"
    else
      [[ "$subnet" =~ ^10\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || usage_error "--subnet expects 10.X.Y"
      ! subnet_in_use "$subnet" || die "subnet $subnet.0/24 is already in use here (ip route)"
    fi
    ip link add "$br" type bridge
    ip addr add "$subnet.1/24" dev "$br"
    ip link set "$br" up
  } 9> "$LOCK_FILE"

  [[ -n "$key" ]] || {
    key="$state/cluster.key"
    make_key "$key" "$bin"
  }
  key="$(cd "$(dirname "$key")" && pwd)/$(basename "$key")"

  local i ns veth addr hosts=""
  for ((i = 0; i < n; i++)); do
    ns="$(ns_name "$prefix" "$i")"
    veth="$(veth_name "$prefix" "$i")"
    addr="$subnet.$((i + 2))"
    add_namespace_on_bridge "$ns" "$veth" "$br" "$addr" "$subnet"
    mkdir -p "$state/h$i"
    hosts+="${hosts:+,}$addr"
  done
  {
    flock 9
    neigh_register "$prefix" "$n"
  } 9> "$LOCK_FILE"

  if [[ $agents == 1 ]]; then
    for ((i = 0; i < n; i++)); do
      start_agent "$prefix" "$i" "$subnet.$((i + 2))" "$port" "$key" "$bin" "$loglevel"
    done
    for ((i = 0; i < n; i++)); do
      wait_listening "$prefix" "$i" "$subnet.$((i + 2))" "$port"
    done
  fi

  {
    echo "PREFIX=$prefix"
    echo "STATE=$state"
    echo "SUBNET=$subnet"
    echo "KEY=$key"
    echo "PORT=$port"
    echo "N=$n"
    for ((i = 0; i < n; i++)); do
      echo "NS_$i=$(ns_name "$prefix" "$i")"
      echo "ADDR_$i=$subnet.$((i + 2))"
    done
    echo "HOSTS=$hosts"
  } > "$state/env"
  UP_DONE=1
  local what="agents on port $port"
  [[ $agents == 1 ]] || what="no agents"
  log "cluster $prefix up: $n host(s) $hosts, $what"
  cat "$state/env"
}

# --- down / status / exec ---------------------------------------------------------------------

cmd_down() {
  local prefix="${HVD_NETNS_PREFIX:-}" all=0
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --prefix) prefix="${2:?--prefix needs a value}"; shift ;;
      --all) all=1 ;;
      -h | --help) usage; exit 0 ;;
      *) usage_error "down: unexpected argument $1" ;;
    esac
    shift
  done
  require_root_and_netns
  if [[ $all == 1 ]]; then
    local dir
    for dir in "$STATE_ROOT"/*/; do
      [[ -d "$dir" ]] || continue
      cluster_down "$(basename "$dir")"
    done
    return 0
  fi
  [[ -n "$prefix" ]] || usage_error "down needs --prefix P (or --all)"
  check_prefix "$prefix"
  cluster_down "$prefix"
}

cmd_status() {
  local prefix="${HVD_NETNS_PREFIX:-}"
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --prefix) prefix="${2:?--prefix needs a value}"; shift ;;
      *) usage_error "status: unexpected argument $1" ;;
    esac
    shift
  done
  require_root_and_netns
  local prefixes=() p dir ns i pid addr state
  if [[ -n "$prefix" ]]; then
    prefixes=("$prefix")
  else
    for dir in "$STATE_ROOT"/*/; do
      [[ -d "$dir" ]] && prefixes+=("$(basename "$dir")")
    done
  fi
  [[ ${#prefixes[@]} -gt 0 ]] || {
    echo "no clusters"
    return 0
  }
  for p in "${prefixes[@]}"; do
    state="$(state_dir "$p")"
    echo "cluster $p (state $state)"
    for ns in $(cluster_namespaces "$p"); do
      i="${ns##*-h}"
      addr="$(ip -n "$ns" -4 -o addr show dev eth0 2> /dev/null | awk '{ print $4 }')"
      pid="$(cat "$state/h$i/agent.pid" 2> /dev/null || echo -)"
      if [[ "$pid" != - ]] && running "$pid"; then
        pid="$pid (running)"
      elif [[ "$pid" != - ]]; then
        pid="$pid (exited)"
      fi
      printf '  %-14s %-18s agent %s\n' "$ns" "${addr:--}" "$pid"
    done
  done
}

cmd_exec() {
  local prefix="${HVD_NETNS_PREFIX:-}"
  if [[ "${1:-}" == --prefix ]]; then
    prefix="${2:?--prefix needs a value}"
    shift 2
  fi
  [[ -n "$prefix" ]] || usage_error "exec needs --prefix P (or HVD_NETNS_PREFIX)"
  [[ $# -ge 2 && "$1" =~ ^[0-9]+$ ]] || usage_error "exec expects I CMD [ARGS...]"
  check_prefix "$prefix"
  local ns
  ns="$(ns_name "$prefix" "$1")"
  shift
  exec ip netns exec "$ns" "$@"
}

main() {
  [[ $# -gt 0 ]] || usage_error "missing command"
  local cmd="$1"
  shift
  case "$cmd" in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status "$@" ;;
    exec) cmd_exec "$@" ;;
    -h | --help | help) usage ;;
    *) usage_error "unknown command $cmd" ;;
  esac
}

main "$@"
