#!/usr/bin/env bash
# xaggd under a real systemd, with its real unit: a minimal Debian tree (debootstrap, with the
# shared libraries xaggd links) booted by systemd-nspawn inside a network namespace of this test,
# on a veth the unit's xaggd attaches to. Starts the unit, kills its main PID with SIGKILL, and
# checks that systemd restarted it (Restart=on-failure) and that the new xaggd took over the
# pinned XDP link under the unit's capabilities. The tree is cached under /var/cache/xagg-test
# (keyed by its package list); everything else is removed, on failure too.
#
#   tests/systemd_unit_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
for tool in systemd-nspawn debootstrap; do
    command -v $tool >/dev/null || { echo "SKIP: $tool is not installed (scripts/install-deps installs it)"; exit 77; }
done
# Debian's packages of the shared libraries xaggd links, plus systemd itself.
# (dpkg -S fails for paths it knows under another name, /usr/lib for /lib: those are libc's.)
libs=$(ldd "$build/daemon/xaggd" | awk '/=>/ {print $3}' | xargs -n1 readlink -f |
    { xargs dpkg -S 2>/dev/null || true; } | cut -d: -f1 | sort -u | tr '\n' ',')
include="systemd,systemd-sysv,dbus,iproute2,${libs%,}"
cache=/var/cache/xagg-test/bookworm-$(echo "$include" | md5sum | cut -c1-12).tar
tag="xaggsd$$"
work=$(mktemp -d)
ns="$tag"
nspawn_pid=
cleanup() {
    [[ -n $nspawn_pid ]] && kill "$nspawn_pid" 2>/dev/null && wait "$nspawn_pid" 2>/dev/null
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/sys/fs/bpf/$tag" "$work"
}
trap cleanup EXIT
if [[ ! -f $cache ]]; then
    mkdir -p "$(dirname "$cache")"
    mirror=$(sed -n 's/^URIs: \(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
    debootstrap --variant=minbase --include="$include" bookworm "$work/seed" "${mirror:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 ||
        { tail -20 "$work/debootstrap.log"; exit 1; }
    tar -C "$work/seed" -cf "$cache.tmp" . && mv "$cache.tmp" "$cache"
    rm -rf "$work/seed"
fi
root="$work/root"
mkdir -p "$root"
tar -C "$root" -xf "$cache"
install -m 755 "$build/daemon/xaggd" "$root/usr/sbin/xaggd"
install -m 644 "$src/systemd/xaggd.service" "$root/etc/systemd/system/xaggd.service"
mkdir -p "$root/etc/xagg"
printf 'interface = eth0\nmax_chunks = 4096\nbpffs_dir = /sys/fs/bpf/%s\nmetrics_address =\n' "$tag" >"$root/etc/xagg/xaggd.conf"

ip netns add "$ns"
ip -n "$ns" link add eth0 type veth peer name peer0
ip -n "$ns" link set eth0 mtu 3500 up
ip -n "$ns" link set peer0 mtu 3500 up
ip -n "$ns" link set lo up
mkdir -p "/sys/fs/bpf/$tag"

# nspawn's own seccomp filter refuses bpf(2) unless allowed; the container gets the capabilities
# the unit asks for (the unit then narrows them to its own set). No machined or systemd on the
# host: --keep-unit --register=no.
systemd-nspawn -D "$root" -b --keep-unit --register=no --network-namespace-path="/run/netns/$ns" \
    --bind=/sys/fs/bpf --capability=CAP_BPF,CAP_PERFMON,CAP_NET_ADMIN --system-call-filter=bpf \
    >"$work/console.log" 2>&1 &
nspawn_pid=$!

# The container's systemd (the nspawn process's child) and commands inside it.
init=
for _ in $(seq 300); do
    init=$(pgrep -P "$nspawn_pid" -x systemd || true)
    [[ -n $init ]] && nsenter -t "$init" -a systemctl is-system-running 2>/dev/null | grep -qE 'running|degraded' && break
    sleep 0.1
done
[[ -n $init ]] || { echo "the container did not boot:"; tail -20 "$work/console.log"; exit 1; }
inside() { nsenter -t "$init" -a "$@"; }
wait_for() {  # wait_for WHAT COMMAND...: until the command succeeds (30 s at most)
    local what=$1; shift
    for _ in $(seq 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "FAIL: $what"; inside journalctl -u xaggd --no-pager | tail -20; exit 1
}

inside systemctl start xaggd
[[ $(inside systemctl show xaggd -p ActiveState --value) == active ]] || { echo "FAIL: not active"; exit 1; }
first=$(inside systemctl show xaggd -p MainPID --value)
ip -n "$ns" link show eth0 | grep -q 'prog/xdp id [0-9]* name xagg_fastpath' || { echo "FAIL: no program attached"; exit 1; }
inside /bin/sh -c "kill -9 $first"  # the main PID, as in the container
wait_for "systemd did not restart xaggd" \
    sh -c "[ \"\$(nsenter -t $init -a systemctl show xaggd -p NRestarts --value)\" = 1 ] &&
           [ \"\$(nsenter -t $init -a systemctl show xaggd -p ActiveState --value)\" = active ]"
second=$(inside systemctl show xaggd -p MainPID --value)
[[ $second != "$first" ]] || { echo "FAIL: the same main PID"; exit 1; }
inside journalctl -u xaggd --no-pager | grep -q 'took over the XDP link a previous run left on eth0' ||
    { echo "FAIL: the restarted xaggd did not take over the link"; inside journalctl -u xaggd --no-pager | tail; exit 1; }
ip -n "$ns" link show eth0 | grep -q 'prog/xdp id [0-9]* name xagg_fastpath' || { echo "FAIL: no program attached after the restart"; exit 1; }
inside systemctl stop xaggd
wait_for "the program is still attached after a clean stop" sh -c "! ip -n $ns link show eth0 | grep -q prog/xdp"
echo "systemd restarted xaggd after SIGKILL (main PID $first -> $second) and it took over the XDP link: ok"
