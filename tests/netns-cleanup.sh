#!/bin/sh
# Removes the namespaces and pinned BPF maps that crashed tests left behind. A test's are named
# xaggt<pid of the test process><tag>...; only those whose test process is gone are removed,
# so a test run in another checkout at the same time keeps its own. Fails if any remain.
left=0
for ns in $(ip netns list | awk '{print $1}' | grep '^xaggt'); do
    pid=${ns#xaggt}
    pid=${pid%%[!0-9]*}
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        continue
    fi
    ip netns del "$ns" || left=1
done
for pins in /sys/fs/bpf/xaggt*; do
    [ -e "$pins" ] || continue
    pid=${pins#/sys/fs/bpf/xaggt}
    pid=${pid%%[!0-9]*}
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        continue
    fi
    rm -rf "$pins" || left=1
done
exit $left
