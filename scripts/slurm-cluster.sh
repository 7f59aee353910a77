#!/usr/bin/env bash
# A real, throw-away Slurm cluster on this machine, for e2e tests (docs/architecture.md "Testing layers"):
# slurmd "nodes" in Linux network namespaces joined by a bridge (scripts/netns-cluster.sh), a
# slurmctld in a namespace of its own, and a private munged. Needs root, `ip netns`, Debian's
# slurm-wlm and munge (scripts/install-deps.sh).
#
# usage: slurm-cluster.sh up N [--prefix P] [--state-root DIR] [--cpus C] [--exclusive]
#        slurm-cluster.sh down [--prefix P] [--state-root DIR]
#
# up      runs `netns-cluster.sh up N --no-agents --prefix P`: namespaces P-h0..P-h{N-1} with
#         address 10.213.R.(I+2) on eth0, bridge P-br with 10.213.R.1 here. Then creates:
#         - namespace P-ctl, veth P-vctl here / eth0 there, address 10.213.R.254, on the bridge;
#         - a munge key (0400) and a private munged (in P-ctl) with its own socket, pid, log
#           and seed files, all under STATE/munge;
#         - STATE/slurm.conf (and cgroup.conf): cluster P, SlurmctldHost=Pctl(10.213.R.254),
#           nodes Pn0..Pn{N-1} at the namespace addresses with CPUs=C each (default 4: more
#           than this machine has, SlurmdParameters=config_overrides), partition "main"
#           (Default, MaxTime=INFINITE; with --exclusive, OverSubscribe=EXCLUSIVE: every job gets
#           whole nodes, as on many GPU clusters), auth/cred munge over the private socket, no
#           accounting, SlurmUser=root; state, spool (STATE/spool/NODE), pids and logs under
#           STATE (STATE/log/slurmctld.log, STATE/log/slurmd-NODE.log);
#         - slurmctld in P-ctl with its own UTS namespace (hostname Pctl), then one
#           `slurmd -N PnI` in P-hI with its own UTS namespace (hostname PnI) and its own
#           configuration directory (STATE/node/PnI: mpi.conf puts PMIx's files in
#           STATE/tmp/PnI, as the nodes share /tmp); fixed ports
#           (6817, 6818) exist only inside those namespaces;
#         and waits until sinfo shows every node idle. On success it prints KEY=VALUE lines
#         (also in STATE/env): SLURM_CONF, NODES (hostlist, "Pn[0-1]"), N, PREFIX, STATE,
#         SUBNET, CTL_NS, CTL_ADDR, CTL_HOST, MUNGE_SOCKET, NODE_I, NS_I, ADDR_I. Progress goes
#         to stderr. If anything fails half-way, everything created so far is removed.
# down    cancels the cluster's jobs (so that their srun/salloc, wherever they run, exit), stops
#         slurmd, slurmctld and munged (SIGTERM, then SIGKILL of every process left in the
#         namespaces) and deletes namespaces, veths, bridge and state. Idempotent.
#
# Clients (srun, salloc, sinfo, scontrol) run anywhere, the root namespace included, with only
# SLURM_CONF=STATE/slurm.conf exported. Node names resolve only through slurm.conf (NodeAddr):
# neither here nor inside the namespaces does the resolver know them.
#
# Defaults: prefix "hvd" + 5 random hex digits; state root $HVD_NETNS_STATE_ROOT (default
# /run/hvd-netns), state STATE_ROOT/PREFIX. The prefix may also come from $HVD_NETNS_PREFIX.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NETNS="$ROOT/scripts/netns-cluster.sh"
STATE_ROOT="${HVD_NETNS_STATE_ROOT:-/run/hvd-netns}"
CTLD_TIMEOUT_S=20
IDLE_TIMEOUT_S=30
STOP_GRACE_S=3
CPUS_PER_NODE=4
OVERSUBSCRIBE=NO # --exclusive: EXCLUSIVE (every job gets whole nodes)
ETC_DIR=""         # STATE/etc, once written (write_etc)
SLURM_CONF_FILE="" # STATE/slurm.conf

