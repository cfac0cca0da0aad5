#!/usr/bin/env bash
# Multi-node training with a hostfile: one rank per slot (per GPU on GPU nodes, per core on CPU
# nodes), started by tandem-train's launcher (tandem-train --hostfile), which forwards the
# environment Tandem needs to every rank and stays the job's parent. Resume is automatic: rerunning
# the same command continues from the newest checkpoint in checkpoint.dir. Only rank 0 (the first
# host's first slot) writes and reads checkpoints, so checkpoint.dir must be on that node (or on a
# shared filesystem), and this script runs there; the corpus must be readable on every node.
# SIGTERM, SIGINT (Ctrl-C) or SIGHUP to this script: every rank finishes its step and saves, and
# the script returns once the checkpoint is written, with 128 + the signal; a second signal from
# the same sender stops the ranks at once (saved checkpoints stay intact).
# With --max-restarts K, a job that loses a rank or a node is relaunched from its newest checkpoint
# on the hosts that still answer (down to --min-ranks ranks, accumulation raised to keep the global
# batch), up to K times; the same failure twice in a row ends it (docs/multi-node.md).
#
#   launch/train-hosts.sh HOSTFILE configs/base.yaml [--max-restarts K] [--set key=value ...]
#
# HOSTFILE, Open MPI's format, one line per node:   node01 slots=8
# Environment: TANDEM_IFACE (network interface for MPI and NCCL traffic, e.g. eth0 or ib0),
# TANDEM_BIN (tandem-train, default build/trainer/tools/tandem-train), TANDEM_STOP_GRACE (seconds
# between mpirun's SIGTERM and SIGKILL when mpirun itself is signalled, default 10), NCCL_DEBUG=INFO.
# PATH, LD_LIBRARY_PATH, OPAL_PREFIX, NCCL_* and CUDA_VISIBLE_DEVICES are passed on when set.
set -euo pipefail
hostfile=${1:?usage: train-hosts.sh HOSTFILE CONFIG [tandem-train args...]}
config=${2:?usage: train-hosts.sh HOSTFILE CONFIG [tandem-train args...]}
shift 2
[ -r "$hostfile" ] || { echo "train-hosts.sh: cannot read hostfile '$hostfile'" >&2; exit 2; }
[ -r "$config" ] || { echo "train-hosts.sh: cannot read config '$config'" >&2; exit 2; }
bin=${TANDEM_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/trainer/tools/tandem-train}
exec "$bin" --hostfile "$hostfile" --config "$config" "$@"
