# Hosts played by network namespaces on one machine, for launch/netns-rehearsal.sh (two hosts under
# mpirun) and launch/slurm/local-cluster.sh (two SLURM nodes): functions to source, not a program.
# Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), iproute2 (ip) and util-linux (unshare).

# Prints why namespaces cannot play hosts here and returns 1; returns 0 silently when they can.
# It tries the steps of netns_pair_up on a probe namespace (containers often allow some and not
# others).
netns_unusable() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "network namespaces need root (CAP_NET_ADMIN), running as uid $(id -u)"
    return 1
  fi
  local tool
  for tool in ip nsenter unshare hostname; do
    command -v "$tool" >/dev/null ||
      { echo "'$tool' not found (Debian: iproute2, util-linux, hostname)"; return 1; }
  done
  local probe="tdmprobe$$" out
  out=$(ip netns add "$probe" 2>&1) || { echo "'ip netns add' failed: $out"; return 1; }
  out=$({ ip link add "${probe}x" type veth peer name "${probe}y" netns "$probe" &&
          nsenter --net="/run/netns/$probe" unshare --uts --mount true; } 2>&1) || {
    ip link del "${probe}x" 2>/dev/null
    ip netns del "$probe"
    echo "veth pair, 'nsenter --net' or 'unshare --uts --mount' failed: $out"
    return 1
  }
  ip link del "${probe}x"
  ip netns del "$probe"
}

# netns_pair_up NS_A NS_B SUBNET: namespaces NS_A and NS_B joined by a veth pair whose ends are
# named as their namespaces, nodeA at SUBNET.1 in NS_A and nodeB at SUBNET.2 in NS_B (SUBNET: the
# first three octets), and an /etc/hosts naming both in each (ip netns exec mounts
# /etc/netns/<ns>/hosts over /etc/hosts inside the namespace).
netns_pair_up() {
  local ns_a=$1 ns_b=$2 subnet=$3 ns
  ip netns add "$ns_a"
  ip netns add "$ns_b"
  ip link add "$ns_a" type veth peer name "$ns_b"
  ip link set "$ns_a" netns "$ns_a"
  ip link set "$ns_b" netns "$ns_b"
  ip -n "$ns_a" addr add "$subnet.1/24" dev "$ns_a"
  ip -n "$ns_b" addr add "$subnet.2/24" dev "$ns_b"
  for ns in "$ns_a" "$ns_b"; do
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$ns" up
    mkdir -p "/etc/netns/$ns"
    printf '127.0.0.1 localhost\n%s.1 nodeA\n%s.2 nodeB\n' "$subnet" "$subnet" \
      >"/etc/netns/$ns/hosts"
  done
}

# netns_pair_down NS...: every process left in the namespaces killed, the namespaces (and so the
# veth pair) and their /etc/netns files removed. Quiet about what is already gone.
netns_pair_down() {
  local ns pid
  for ns in "$@"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  rmdir /etc/netns 2>/dev/null || true
}

# netns_exec [--replace] NS HOST COMMAND [ARGS...]: COMMAND in namespace NS's network under hostname HOST (a UTS
# namespace of its own), with /etc/netns/NS/hosts as /etc/hosts (a mount namespace of its own), as
# if run on that host. Not `ip netns exec`, which also mounts a new /sys: that hides the machine's
# cgroup mounts under /sys/fs/cgroup, without which slurmd will not start. --replace: COMMAND
# replaces the calling shell, as `exec` does.
netns_exec() {
  local replace=
  [ "$1" = --replace ] && { replace=exec; shift; }
  local ns=$1 host=$2
  shift 2
  $replace nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private sh -c \
    'mount --bind "/etc/netns/$0/hosts" /etc/hosts && hostname "$1" && shift && exec "$@"' \
    "$ns" "$host" "$@"
}
