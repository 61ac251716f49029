# SPDX-License-Identifier: MIT
"""The Python tests' namespace topology with a real xaggd: scripts/netns-topology.sh up, the
daemon under the unit's privileges (scripts/xaggd-as-unit), and both always taken down, with
the workers' processes, even when the test fails.

    with Testbed(build, workers=4, tag="py") as bed:
        bed.ctl("job", "create", ...)
        procs = [bed.spawn(rank, [...], env) for rank in ...]  # in rank's namespace
        outputs = bed.finish(procs, "training", timeout=300)   # (stdout, stderr) of each
"""
import json
import os
import pathlib
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
AGGREGATOR = "10.77.0.100"


class Testbed:
    def __init__(self, build, workers, tag):
        self.build = pathlib.Path(build)
        self.workers = workers
        self.prefix = f"xaggt{os.getpid()}{tag}"
        self.topology = str(ROOT / "scripts" / "netns-topology.sh")
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix=f"xagg-{tag}-"))
        self.socket = str(self.dir / "xaggd.sock")
        self.daemon = None
        self.procs = []

    def __enter__(self):
        subprocess.run([self.topology, "up", self.prefix, str(self.workers),
                        str(self.build / "bpf" / "xdp_pass.bpf.o")],
                       check=True, capture_output=True, text=True)
        try:
            conf = self.dir / "xaggd.conf"
            conf.write_text(
                f"interface = eth0\nnetns = {self.prefix}-agg\nmax_chunks = 4096\n"
                f"bpffs_dir = /sys/fs/bpf/{self.prefix}\nstate_dir = {self.dir}/state\n"
                f"host_slots_dir = {self.dir}/slots\n"
                f"control_socket = {self.socket}\nmetrics_address =\n")
            self.daemon = subprocess.Popen(
                [str(ROOT / "scripts" / "xaggd-as-unit"), "--netns", f"{self.prefix}-agg",
                 str(self.build / "daemon" / "xaggd"), "--config", str(conf)],
                stdout=open(self.dir / "xaggd.log", "w"), stderr=subprocess.STDOUT)
            # Waits for the state it needs: the control API answering (or the daemon gone).
            while self.ctl("status", check=False).returncode != 0:
                assert self.daemon.poll() is None, (self.dir / "xaggd.log").read_text()
                time.sleep(0.025)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:  # a worker left behind would run on and slow later tests
                p.kill()
                p.wait()
        if self.daemon:
            self.daemon.terminate()
            self.daemon.wait(timeout=20)
        subprocess.run([self.topology, "down", self.prefix], capture_output=True)
        subprocess.run(["rm", "-rf", str(self.dir), f"/sys/fs/bpf/{self.prefix}"])

    def ctl(self, *args, check=True):
        return subprocess.run([str(self.build / "tools" / "xaggctl"), "--socket", self.socket,
                               *args], check=check, text=True, capture_output=True)

    def spawn(self, rank, argv, env, host=None):
        """A process in worker `rank`'s namespace (or worker `host`'s, for ranks sharing one),
        its output captured."""
        ns = f"{self.prefix}-w{rank if host is None else host}"
        p = subprocess.Popen(["ip", "netns", "exec", ns, *argv], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def finish(self, procs, what, timeout):
        """Waits for each of `procs`, which must exit 0; their (stdout, stderr), in order."""
        outputs = []
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=timeout)
            assert p.returncode == 0, f"{what} (process {i}) failed: {err}{out}"
            outputs.append((out, err))
        return outputs


def last_json_line(out):
    """The report a process printed last, as JSON."""
    return json.loads(out.strip().splitlines()[-1])
