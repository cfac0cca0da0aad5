#!/usr/bin/env bash
# A real SLURM cluster on this machine, for the SLURM tests (tests/e2e/slurm_test.cpp) and for
# trying launch/slurm/tandem.sbatch before a real cluster: Debian's munge and SLURM (slurm-wlm)
# daemons, as root, with their own key, socket, ports, state and logs under DIR, so nothing of the
# machine's own configuration is read or changed.
#
#   launch/slurm/local-cluster.sh --check          exit 0 if it can run here; 77 and why if not
#                                                  (no root, no SLURM or munge, this machine's
#                                                  name does not resolve, or no cgroup filesystem)
#   launch/slurm/local-cluster.sh start DIR        one node: writes DIR/slurm.conf, starts munged,
#                                                  slurmctld and slurmd, waits until the node is
#                                                  idle
#   launch/slurm/local-cluster.sh start2 DIR       two nodes, nodeA and nodeB, each a network
#                                                  namespace with its own hostname (launch/netns-
#                                                  hosts.sh) and one CPU, joined by a veth link;
#                                                  slurmctld runs on nodeA
#   launch/slurm/local-cluster.sh run DIR CMD...   runs a SLURM command (sbatch, scontrol, ...) on
#                                                  the cluster: where the controller is reached,
#                                                  with SLURM_CONF set
#   launch/slurm/local-cluster.sh fail DIR NODE    two nodes: NODE's link goes down, as a node that
#                                                  died (nothing it runs answers any more)
#   launch/slurm/local-cluster.sh stop DIR         stops the daemons and ends every process the
#                                                  cluster started (jobs included); two nodes:
#                                                  removes the namespaces too
#
# A cluster that cannot start fails within about 30 s, with the reason: this machine's name that
# does not resolve (SLURM's daemons and commands look it up, and retry each lookup for 10 s), or
# the daemon's own last lines. With TANDEM_SLURM_OWNER=PID, start and start2 leave a watcher that
# stops the cluster when process PID ends, however it ends (a test killed by CTest's timeout
# included): the daemons detach from their caller, and would outlive it.
#
# One node is this machine's hostname with its usable cores as CPUs, in one partition, "debug".
# KillWait is 30 s (SLURM's default): a scancel or a time limit sends SIGTERM to every process of
# the job, and SIGKILL 30 s later. Two nodes: SlurmdTimeout is 10 s, so the controller sets a node
# that stops answering DOWN within about 10 s (sites use minutes). TANDEM_SLURM_SUBNET (first
# three octets, default 10.212.0) places the two nodes' link.
set -euo pipefail
launch=$(cd "$(dirname "$0")/.." && pwd)
. "$launch/netns-hosts.sh"

skip() { echo "local-cluster: cannot run SLURM here: $*" >&2; exit 77; }

check() {
  [ "$(id -u)" -eq 0 ] || skip "its daemons run as root here, running as uid $(id -u)"
  for tool in munged slurmctld slurmd sbatch scontrol sinfo python3 getent setsid; do
    command -v "$tool" >/dev/null ||
      skip "'$tool' not found (Debian: apt-get install slurm-wlm munge python3)"
  done
}

# Two free TCP ports, for slurmctld and slurmd.
free_ports() {
  python3 - <<'PY'
import socket
sockets = [socket.socket() for _ in range(2)]
for s in sockets:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in sockets))
PY
}

# DIR made absolute, its state folders, munge's key, and munged started (its socket in DIR serves
# every namespace: a socket file is reached through the file system, not the network).
prepare() {
  dir=$(mkdir -p "$1" && cd "$1" && pwd)
  mkdir -p "$dir/state"
  head -c 1024 /dev/urandom >"$dir/munge.key"
  chmod 600 "$dir/munge.key"
  export SLURM_CONF=$dir/slurm.conf  # before any daemon: it marks the cluster's processes (stop)
  munged --force --key-file="$dir/munge.key" --socket="$dir/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge.seed"
}

# slurm.conf for controller CTLD_HOST on CTLD_PORT, slurmd on SLURMD_PORT, and the NodeName lines
# given (one argument each); each slurmd's pid file, log and spool are its node's (%n).
write_conf() {
  local ctld_host=$1 ctld_port=$2 slurmd_port=$3 nodes
  shift 3
  nodes=$(printf '%s\n' "$@")
  cat >"$SLURM_CONF" <<CONF
ClusterName=tandem
SlurmctldHost=$ctld_host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket,cred_expire=10
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=30
SlurmdTimeout=${slurmd_timeout:-300}
JobRequeue=1
$nodes
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}

