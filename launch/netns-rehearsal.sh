#!/usr/bin/env bash
# Multi-node rehearsal on one machine: two network namespaces joined by a veth pair play two hosts,
# nodeA (10.211.0.1) and nodeB (10.211.0.2), each with its own hostname (a UTS namespace). mpirun
# starts on nodeA and launches nodeB's daemon over TCP as it would with ssh, through an agent that
# enters nodeB's namespaces instead; MPI traffic (btl tcp) and Open MPI's control channel (oob) are
# confined to the veth link, so nothing can take a shortcut through shared memory or loopback.
# Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), iproute2 (ip) and util-linux (unshare).
#
#   launch/netns-rehearsal.sh [--ranks-per-node N] [MPIRUN ARGS...] -- PROGRAM [ARGS...]
#   launch/netns-rehearsal.sh --launcher [--ranks-per-node N] -- PROGRAM [ARGS...]
#   launch/netns-rehearsal.sh --check     # exit 0 if this machine allows it; 77 and why if not
#
# Every rank prints "netns-rehearsal: rank R of N on host H" on stderr, then runs PROGRAM. With
# --launcher, PROGRAM is itself the launcher (e.g. tandem-train --hostfile {hostfile}): it runs on
# nodeA with Open MPI's settings for the rehearsal in its environment, and {hostfile} in ARGS
# becomes the path of a hostfile naming both nodes.
# Example (2 ranks, one per "node"):
#   launch/netns-rehearsal.sh -x OMP_NUM_THREADS=1 -- build/trainer/tools/tandem-train \
#       --config configs/tiny.yaml --set train.max_steps=20 --set checkpoint.dir=runs/rehearsal
# Environment: TANDEM_NETNS_SUBNET (first three octets, default 10.211.0), MPIRUN (default mpirun).
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
. "$(dirname "$self")/netns-hosts.sh"

skip() { echo "netns-rehearsal: cannot rehearse here: $*" >&2; exit 77; }

# Exit 77 (the conventional "skipped" status) naming the first missing permission or tool.
check() {
  local why
  why=$(netns_unusable) || skip "$why"
  command -v "${MPIRUN:-mpirun}" >/dev/null ||
    skip "'${MPIRUN:-mpirun}' not found (Debian: openmpi-bin)"
}

# Open MPI calls this as it would call ssh: [options] HOST COMMAND...; COMMAND runs in HOST's
# namespaces, under HOST's hostname, through a shell (ssh's remote command is a shell line too).
agent() {
  while [ "${1:-}" != "${1#-}" ]; do shift; done
  local host=$1 ns
  shift
  ns=$(tr ' ' '\n' <<<"$TANDEM_NETNS_MAP" | sed -n "s/^$host=//p")
  [ -n "$ns" ] || { echo "netns-rehearsal: unknown host '$host' (known: $TANDEM_NETNS_MAP)" >&2; exit 255; }
  netns_exec --replace "$ns" "$host" sh -c "$*"
}

# What each rank runs: say where it is, then become the program.
rank() {
  echo "netns-rehearsal: rank ${OMPI_COMM_WORLD_RANK:-?} of ${OMPI_COMM_WORLD_SIZE:-?} on host $(hostname)" >&2
  exec "$@"
}

cleanup() {
  set +e
  netns_pair_down "$ns_a" "$ns_b"
  rm -rf "$work"
}

# Two namespaces joined by a veth pair (netns_pair_up), and a hostfile naming both.
setup() {
  local subnet=${TANDEM_NETNS_SUBNET:-10.211.0}
  netns_pair_up "$ns_a" "$ns_b" "$subnet"
  printf 'nodeA slots=%s\nnodeB slots=%s\n' "$per_node" "$per_node" >"$work/hostfile"
  cidr="$subnet.0/24"
  echo "netns-rehearsal: nodeA = namespace $ns_a ($subnet.1), nodeB = namespace $ns_b ($subnet.2)" >&2
}

main() {
  per_node=1
  local mpirun_args=() launcher=0
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
      --ranks-per-node) per_node=${2:?--ranks-per-node needs a number}; shift 2 ;;
      --launcher) launcher=1; shift ;;
      *) mpirun_args+=("$1"); shift ;;
    esac
  done
  [ "${1:-}" = "--" ] && [ $# -ge 2 ] ||
    { echo "usage: netns-rehearsal.sh [--ranks-per-node N] [MPIRUN ARGS...] -- PROGRAM [ARGS...]" >&2; exit 2; }
  shift
  check
  ns_a="tdm$$a" ns_b="tdm$$b"
  work=$(mktemp -d /tmp/tandem-netns-XXXXXX)
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  setup
  export TANDEM_NETNS_MAP="nodeA=$ns_a nodeB=$ns_b"
  # The rehearsal needs root anyway; let mpirun accept it.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  local status=0
  if [ "$launcher" -eq 1 ]; then
    # The same settings as below, as Open MPI reads them from the environment.
    local args=()
    for arg in "$@"; do args+=("${arg//\{hostfile\}/$work/hostfile}"); done
    OMPI_MCA_plm_rsh_agent="$self --agent" OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self \
      OMPI_MCA_btl_tcp_if_include="$cidr" OMPI_MCA_oob_tcp_if_include="$cidr" \
      netns_exec "$ns_a" nodeA "${args[@]}" || status=$?
  else
    netns_exec "$ns_a" nodeA "${MPIRUN:-mpirun}" --hostfile "$work/hostfile" \
      -np $((2 * per_node)) --map-by slot --bind-to none --mca plm_rsh_agent "$self --agent" --mca pml ob1 --mca btl tcp,self \
      --mca btl_tcp_if_include "$cidr" --mca oob_tcp_if_include "$cidr" \
      "${mpirun_args[@]}" "$self" --rank "$@" || status=$?
  fi
  # Evidence that the "hosts" talked over the link (MPI and Open MPI's control traffic).
  local tx rx
  tx=$(ip netns exec "$ns_a" cat "/sys/class/net/$ns_a/statistics/tx_bytes")
  rx=$(ip netns exec "$ns_a" cat "/sys/class/net/$ns_a/statistics/rx_bytes")
  echo "netns-rehearsal: link nodeA-nodeB carried $tx bytes nodeA->nodeB, $rx bytes nodeB->nodeA" >&2
  return "$status"
}

case "${1:-}" in
  --check) check ;;
  --agent) shift; agent "$@" ;;
  --rank) shift; rank "$@" ;;
  *) main "$@" ;;
esac
