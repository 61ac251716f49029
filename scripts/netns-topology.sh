#!/usr/bin/env bash
# A local stand-in for an aggregator node and its workers, built from network namespaces:
#
#   PREFIX-w0 (eth0 10.77.0.1) --+
#   PREFIX-w1 (eth0 10.77.0.2) --+-- PREFIX-sw: bridge br0 --- PREFIX-agg (eth0 10.77.0.100)
#   ...                        --+
#
# Like a real deployment, every worker reaches the aggregator through its one NIC (eth0 in
# PREFIX-agg), and the bridge copies the aggregator's multicast results to every port, as a
# switch does. The bridge side of the aggregator's veth runs a pass-through XDP program, because
# native XDP_TX on a veth only delivers when its peer has one. Needs iproute2 and ethtool.
#
#   netns-topology.sh up PREFIX WORKERS XDP_PASS_OBJECT
#   netns-topology.sh detour PREFIX RANK
#   netns-topology.sh aggregator PREFIX N XDP_PASS_OBJECT
#   netns-topology.sh down PREFIX
#
# `detour` takes worker RANK's port out of the bridge and puts a veth pair in its place: the
# bridge gets jRANK, and whatever forwards frames between wRANK and kRANK (both in PREFIX-sw;
# the tests' link impairer) carries that worker's traffic. The worker's NIC then segments its
# UDP GSO sends itself (gso_max_segs 1), as a real NIC does, so frames cross one at a time.
# `aggregator` adds a second (third, ...) aggregator node: PREFIX-aggN, eth0 10.77.0.(100+N).
set -euo pipefail

AGG_ADDR=10.77.0.100
# A chunk's frame needs an IP MTU of at least 3140 (XAGG_MIN_MTU, include/xagg/proto.h). 9000 is
# what fabrics run, and what the fast path (a multi-buffer XDP program, as are the pass-through
# and the tests' impairer) attaches to.
MTU=9000
worker_addr() { echo "10.77.0.$(($1 + 1))"; }

up() {
    local prefix=$1 workers=$2 pass_obj=$3
    local sw=$prefix-sw agg=$prefix-agg
    ((workers >= 1 && workers <= 64)) || { echo "WORKERS must be 1..64" >&2; exit 1; }
    ip netns add "$sw"
    ip netns add "$agg"
    ip -n "$sw" link add br0 type bridge mcast_snooping 0
    ip -n "$sw" link set br0 mtu $MTU up
    ip -n "$sw" link set lo up

    ip -n "$agg" link add eth0 mtu $MTU type veth peer name agg mtu $MTU netns "$sw"
    ip -n "$agg" addr add $AGG_ADDR/24 dev eth0
    ip -n "$agg" link set lo up
    ip -n "$agg" link set eth0 up
    ip -n "$sw" link set agg master br0 up
    ip -n "$sw" link set dev agg xdpdrv obj "$pass_obj" sec xdp.frags

    for ((i = 0; i < workers; i++)); do
        local w=$prefix-w$i
        ip netns add "$w"
        ip -n "$w" link add eth0 mtu $MTU type veth peer name "w$i" mtu $MTU netns "$sw"
        ip -n "$w" addr add "$(worker_addr $i)/24" dev eth0
        ip -n "$w" link set lo up
        ip -n "$w" link set eth0 up
        # A real NIC sends complete UDP checksums (it fills them in, or the stack does). A veth
        # with checksum offload on passes the stack's partial one (the pseudo-header sum only) to
        # its peer, and the aggregator's XDP program, which verifies checksums, would see every
        # contribution as corrupted. Off, the worker's kernel computes them, as for a NIC.
        ip netns exec "$w" ethtool -K eth0 tx off >/dev/null
        ip -n "$w" route add 224.0.0.0/4 dev eth0
        ip -n "$sw" link set "w$i" master br0 up
    done
}

detour() {
    local prefix=$1 rank=$2 sw=$1-sw
    ip -n "$prefix-w$rank" link set eth0 gso_max_segs 1
    ip -n "$sw" link set "w$rank" nomaster
    ip -n "$sw" link add "j$rank" mtu $MTU type veth peer name "k$rank" mtu $MTU
    ip -n "$sw" link set "j$rank" master br0 up
    ip -n "$sw" link set "k$rank" up
}

aggregator() {
    local prefix=$1 n=$2 pass_obj=$3 sw=$1-sw agg=$1-agg$2
    ip netns add "$agg"
    ip -n "$agg" link add eth0 mtu $MTU type veth peer name "agg$n" mtu $MTU netns "$sw"
    ip -n "$agg" addr add "10.77.0.$((100 + n))/24" dev eth0
    ip -n "$agg" link set lo up
    ip -n "$agg" link set eth0 up
    ip -n "$sw" link set "agg$n" master br0 up
    ip -n "$sw" link set dev "agg$n" xdpdrv obj "$pass_obj" sec xdp.frags
}

down() {
    local prefix=$1 ns
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^${prefix}-(sw|agg[0-9]*|w[0-9]+)$" || true); do
        ip netns del "$ns" 2>/dev/null || true
    done
}

case "${1:-}" in
up) [[ $# -eq 4 ]] || { echo "usage: $0 up PREFIX WORKERS XDP_PASS_OBJECT" >&2; exit 1; }
    up "$2" "$3" "$4" ;;
aggregator) [[ $# -eq 4 ]] || { echo "usage: $0 aggregator PREFIX N XDP_PASS_OBJECT" >&2; exit 1; }
    aggregator "$2" "$3" "$4" ;;
detour) [[ $# -eq 3 ]] || { echo "usage: $0 detour PREFIX RANK" >&2; exit 1; }
    detour "$2" "$3" ;;
down) [[ $# -eq 2 ]] || { echo "usage: $0 down PREFIX" >&2; exit 1; }
    down "$2" ;;
*) echo "usage: $0 up PREFIX WORKERS XDP_PASS_OBJECT | down PREFIX" >&2; exit 1 ;;
esac
