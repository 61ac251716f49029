#!/bin/sh
# Removes the namespaces that crashed tests left behind. A test's namespaces are named
# xaggt<pid of the test process><tag>-...; only those whose test process is gone are removed,
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
exit $left