usage() { sed -n '7,8s/^# \{0,1\}//p' "$0"; }
SCRIPT_NAME=slurm-cluster.sh
# shellcheck source=scripts/cluster-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster-lib.sh"

require_tools() {
  require_root_and_netns
  local t
  for t in unshare nsenter; do
    command -v "$t" > /dev/null || die "needs $t (util-linux)"
  done
  for t in munged mungekey slurmctld slurmd sinfo squeue scancel; do
    command -v "$t" > /dev/null ||
      die "no $t: install Debian's slurm-wlm and munge (scripts/install-deps.sh)"
  done
}

# --- naming -----------------------------------------------------------------------------------

ctl_ns() { echo "$1-ctl"; }
ctl_veth() { echo "$1-vctl"; }
ctl_host() { echo "$1ctl"; }
node_name() { echo "$1n$2"; } # PREFIX I
state_dir() { echo "$STATE_ROOT/$1"; }

hostlist() { # PREFIX N
  if [[ $2 -eq 1 ]]; then echo "$1n0"; else echo "$1n[0-$(($2 - 1))]"; fi
}

# --- processes --------------------------------------------------------------------------------


ns_exists() { ip netns list 2> /dev/null | awk '{ print $1 }' | grep -xF "$1" > /dev/null; }

# Pids in the namespaces of cluster $1: its node namespaces and P-ctl.
cluster_pids() {
  local ns
  for ns in $(ip netns list 2> /dev/null | awk '{ print $1 }' | grep -E "^$1-(h[0-9]+|ctl)$"); do
    ip netns pids "$ns" 2> /dev/null || true
  done
}

# Starts "$@" in network namespace $1 with a UTS namespace of its own whose hostname is $2 and a
# mount namespace of its own where STATE/etc/hosts and STATE/etc/resolv.conf cover /etc's (see
# write_etc), in a session of its own, stdout/stderr to $3; the pid (the daemon's own: every
# step execs) goes to $4. Children (slurmstepd, the tasks) inherit all of it.
start_in_ns() {
  local ns="$1" host="$2" out="$3" pidfile="$4"
  shift 4
  # nsenter, not `ip netns exec`: that remounts /sys, which hides /sys/fs/cgroup, and slurmd
  # 22.05 will not start without its cgroup plugin (even with proctrack/linuxproc, task/none).
  # --propagation slave: mounts made later in the root namespace still show inside.
  # shellcheck disable=SC2016 # expanded by that sh
  nsenter --net="/run/netns/$ns" setsid unshare --uts --mount --propagation slave sh -c '
    hostname "$0" && mount --bind "$1" /etc/hosts || exit
    [ ! -e /etc/resolv.conf ] || mount --bind "$2" /etc/resolv.conf || exit
    shift 2 && exec "$@"' "$host" "$ETC_DIR/hosts" "$ETC_DIR/resolv.conf" \
    env SLURM_CONF="$SLURM_CONF_FILE" "$@" < /dev/null > "$out" 2>&1 &
  echo "$!" > "$pidfile"
}