# The daemons' last error lines (their own words for why the cluster did not come up).
daemon_errors() {
  local log
  for log in "$dir/slurmctld.log" "$dir"/slurmd-*.log; do
    [ -f "$log" ] || continue
    echo "  $(basename "$log"):"
    grep -E "error|fatal" "$log" | tail -n 3 | sed 's/^/    /'
  done
}

# Stops the cluster and fails with the words given and the daemons' last errors.
fail_start() {
  echo "local-cluster: $*" >&2
  daemon_errors >&2
  stop "$dir"
  exit 1
}

# Waits until every node NAME (the arguments) is idle, running sinfo through `$client`; stops the
# cluster and fails after 20 s in all (each sinfo bounded too: it retries an address it cannot
# resolve), with the daemons' last errors.
wait_idle() {
  local deadline=$((SECONDS + 20)) node
  for node in "$@"; do
    until [ "$(timeout 5 $client sinfo -h -n "$node" -o %t 2>/dev/null)" = idle ]; do
      [ "$SECONDS" -lt "$deadline" ] || fail_start "node $node did not become idle in 20 s"
      sleep 0.2
    done
  done
}

# Fails at once when `name`, a node's or the controller's, does not resolve here: SLURM's daemons
# would retry each lookup for 10 s, and every command would wait on it.
require_resolvable() {
  local name=$1
  getent hosts "$name" >/dev/null ||
    fail_start "this machine's name '$name' does not resolve (getent hosts $name: nothing), and" \
      "SLURM's daemons and commands look it up: add '127.0.1.1 $name' to /etc/hosts"
}

# With TANDEM_SLURM_OWNER=PID: a watcher, detached from the caller's session and output, that stops
# the cluster when PID ends.
watch_owner() {
  local owner=${TANDEM_SLURM_OWNER:-}
  [ -n "$owner" ] || return 0
  kill -0 "$owner" 2>/dev/null || fail_start "TANDEM_SLURM_OWNER=$owner: no such process"
  # Not marked as the cluster's (no SLURM_CONF): the stop it runs must not end it halfway.
  env -u SLURM_CONF setsid "$0" watch "$dir" "$owner" </dev/null >>"$dir/watcher.log" 2>&1 &
  echo "$!" >"$dir/watcher.pid"  # a session (and process group) of its own: setsid ran in place
}

start() {
  prepare "$1"
  local host cpus ctld_port slurmd_port
  host=$(hostname -s)
  require_resolvable "$host"
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc reports those when set
  read -r ctld_port slurmd_port < <(free_ports)
  write_conf "$host" "$ctld_port" "$slurmd_port" "NodeName=$host CPUs=$cpus State=UNKNOWN"
  mkdir -p "$dir/spool/$host"
  watch_owner
  slurmctld -f "$SLURM_CONF" || fail_start "slurmctld did not start"
  slurmd -f "$SLURM_CONF" || fail_start "slurmd did not start"
  # The node registers with the controller within a second or two.
  client=env
  wait_idle "$host"
  echo "local-cluster: node $host ($cpus CPUs) idle; SLURM_CONF=$SLURM_CONF"
}

# nodeA and nodeB in namespaces of their own (their names in DIR/netns), each daemon started in
# its node's namespace under its node's hostname; the ports are the same on both nodes, which
# have an address each.
start2() {
  local subnet=${TANDEM_SLURM_SUBNET:-10.212.0} ns_a="tsl$$a" ns_b="tsl$$b"
  netns_pair_up "$ns_a" "$ns_b" "$subnet"
  prepare "$1"
  echo "$ns_a $ns_b" >"$dir/netns"
  slurmd_timeout=10 write_conf "nodeA($subnet.1)" 6817 6818 \
    "NodeName=nodeA NodeAddr=$subnet.1 CPUs=1 State=UNKNOWN" \
    "NodeName=nodeB NodeAddr=$subnet.2 CPUs=1 State=UNKNOWN"
  mkdir -p "$dir/spool/nodeA" "$dir/spool/nodeB"
  watch_owner
  netns_exec "$ns_a" nodeA slurmctld -f "$SLURM_CONF" || fail_start "slurmctld did not start"
  netns_exec "$ns_a" nodeA slurmd -f "$SLURM_CONF" || fail_start "nodeA's slurmd did not start"
  netns_exec "$ns_b" nodeB slurmd -f "$SLURM_CONF" || fail_start "nodeB's slurmd did not start"
  client="ip netns exec $ns_a"
  wait_idle nodeA nodeB
  echo "local-cluster: nodes nodeA ($subnet.1, namespace $ns_a) and nodeB ($subnet.2, namespace" \
    "$ns_b) idle, one CPU each; SLURM_CONF=$SLURM_CONF"
}

