#!/usr/bin/env bash
# A real SLURM cluster of one node on this machine, for the SLURM tests (tests/e2e/slurm_test.cpp)
# and for trying launch/slurm/tandem.sbatch before a real cluster: Debian's munge and SLURM
# (slurm-wlm) daemons, as root, with their own key, socket, ports, state and logs under DIR, so
# nothing of the machine's own configuration is read or changed.
#
#   launch/slurm/local-cluster.sh --check        exit 0 if it can run here; 77 and why if not
#   launch/slurm/local-cluster.sh start DIR      writes DIR/slurm.conf, starts munged, slurmctld
#                                                and slurmd, waits until the node is idle
#   launch/slurm/local-cluster.sh stop DIR       stops them (their pid files are in DIR)
#
# Then point SLURM's commands at it: SLURM_CONF=DIR/slurm.conf sbatch ...; the node is this
# machine's hostname with its usable cores as CPUs, in one partition, "debug". KillWait is 30 s
# (SLURM's default): a scancel or a time limit sends SIGTERM to every process of the job, and
# SIGKILL 30 s later.
set -euo pipefail

skip() { echo "local-cluster: cannot run SLURM here: $*" >&2; exit 77; }

check() {
  [ "$(id -u)" -eq 0 ] || skip "its daemons run as root here, running as uid $(id -u)"
  for tool in munged slurmctld slurmd sbatch scontrol sinfo python3; do
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

start() {
  local dir
  dir=$(mkdir -p "$1" && cd "$1" && pwd)
  local host cpus ctld_port slurmd_port
  host=$(hostname -s)
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc reports those when set
  read -r ctld_port slurmd_port < <(free_ports)
  mkdir -p "$dir/state" "$dir/spool"
  head -c 1024 /dev/urandom >"$dir/munge.key"
  chmod 600 "$dir/munge.key"
  cat >"$dir/slurm.conf" <<CONF
ClusterName=tandem
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket,cred_expire=10
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=30
JobRequeue=1
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  munged --force --key-file="$dir/munge.key" --socket="$dir/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge.seed"
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF" || { cat "$dir/slurmctld.log" >&2; exit 1; }
  slurmd -f "$SLURM_CONF" || { cat "$dir/slurmd.log" >&2; exit 1; }
  # The node registers with the controller within a second or two.
  local tries=0
  until [ "$(sinfo -h -n "$host" -o %t 2>/dev/null)" = idle ]; do
    tries=$((tries + 1))
    if [ "$tries" -gt 100 ]; then
      echo "local-cluster: node $host did not become idle in 20 s; slurmd's log:" >&2
      tail -n 20 "$dir/slurmd.log" >&2
      stop "$dir"
      exit 1
    fi
    sleep 0.2
  done
  echo "local-cluster: node $host ($cpus CPUs) idle; SLURM_CONF=$SLURM_CONF"
}

stop() {
  local dir=$1 daemon pid
  for daemon in slurmd slurmctld munged; do
    [ -f "$dir/$daemon.pid" ] || continue
    pid=$(cat "$dir/$daemon.pid")
    kill "$pid" 2>/dev/null || continue
    # Gone within 10 s, or killed.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  done
}

case "${1:-}" in
  --check) check ;;
  start) check; [ $# -eq 2 ] || { echo "usage: $0 start DIR" >&2; exit 2; }; start "$2" ;;
  stop) [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$2" ;;
  *) echo "usage: $0 --check | start DIR | stop DIR" >&2; exit 2 ;;
esac
