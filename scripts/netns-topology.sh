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
# native XDP_TX on a veth only delivers when its peer has one.
#
#   netns-topology.sh up PREFIX WORKERS XDP_PASS_OBJECT
#   netns-topology.sh down PREFIX
set -euo pipefail

AGG_ADDR=10.77.0.100
worker_addr() { echo "10.77.0.$(($1 + 1))"; }

up() {
    local prefix=$1 workers=$2 pass_obj=$3
    local sw=$prefix-sw agg=$prefix-agg
    ((workers >= 1 && workers <= 64)) || { echo "WORKERS must be 1..64" >&2; exit 1; }
    ip netns add "$sw"
    ip netns add "$agg"
    ip -n "$sw" link add br0 type bridge mcast_snooping 0
    ip -n "$sw" link set br0 up
    ip -n "$sw" link set lo up

    ip -n "$agg" link add eth0 type veth peer name agg netns "$sw"
    ip -n "$agg" addr add $AGG_ADDR/24 dev eth0
    ip -n "$agg" link set lo up
    ip -n "$agg" link set eth0 up
    ip -n "$sw" link set agg master br0 up
    ip -n "$sw" link set dev agg xdpdrv obj "$pass_obj" sec xdp

    for ((i = 0; i < workers; i++)); do
        local w=$prefix-w$i
        ip netns add "$w"
        ip -n "$w" link add eth0 type veth peer name "w$i" netns "$sw"
        ip -n "$w" addr add "$(worker_addr $i)/24" dev eth0
        ip -n "$w" link set lo up
        ip -n "$w" link set eth0 up
        ip -n "$w" route add 224.0.0.0/4 dev eth0
        ip -n "$sw" link set "w$i" master br0 up
    done
}

down() {
    local prefix=$1 ns
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^${prefix}-(sw|agg|w[0-9]+)$" || true); do
        ip netns del "$ns" 2>/dev/null || true
    done
}

case "${1:-}" in
up) [[ $# -eq 4 ]] || { echo "usage: $0 up PREFIX WORKERS XDP_PASS_OBJECT" >&2; exit 1; }
    up "$2" "$3" "$4" ;;
down) [[ $# -eq 2 ]] || { echo "usage: $0 down PREFIX" >&2; exit 1; }
    down "$2" ;;
*) echo "usage: $0 up PREFIX WORKERS XDP_PASS_OBJECT | down PREFIX" >&2; exit 1 ;;
esac