# The namespace of NODE (nodeA or nodeB) of the two-node cluster in DIR.
namespace_of() {
  local ns_a ns_b
  [ -f "$1/netns" ] || { echo "local-cluster: $1 holds no cluster of two nodes" >&2; exit 2; }
  read -r ns_a ns_b <"$1/netns"
  case "$2" in
    nodeA) echo "$ns_a" ;;
    nodeB) echo "$ns_b" ;;
    *) echo "local-cluster: no node '$2' (nodeA, nodeB)" >&2; exit 2 ;;
  esac
}

run() {
  local dir
  dir=$(cd "$1" && pwd)
  shift
  if [ -f "$dir/netns" ]; then
    SLURM_CONF=$dir/slurm.conf exec ip netns exec "$(namespace_of "$dir" nodeA)" "$@"
  fi
  SLURM_CONF=$dir/slurm.conf exec "$@"
}

fail() {
  local ns
  ns=$(namespace_of "$1" "$2")
  ip -n "$ns" link set "$ns" down
}

# The processes that carry this cluster's SLURM_CONF in their environment, this one excepted: its
# daemons (prepare exports it) and what they started (slurmstepd, the jobs' scripts and ranks).
cluster_processes() {
  local conf="SLURM_CONF=$1/slurm.conf" environ pid
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}
    pid=${pid%/environ}
    [ "$pid" != "$BASHPID" ] && [ "$pid" != "$$" ] || continue
    { tr '\0' '\n' <"$environ"; } 2>/dev/null | grep -qxF "$conf" && echo "$pid"
  done
}

stop() {
  local dir=$1 daemon pid_file pid
  for pid_file in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munged.pid"; do
    [ -f "$pid_file" ] || continue
    pid=$(cat "$pid_file")
    kill "$pid" 2>/dev/null || continue
    # Gone within 10 s, or killed.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  done
  # Job steps and their processes outlive slurmd.
  for pid in $(cluster_processes "$dir"); do kill -9 "$pid" 2>/dev/null; done
  # The owner's watcher, unless this is it stopping the cluster.
  if [ -f "$dir/watcher.pid" ] && [ "$(cat "$dir/watcher.pid")" != "$$" ]; then
    kill -- "-$(cat "$dir/watcher.pid")" 2>/dev/null
  fi
  if [ -f "$dir/netns" ]; then
    # shellcheck disable=SC2046  # two names
    netns_pair_down $(cat "$dir/netns")
    rm -f "$dir/netns"
  fi
}

# The watcher watch_owner leaves: blocks until process OWNER ends, then stops the cluster in DIR.
watch() {
  tail --pid="$2" -f /dev/null
  stop "$1"
}

case "${1:-}" in
  --check)
    check
    # start's own check fails instead (exit 1), naming the fix, for whoever starts it by hand.
    getent hosts "$(hostname -s)" >/dev/null ||
      skip "this machine's name '$(hostname -s)' does not resolve (getent hosts: nothing), and" \
        "SLURM's daemons and commands look it up: add '127.0.1.1 $(hostname -s)' to /etc/hosts"
    # slurmd (22.05) starts its cgroup plugin whatever the proctrack and task plugins are.
    [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" != sysfs ] &&
      [ -d /sys/fs/cgroup ] ||
      skip "no cgroup filesystem at /sys/fs/cgroup (as in a chroot that binds /sys without its" \
        "mounts), and slurmd will not start without one" ;;
  watch) [ $# -eq 3 ] || { echo "usage: $0 watch DIR OWNER_PID" >&2; exit 2; }; watch "$2" "$3" ;;
  start) check; [ $# -eq 2 ] || { echo "usage: $0 start DIR" >&2; exit 2; }; start "$2" ;;
  start2)
    check
    why=$(netns_unusable) || skip "two nodes need network namespaces: $why"
    [ $# -eq 2 ] || { echo "usage: $0 start2 DIR" >&2; exit 2; }
    start2 "$2" ;;
  run) [ $# -ge 3 ] || { echo "usage: $0 run DIR COMMAND..." >&2; exit 2; }; shift; run "$@" ;;
  fail) [ $# -eq 3 ] || { echo "usage: $0 fail DIR NODE" >&2; exit 2; }; fail "$2" "$3" ;;
  stop) [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$2" ;;
  *) echo "usage: $0 --check | start DIR | start2 DIR | run DIR CMD... | fail DIR NODE |" \
       "stop DIR" >&2
     exit 2 ;;
esac
