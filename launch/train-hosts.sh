#!/usr/bin/env bash
# Multi-node training with a hostfile: one rank per slot (per GPU on GPU nodes, per core on CPU
# nodes), the environment Tandem needs forwarded to every rank. Resume is automatic: rerunning the
# same command continues from the newest checkpoint in checkpoint.dir. Only rank 0 (the first
# host's first slot) writes and reads checkpoints, so checkpoint.dir must be on that node (or on a
# shared filesystem); the corpus must be readable on every node.
# SIGTERM, SIGINT (Ctrl-C) or SIGHUP to this script: every rank finishes its step and saves, and
# the script returns once the checkpoint is written, with 128 + the signal; a second signal stops
# the ranks at once (saved checkpoints stay intact).
#
#   launch/train-hosts.sh HOSTFILE configs/base.yaml [--set key=value ...]
#
# HOSTFILE, Open MPI's format, one line per node:   node01 slots=8
# Environment: TANDEM_IFACE (network interface for MPI and NCCL traffic, e.g. eth0 or ib0),
# TANDEM_BIN (tandem-train, default build/trainer/tools/tandem-train), TANDEM_STOP_GRACE (seconds
# between mpirun's SIGTERM and SIGKILL when mpirun itself is signalled, default 10), NCCL_DEBUG=INFO.
set -euo pipefail
hostfile=${1:?usage: train-hosts.sh HOSTFILE CONFIG [tandem-train args...]}
config=${2:?usage: train-hosts.sh HOSTFILE CONFIG [tandem-train args...]}
shift 2
[ -r "$hostfile" ] || { echo "train-hosts.sh: cannot read hostfile '$hostfile'" >&2; exit 2; }
[ -r "$config" ] || { echo "train-hosts.sh: cannot read config '$config'" >&2; exit 2; }
bin=${TANDEM_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/trainer/tools/tandem-train}

# Ranks = the sum of the slots (a host without slots= counts one).
ranks=$(awk '!/^[[:space:]]*(#|$)/ { n = 1; for (i = 2; i <= NF; i++) if ($i ~ /^slots=/) { split($i, s, "="); n = s[2] } total += n } END { print total + 0 }' "$hostfile")
[ "$ranks" -gt 0 ] || { echo "train-hosts.sh: no hosts in '$hostfile'" >&2; exit 2; }

args=(--hostfile "$hostfile" -np "$ranks" --map-by slot --bind-to none
      --mca odls_base_sigkill_timeout "${TANDEM_STOP_GRACE:-10}")
# Forward what is set: library paths (relocated installs), threads, NCCL and Open MPI settings.
for var in PATH LD_LIBRARY_PATH OPAL_PREFIX OMP_NUM_THREADS OPENBLAS_NUM_THREADS \
           NCCL_DEBUG NCCL_SOCKET_IFNAME NCCL_IB_DISABLE NCCL_P2P_DISABLE CUDA_VISIBLE_DEVICES; do
  [ -n "${!var:-}" ] && args+=(-x "$var")
done
if [ -n "${TANDEM_IFACE:-}" ]; then
  args+=(--mca btl_tcp_if_include "$TANDEM_IFACE" --mca oob_tcp_if_include "$TANDEM_IFACE"
         -x "NCCL_SOCKET_IFNAME=$TANDEM_IFACE")
fi
echo "train-hosts.sh: $ranks rank(s) from $hostfile" >&2

# mpirun runs in a session of its own (so a terminal's Ctrl-C reaches only this script) and gets
# stop signals as SIGUSR2, which it forwards to every rank at once: they save, then exit 0.
setsid mpirun "${args[@]}" "$bin" --config "$config" "$@" </dev/null &
job=$!
stops=0 first=0
stop() {  # stop <signal number> <name>
  stops=$((stops + 1))
  if [ "$stops" -eq 1 ]; then
    first=$1
    echo "train-hosts.sh: $2: every rank finishes its step and saves; a second signal stops at once" >&2
    kill -USR2 "$job" 2>/dev/null
  elif [ "$stops" -eq 2 ]; then
    echo "train-hosts.sh: $2 again: stopping at once (saved checkpoints stay intact)" >&2
    kill -USR2 "$job" 2>/dev/null
  else
    kill -KILL -- "-$job" 2>/dev/null
  fi
}
trap 'stop 15 SIGTERM' TERM
trap 'stop 2 SIGINT' INT
trap 'stop 1 SIGHUP' HUP
status=0
wait "$job" || status=$?
while kill -0 "$job" 2>/dev/null; do status=0; wait "$job" || status=$?; done
[ "$first" -ne 0 ] && exit $((128 + first))
exit "$status"
