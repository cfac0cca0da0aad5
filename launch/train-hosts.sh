#!/usr/bin/env bash
# Multi-node training with a hostfile: one rank per slot (per GPU on GPU nodes, per core on CPU
# nodes), the environment Tandem needs forwarded to every rank. Resume is automatic: rerunning the
# same command continues from the newest checkpoint in checkpoint.dir. Only rank 0 (the first
# host's first slot) writes and reads checkpoints, so checkpoint.dir must be on that node (or on a
# shared filesystem); the corpus must be readable on every node.
#
#   launch/train-hosts.sh HOSTFILE configs/base.yaml [--set key=value ...]
#
# HOSTFILE, Open MPI's format, one line per node:   node01 slots=8
# Environment: TANDEM_IFACE (network interface for MPI and NCCL traffic, e.g. eth0 or ib0),
# TANDEM_BIN (tandem-train, default build/trainer/tools/tandem-train), NCCL_DEBUG=INFO to debug.
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

args=(--hostfile "$hostfile" -np "$ranks" --map-by slot --bind-to none)
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
exec mpirun "${args[@]}" "$bin" --config "$config" "$@"
