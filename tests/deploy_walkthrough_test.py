#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docs/DEPLOY.md, run as written: every block marked `sh on=HOSTS` is extracted and run, in the
document's order, as root on network namespaces standing for the hosts it names (a block for
several hosts runs on all of them at once, and fails if any of them fails). So the document
cannot drift from what works: a command, a config key, a firewall rule or a metric name it gets
wrong fails this test.

Each host is a network namespace with an `ens1f0` of the document's address on one bridge (the
switch), and a persistent mount namespace of its own: /etc, /var and /run are overlays of this
machine's (what a host writes stays in its layer), /usr has the build tree's install on top
(`cmake --install`, the rules the Debian package is made of: the document's `apt install`), and
sysfs and bpffs are its own. What a namespace cannot be is stood in for, in the shell functions
below and nowhere else: `systemctl` starts xaggd as its unit does (exactly the unit's
capabilities, scripts/xaggd-as-unit; ready once its control socket answers, as Type=notify is)
and Prometheus as Debian's unit does; `scp HOST:PATH` reads that host's /etc.

Run by ctest (XAGG_BINARY_DIR set); prints PASSED at the end. Everything it made (namespaces,
processes, mounts, files) is removed, also when it fails.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = pathlib.Path(os.environ.get("XAGG_BINARY_DIR", ROOT / "build"))
DOC = ROOT / "docs" / "DEPLOY.md"
HOSTS = {"agg1": "10.0.0.1", "agg2": "10.0.0.2", "gpu1": "10.0.0.11", "gpu2": "10.0.0.12",
         "mon": "10.0.0.9"}
AGGREGATORS = {"agg1", "agg2"}
WORKERS = {"gpu1", "gpu2"}
SWITCH = "switch"
MTU = 9000
BLOCK_TIMEOUT = 600  # seconds; a block that takes longer is hung

# The stand-ins, sourced by every block (see the module's docstring).
SHIMS = r'''
walk_wait() {  # walk_wait WHAT PID CMD...: until CMD succeeds, while PID lives (at most 60 s)
    local what=$1 pid=$2 i; shift 2
    for i in $(seq 600); do
        "$@" >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || { echo "walkthrough: $what exited" >&2; return 1; }
        sleep 0.1
    done
    echo "walkthrough: $what not ready in 60 s" >&2
    return 1
}
walk_start() {  # walk_start NAME LOG CMD...: in the background, its pid in /run/walkthrough
    local name=$1 log=$2; shift 2
    mkdir -p /run/walkthrough
    if [[ -f /run/walkthrough/$name.pid ]]; then  # a restart
        kill "$(cat /run/walkthrough/$name.pid)" 2>/dev/null || true
        while kill -0 "$(cat /run/walkthrough/$name.pid)" 2>/dev/null; do sleep 0.05; done
    fi
    setsid "$@" >"$log" 2>&1 </dev/null &
    echo $! >/run/walkthrough/$name.pid
}
systemctl() {
    local verb=$1; shift
    if [[ $verb == enable && ${1:-} == --now ]]; then verb=start; shift; fi
    case "$verb $1" in
    "enable nftables") ;;  # loads /etc/nftables.conf at boot; these hosts do not boot
    "start xaggd" | "restart xaggd")
        # RuntimeDirectory=xagg, StateDirectory=xagg, then ExecStart with the unit's privileges.
        mkdir -p /run/xagg /var/lib/xagg /var/log
        walk_start xaggd /var/log/xaggd.log "$WALK_SOURCE/scripts/xaggd-as-unit" \
            /usr/sbin/xaggd --config /etc/xagg/xaggd.conf
        walk_wait xaggd "$(cat /run/walkthrough/xaggd.pid)" xaggctl status ||
            { cat /var/log/xaggd.log >&2; return 1; } ;;
    "reload xaggd") kill -HUP "$(cat /run/walkthrough/xaggd.pid)" ;;
    "start prometheus" | "restart prometheus")
        # Debian's unit: /usr/bin/prometheus with its defaults' storage path.
        mkdir -p /var/lib/prometheus/metrics2 /var/log
        walk_start prometheus /var/log/prometheus.log prometheus \
            --config.file=/etc/prometheus/prometheus.yml \
            --storage.tsdb.path=/var/lib/prometheus/metrics2/
        walk_wait prometheus "$(cat /run/walkthrough/prometheus.pid)" \
            promtool query instant http://localhost:9090 'vector(1)' ||
            { cat /var/log/prometheus.log >&2; return 1; } ;;
    *) echo "walkthrough: no stand-in for systemctl $verb $*" >&2; return 1 ;;
    esac
}
scp() {  # scp [-p] HOST:/etc/PATH... DEST: each file as HOST sees it, mode kept
    local files=() a
    for a in "$@"; do [[ $a == -* ]] || files+=("$a"); done
    local dest=${files[-1]} src host path layer found
    unset 'files[-1]'
    for src in "${files[@]}"; do
        host=${src%%:*} path=${src#*:} found=
        [[ $path == /etc/* ]] || { echo "walkthrough: scp stands in for /etc only" >&2; return 1; }
        for layer in "$WALK_DIR/$host/etc-up" "$WALK_DIR/stage/etc" /etc; do
            if [[ -e $layer${path#/etc} ]]; then
                cp -p "$layer${path#/etc}" "$dest"
                found=1
                break
            fi
        done
        [[ -n $found ]] || { echo "scp: $src: No such file or directory" >&2; return 1; }
    done
}
'''


def sh(*cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def blocks(text):
    """The document's runnable blocks: (hosts, code, line). Every `sh` block says where it
    runs (`on=HOSTS`) or that it does not (`norun`, the reason in the text around it)."""
    out = []
    for m in re.finditer(r"^```(\w*)([^\n]*)\n(.*?)^```$", text, re.M | re.S):
        lang, attrs, code = m.group(1), m.group(2).split(), m.group(3)
        line = text.count("\n", 0, m.start()) + 1
        if lang != "sh":
            continue
        if attrs == ["norun"]:
            continue
        on = [a[3:] for a in attrs if a.startswith("on=")]
        assert len(on) == 1 and len(attrs) == 1, \
            f"DEPLOY.md:{line}: an sh block says on=HOST[,HOST...] or norun, not {attrs}"
        hosts = on[0].split(",")
        for h in hosts:
            assert h in HOSTS or h == SWITCH, f"DEPLOY.md:{line}: no host {h}"
        out.append((hosts, code, line))
    return out


class Fleet:
    """The hosts, the switch, and their namespaces; removed whole on exit."""

    def __init__(self):
        self.tag = f"xaggt{os.getpid()}d"
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="xagg-deploy-"))
        self.netns = {h: f"{self.tag}-{h}" for h in [*HOSTS, SWITCH]}
        self.mounted = False

    def __enter__(self):
        try:
            self.setup()
        except BaseException:
            self.__exit__()
            raise
        return self

    def setup(self):
        d = self.dir
        # The package's files, installed as the package installs them.
        sh("cmake", "--install", str(BUILD), "--prefix", str(d / "stage" / "usr"))
        (d / "shims.sh").write_text(SHIMS)
        # The mount namespaces are kept as bind mounts in a private mount of the directory.
        sh("mount", "--bind", str(d), str(d))
        self.mounted = True
        sh("mount", "--make-private", str(d))
        sw = self.netns[SWITCH]
        sh("ip", "netns", "add", sw)
        sh("ip", "-n", sw, "link", "add", "br0", "mtu", str(MTU), "type", "bridge")
        sh("ip", "-n", sw, "link", "set", "br0", "up")
        for host, addr in HOSTS.items():
            ns = self.netns[host]
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", sw, "link", "add", host, "mtu", str(MTU), "type", "veth", "peer",
               "name", "ens1f0", "mtu", str(MTU), "netns", ns)
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "ens1f0")
            for dev in ("lo", "ens1f0"):
                sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", sw, "link", "set", host, "master", "br0", "up")
            if host in AGGREGATORS:
                # A veth answers XDP_TX into its peer, which takes such frames only with an XDP
                # program of its own (a NIC needs none): the switch port gets a pass-through.
                sh("ip", "-n", sw, "link", "set", "dev", host, "xdpdrv", "obj",
                   str(BUILD / "bpf" / "xdp_pass.bpf.o"), "sec", "xdp.frags")
            if host in WORKERS:
                # A veth passes partial checksums on (a NIC completes them); the fast path
                # verifies them, so the worker's kernel computes them, as for a NIC. And these
                # namespaces have no default route for the multicast results' joins to follow.
                sh("ip", "netns", "exec", ns, "ethtool", "-K", "ens1f0", "tx", "off")
                sh("ip", "-n", ns, "route", "add", "224.0.0.0/4", "dev", "ens1f0")
            self.make_host_mounts(host)

    def make_host_mounts(self, host):
        h = self.dir / host
        for layer in ("etc", "var", "run"):
            (h / f"{layer}-up").mkdir(parents=True)
            (h / f"{layer}-work").mkdir()
        ns_file = self.dir / f"{host}.mnt"
        ns_file.touch()
        sh("unshare", f"--mount={ns_file}", "--propagation", "private", "true")
        stage = self.dir / "stage"
        mounts = [
            f"mount -t overlay overlay -o lowerdir={stage}/usr:/usr /usr",
            f"mount -t overlay overlay -o lowerdir={stage}/etc:/etc,"
            f"upperdir={h}/etc-up,workdir={h}/etc-work /etc",
            f"mount -t overlay overlay -o lowerdir=/var,upperdir={h}/var-up,"
            f"workdir={h}/var-work /var",
            f"mount -t overlay overlay -o lowerdir=/run,upperdir={h}/run-up,"
            f"workdir={h}/run-work /run",
            "mount -t sysfs sysfs /sys",  # this namespace's interfaces
            "mount -t bpf bpf /sys/fs/bpf",  # its own pins
        ]
        self.enter(host, ["sh", "-ec", "; ".join(mounts)], check=True)

    def command(self, host, cmd):
        """`cmd` run on `host`: in its namespaces, with a clean environment."""
        enter = ["ip", "netns", "exec", self.netns[host]] if host == SWITCH else [
            "nsenter", f"--net=/run/netns/{self.netns[host]}",
            f"--mount={self.dir / (host + '.mnt')}", "--"]
        return enter + ["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
                        "LANG=C.UTF-8", f"WALK_DIR={self.dir}", f"WALK_SOURCE={ROOT}", *cmd]

    def enter(self, host, cmd, check=False):
        return subprocess.run(self.command(host, cmd), check=check, capture_output=True,
                              text=True)

    def run_block(self, hosts, code, line):
        script = f"source {self.dir / 'shims.sh'}\n{code}"
        procs = {h: subprocess.Popen(
            self.command(h, ["bash", "-e", "-u", "-o", "pipefail", "-c", script]),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for h in hosts}
        failed = []
        for h, p in procs.items():
            try:
                out, _ = p.communicate(timeout=BLOCK_TIMEOUT)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                out += f"\n(killed after {BLOCK_TIMEOUT} s)"
            print(f"--- DEPLOY.md:{line} on {h}: exit {p.returncode}\n{out}", flush=True)
            if p.returncode != 0:
                failed.append(h)
        assert not failed, f"DEPLOY.md:{line}: the block failed on {', '.join(failed)}"

    def __exit__(self, *exc):
        for host in [*HOSTS, SWITCH]:
            ns = self.netns[host]
            if not os.path.exists(f"/run/netns/{ns}"):
                continue
            # Every process left in the host (xaggd, Prometheus), gone before its mounts.
            deadline = time.monotonic() + 30
            while pids := sh("ip", "netns", "pids", ns, check=False).stdout.split():
                sh("kill", "-9", *pids, check=False)
                if time.monotonic() > deadline:
                    print(f"walkthrough: processes {pids} of {ns} outlive kill -9",
                          file=sys.stderr)
                    break
                time.sleep(0.05)
        for host in HOSTS:
            ns_file = self.dir / f"{host}.mnt"
            if ns_file.exists():
                sh("umount", str(ns_file), check=False)
        for ns in self.netns.values():
            sh("ip", "netns", "del", ns, check=False)
        if self.mounted:
            sh("umount", str(self.dir), check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def main():
    if os.geteuid() != 0:
        print("SKIPPED: needs root (namespaces, mounts, XDP)")
        return 0
    steps = blocks(DOC.read_text())
    assert steps, "DEPLOY.md has no runnable blocks"
    with Fleet() as fleet:
        for hosts, code, line in steps:
            fleet.run_block(hosts, code, line)
    print(f"PASSED: {len(steps)} blocks of docs/DEPLOY.md ran on "
          f"{len(HOSTS)} hosts and the switch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