# Each daemon's log, or where it has none yet, what it wrote to stdout/stderr.
tail_logs() {
  local state="$1" out f
  for out in "$state"/log/*.out "$state"/munge/munged.out; do
    [[ -e "$out" ]] || continue
    f="${out%.out}.log"
    [[ -s "$f" ]] || f="$out"
    [[ -s "$f" ]] || continue
    log "--- $f (tail)"
    tail -n 15 "$f" >&2 || true
  done
}

# --- down -------------------------------------------------------------------------------------

cluster_down() {
  local prefix="$1" state pid pidfile deadline in_ns
  state="$(state_dir "$prefix")"
  # Only pids inside the cluster's namespaces: a stale state dir must not name someone else's.
  in_ns=" $(cluster_pids "$prefix" | tr '\n' ' ') "
  # Jobs first, while slurmctld can still tell their srun/salloc (which may run outside the
  # namespaces) to go: an srun whose controller vanished ignores SIGTERM and hangs.
  pid="$(cat "$state/run/slurmctld.pid" 2> /dev/null || true)"
  if [[ -n "$pid" && "$in_ns" == *" $pid "* && -f "$state/slurm.conf" ]]; then
    local jobs
    jobs="$(SLURM_CONF="$state/slurm.conf" timeout 5 squeue -h -o %A 2> /dev/null || true)"
    if [[ -n "$jobs" ]]; then
      # shellcheck disable=SC2086 # one job id a word
      SLURM_CONF="$state/slurm.conf" timeout 5 scancel $jobs 2> /dev/null || true
      deadline=$((SECONDS + STOP_GRACE_S + 2))
      while [[ -n "$(SLURM_CONF="$state/slurm.conf" timeout 5 squeue -h -o %A 2> /dev/null)" &&
        $SECONDS -lt $deadline ]]; do
        sleep 0.1
      done
    fi
  fi
  # Then the daemons, gracefully (slurmd stops what is left of its steps).
  stop_gracefully "$in_ns" "$state"/run/*.pid
  # Whatever is left in P-ctl (munged, stragglers); netns-cluster.sh does the node namespaces.
  local ns
  ns="$(ctl_ns "$prefix")"
  if ns_exists "$ns"; then
    for pid in $(ip netns pids "$ns" 2> /dev/null); do
      kill -KILL -- "-$pid" 2> /dev/null || true
      kill -KILL "$pid" 2> /dev/null || true
    done
    deadline=$((SECONDS + 5))
    while [[ -n "$(ip netns pids "$ns" 2> /dev/null)" && $SECONDS -lt $deadline ]]; do
      sleep 0.1
    done
    ip netns delete "$ns" 2> /dev/null || log "warning: cannot delete namespace $ns"
  fi
  ip link delete "$(ctl_veth "$prefix")" 2> /dev/null || true
  HVD_NETNS_STATE_ROOT="$STATE_ROOT" "$NETNS" down --prefix "$prefix" ||
    log "warning: netns-cluster.sh down --prefix $prefix failed"
  rm -rf "$state"
}

# --- up ---------------------------------------------------------------------------------------

UP_PREFIX=""
UP_DONE=0
UP_PID=""
on_up_exit() {
  local rc=$?
  # Only the script itself cleans up (not a subshell that caught the signal too), and a second
  # signal (a harness killing the whole process group again) does not cut the cleanup short.
  [[ "$BASHPID" == "$UP_PID" ]] || exit "$rc"
  trap '' INT TERM HUP
  if [[ $UP_DONE != 1 && -n "$UP_PREFIX" ]]; then
    log "up failed (exit $rc): removing what was created for $UP_PREFIX"
    cluster_down "$UP_PREFIX" || true
  fi
  exit "$rc"
}

write_conf() { # STATE PREFIX N SUBNET
  local state="$1" prefix="$2" n="$3" subnet="$4" i
  cat > "$state/slurm.conf" << EOF
# Written by scripts/slurm-cluster.sh for a throw-away test cluster; removed by its down.
ClusterName=$prefix
SlurmctldHost=$(ctl_host "$prefix")($subnet.254)
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge/munge.socket
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool/%n
SlurmctldPidFile=$state/run/slurmctld.pid.slurm
SlurmdPidFile=$state/run/slurmd-%n.pid.slurm
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldTimeout=300
SlurmdTimeout=300
MessageTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=60
EOF
  for ((i = 0; i < n; i++)); do
    echo "NodeName=$(node_name "$prefix" "$i") NodeAddr=$subnet.$((i + 2)) CPUs=$CPUS_PER_NODE State=UNKNOWN" \
      >> "$state/slurm.conf"
  done
  echo "PartitionName=main Nodes=$(hostlist "$prefix" "$n") Default=YES MaxTime=INFINITE State=UP OverSubscribe=$OVERSUBSCRIBE" \
    >> "$state/slurm.conf"
}

# The names of the cluster for its own processes (they resolve nothing else): every node and the
# controller at their addresses, this machine's hostname (SLURM_SUBMIT_HOST) at the bridge's.
# DNS goes to 127.0.0.1, where nothing listens, so an unknown name fails at once: the real
# nameserver is unreachable from the namespaces and a lookup would wait out its timeouts (20 s).
write_etc() { # STATE PREFIX N SUBNET
  local state="$1" prefix="$2" n="$3" subnet="$4" i
  mkdir -p "$state/etc"
  {
    echo "# Written by scripts/slurm-cluster.sh for the namespaces of cluster $prefix."
    echo "127.0.0.1 localhost"
    echo "::1 localhost ip6-localhost ip6-loopback"
    echo "$subnet.1 $(hostname)"
    echo "$subnet.254 $(ctl_host "$prefix")"
    for ((i = 0; i < n; i++)); do
      echo "$subnet.$((i + 2)) $(node_name "$prefix" "$i")"
    done
  } > "$state/etc/hosts"
  printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' > "$state/etc/resolv.conf"
  chmod 0644 "$state/etc/hosts" "$state/etc/resolv.conf"
  ETC_DIR="$state/etc"
}

start_munged() { # PREFIX STATE
  local prefix="$1" state="$2" m="$2/munge"
  # munged wants its socket's directory and every one above searchable by all (0711: not
  # listable); the key itself stays 0400.
  chmod 0711 "$state"
  mkdir -m 0711 "$m"
  mungekey --create --keyfile="$m/munge.key" > /dev/null 2>&1 ||
    (umask 077 && dd if=/dev/urandom of="$m/munge.key" bs=1024 count=1 status=none) ||
    die "cannot create a munge key in $m"
  chmod 0400 "$m/munge.key"
  # In the foreground munged logs to stderr (munged.out), not to --log-file.
  start_in_ns "$(ctl_ns "$prefix")" "$(ctl_host "$prefix")" "$m/munged.out" "$state/run/munged.pid" \
    munged --foreground --socket="$m/munge.socket" --key-file="$m/munge.key" \
    --pid-file="$m/munged.pid" --log-file="$m/munged.log" --seed-file="$m/munged.seed"
  wait_daemon "$state" "$state/run/munged.pid" 10 "munged (socket $m/munge.socket)" \
    munge_answers "$m/munge.socket"
}

munge_answers() { # SOCKET
  [[ -S "$1" ]] && munge -n -S "$1" 2> /dev/null | unmunge -S "$1" > /dev/null 2>&1
}

ctld_listens() { # NAMESPACE ADDR
  ip netns exec "$1" ss -Hltn "sport = :6817" 2> /dev/null |
    awk '{ print $4 }' | grep -E "^(0\.0\.0\.0|\*|\[::\]|$2):6817$" > /dev/null
}

# Waits until CHECK ARGS... succeeds, for at most TIMEOUT_S seconds while the daemon whose pid
# is in PIDFILE runs; else prints the logs and dies naming WHAT.
wait_daemon() { # STATE PIDFILE TIMEOUT_S WHAT CHECK ARGS...
  local state="$1" pidfile="$2" timeout="$3" what="$4" deadline
  shift 4
  deadline=$((SECONDS + timeout))
  until "$@"; do
    running "$(cat "$pidfile")" || {
      tail_logs "$state"
      die "$what exited at start (logs above, in $state/log)"
    }
    [[ $SECONDS -lt $deadline ]] || {
      tail_logs "$state"
      die "$what is not ready after ${timeout}s"
    }
    sleep 0.05
  done
}

wait_ctld() { # PREFIX STATE ADDR
  wait_daemon "$2" "$2/run/slurmctld.pid" "$CTLD_TIMEOUT_S" "slurmctld (listening on $3:6817)" \
    ctld_listens "$(ctl_ns "$1")" "$3"
}

wait_idle() { # PREFIX STATE N
  local prefix="$1" state="$2" n="$3" deadline states i pid
  deadline=$((SECONDS + IDLE_TIMEOUT_S))
  while :; do
    states="$(SLURM_CONF="$state/slurm.conf" sinfo -h -N -o '%N %t' 2> /dev/null | sort -u || true)"
    [[ $(grep -c ' idle$' <<< "$states" || true) -eq $n ]] && return 0
    for pid in "$state"/run/slurmctld.pid "$state"/run/slurmd-*.pid; do
      running "$(cat "$pid")" || {
        tail_logs "$state"
        die "$(basename "$pid" .pid) exited (logs above, in $state/log)"
      }
    done
    [[ $SECONDS -lt $deadline ]] || {
      log "sinfo after ${IDLE_TIMEOUT_S}s:"
      echo "$states" >&2
      tail_logs "$state"
      die "not every node is idle after ${IDLE_TIMEOUT_S}s"
    }
    sleep 0.1
  done
}

cmd_up() {
  local n="" prefix=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --prefix) prefix="${2:?--prefix needs a value}"; shift ;;
      --state-root) STATE_ROOT="${2:?--state-root needs a directory}"; shift ;;
      --cpus) CPUS_PER_NODE="${2:?--cpus needs a number}"; shift ;;
      --exclusive) OVERSUBSCRIBE=EXCLUSIVE ;;
      -h | --help) usage; exit 0 ;;
      -*) usage_error "unknown option $1" ;;
      *) [[ -z "$n" ]] || usage_error "unexpected argument $1"; n="$1" ;;
    esac
    shift
  done
  [[ "$n" =~ ^[1-9][0-9]?$ && $n -le 50 ]] || usage_error "up expects N in 1..50, got '${n}'"
  [[ "$CPUS_PER_NODE" =~ ^[1-9][0-9]{0,2}$ ]] || usage_error "bad --cpus '$CPUS_PER_NODE'"
  [[ -n "$prefix" ]] || prefix="hvd$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n' | cut -c1-5)"
  check_prefix "$prefix"
  require_tools
  mkdir -p "$STATE_ROOT"
  STATE_ROOT="$(cd "$STATE_ROOT" && pwd)"
  local state
  state="$(state_dir "$prefix")"
  # A unix socket path is at most 107 bytes.
  [[ ${#state} -le 80 ]] || die "--state-root: $state is too long for munge's socket path"
  # Checked before the cleanup trap is set: a failed `up` must not remove someone else's cluster.
  if [[ -e "$state" ]] || ip netns list 2> /dev/null | awk '{ print $1 }' |
    grep -E "^$prefix-(h[0-9]+|ctl)$" > /dev/null || ip link show "$prefix-br" > /dev/null 2>&1; then
    die "a cluster named $prefix exists already (slurm-cluster.sh down --prefix $prefix)"
  fi

  local t0=$SECONDS
  UP_PREFIX="$prefix"
  UP_PID="$BASHPID"
  trap on_up_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP

  local net
  net="$(HVD_NETNS_STATE_ROOT="$STATE_ROOT" "$NETNS" up "$n" --no-agents --prefix "$prefix")" ||
    die "netns-cluster.sh up $n --no-agents --prefix $prefix failed"
  local subnet
  subnet="$(sed -n 's/^SUBNET=//p' <<< "$net")"
  [[ -n "$subnet" ]] || die "netns-cluster.sh printed no SUBNET"

  # The controller's namespace, on the same bridge.
  local ns veth addr="$subnet.254"
  ns="$(ctl_ns "$prefix")"
  veth="$(ctl_veth "$prefix")"
  add_namespace_on_bridge "$ns" "$veth" "$prefix-br" "$addr" "$subnet"

  mkdir -p "$state/run" "$state/log" "$state/ctld" "$state/spool"
  SLURM_CONF_FILE="$state/slurm.conf"
  write_etc "$state" "$prefix" "$n" "$subnet"
  start_munged "$prefix" "$state"

  write_conf "$state" "$prefix" "$n" "$subnet"
  # Slurm reads cgroup.conf next to slurm.conf; the defaults do (no cgroup is made: task/none,
  # proctrack/linuxproc), but say so rather than leave it to a missing file.
  echo "CgroupPlugin=autodetect" > "$state/cgroup.conf"

  start_in_ns "$ns" "$(ctl_host "$prefix")" "$state/log/slurmctld.out" "$state/run/slurmctld.pid" \
    slurmctld -D -c -i
  wait_ctld "$prefix" "$state" "$addr"

  local i
  for ((i = 0; i < n; i++)); do
    local node conf
    node="$(node_name "$prefix" "$i")"
    mkdir -p "$state/spool/$node"
    # The nodes share this machine's /tmp, where Slurm's PMIx plugin makes fixed names per step
    # (spmix_appdir_<uid>_<step>): each node's slurmd reads its configuration from a directory
    # of its own, the same slurm.conf and cgroup.conf plus an mpi.conf that puts PMIx's client
    # directories in STATE/tmp/NODE.
    conf="$state/node/$node"
    mkdir -p "$conf" "$state/tmp/$node"
    chmod 1777 "$state/tmp/$node"
    ln -sf ../../slurm.conf "$conf/slurm.conf"
    ln -sf ../../cgroup.conf "$conf/cgroup.conf"
    echo "PMIxCliTmpDirBase=$state/tmp/$node" > "$conf/mpi.conf"
    start_in_ns "$prefix-h$i" "$node" "$state/log/slurmd-$node.out" "$state/run/slurmd-$node.pid" \
      slurmd -D -N "$node" -f "$conf/slurm.conf"
  done
  wait_idle "$prefix" "$state" "$n"

  {
    echo "SLURM_CONF=$state/slurm.conf"
    echo "NODES=$(hostlist "$prefix" "$n")"
    echo "N=$n"
    echo "PREFIX=$prefix"
    echo "STATE=$state"
    echo "SUBNET=$subnet"
    echo "CTL_NS=$ns"
    echo "CTL_ADDR=$addr"
    echo "CTL_HOST=$(ctl_host "$prefix")"
    echo "MUNGE_SOCKET=$state/munge/munge.socket"
    for ((i = 0; i < n; i++)); do
      echo "NODE_$i=$(node_name "$prefix" "$i")"
      echo "NS_$i=$prefix-h$i"
      echo "ADDR_$i=$subnet.$((i + 2))"
    done
  } > "$state/env"
  UP_DONE=1
  log "cluster $prefix up in $((SECONDS - t0))s: nodes $(hostlist "$prefix" "$n"), controller $addr"
  cat "$state/env"
}

cmd_down() {
  local prefix="${HVD_NETNS_PREFIX:-}"
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --prefix) prefix="${2:?--prefix needs a value}"; shift ;;
      --state-root) STATE_ROOT="${2:?--state-root needs a directory}"; shift ;;
      -h | --help) usage; exit 0 ;;
      *) usage_error "down: unexpected argument $1" ;;
    esac
    shift
  done
  [[ -n "$prefix" ]] || usage_error "down needs --prefix P"
  check_prefix "$prefix"
  [[ $EUID -eq 0 ]] || die "needs root (network namespaces)"
  cluster_down "$prefix"
}

main() {
  [[ $# -gt 0 ]] || usage_error "missing command"
  local cmd="$1"
  shift
  case "$cmd" in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    -h | --help | help) usage ;;
    *) usage_error "unknown command $cmd" ;;
  esac
}

main "$@"
