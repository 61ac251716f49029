#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Python module and the DDP hook against a real xaggd on the namespace topology:

  api:      2 workers all-reduce numpy arrays and CPU torch tensors in place (float32 against a
            float64 reference within the documented bound; int32 exact; async handles);
  fallback: the hook falls back to the process group when xagg cannot be used;
  training: the same seed trained by 4 workers with plain gloo DDP and with the xagg hook; the
            loss curves agree within LOSS_TOLERANCE at every step and the final accuracies
            within ACCURACY_MARGIN; every bucket went through xagg.

Run as root by ctest (label integration). `--worker` is the per-namespace half of the api test.
"""
import json
import logging
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
from testbed import Testbed, last_json_line  # noqa: E402
BUILD = pathlib.Path(os.environ.get("XAGG_BINARY_DIR", ROOT / "build"))
LOSS_TOLERANCE = 0.02    # absolute, per step, on a cross-entropy that starts at 2.3
ACCURACY_MARGIN = 0.01   # one percentage point of held-out accuracy
STEPS = 200


def worker(rank, socket):
    """One worker of the api test, in its namespace."""
    import numpy as np
    import torch
    sys.path.insert(0, str(BUILD / "python"))
    import xagg

    c = xagg.Client([{"address": "10.77.0.100", "job": 1, "socket": socket}], rank=rank,
                    local_address=f"10.77.0.{rank + 1}")
    assert c.workers == 2
    inputs = [np.random.default_rng(seed).uniform(-1, 1, 100003).astype(np.float32)
              for seed in (11, 12)]
    exact = inputs[0].astype(np.float64) + inputs[1].astype(np.float64)
    mine = inputs[rank].copy()
    report = c.allreduce(mine)
    # The documented bound (docs/CLIENT.md) for 2 workers and blocks whose largest magnitude is
    # below 1: x <= 1 + 1 - 29, so |error| <= 2 * 2^(x-1) + 2^-24 (|exact| + ...) < 2^-26 + 2^-23 |exact|.
    err = np.abs(mine.astype(np.float64) - exact)
    bound = 2.0 ** -26 + 2.0 ** -23 * np.abs(exact)
    assert (err <= bound).all(), f"beyond the bound: {err.max()}"
    assert report["contributors"] == 2 and report["nonfinite_blocks"] == 0, report
    # A torch tensor through .numpy(): the tensor itself is summed, no copy.
    t = torch.full((5000,), float(rank + 1))
    pending = c.allreduce_async(t.numpy(), priority=3)
    pending.wait()
    assert pending.ready()
    assert torch.equal(t, torch.full((5000,), 3.0)), t[:4]
    # int32: exact, wrapping.
    ints = np.full(777, 2 ** 30 if rank == 0 else 2 ** 30 + 5, dtype=np.int32)
    c.allreduce(ints)
    assert (ints == np.int32(-(2 ** 31) + 5)).all(), ints[:4]
    # Refused: not float32 or int32.
    try:
        c.allreduce(np.zeros(10, dtype=np.float64))
        raise AssertionError("float64 accepted")
    except TypeError:
        pass
    print(json.dumps({"rank": rank, "max_error": float(err.max())}))


def fallback():
    """The hook's fall-back, in-process: a client that cannot start an all-reduce (a stand-in
    at the edge) makes the hook log, count, and use the process group's all_reduce."""
    import torch
    import torch.distributed as dist
    sys.path.insert(0, str(BUILD / "python"))
    import xagg
    import xagg.torch

    class Unreachable:
        workers = 1

        def allreduce_async(self, buffer, priority=0):
            raise xagg.ClientError("aggregator 10.0.0.5 unreachable", "unreachable")

    class Bucket:
        def __init__(self, t):
            self.t = t

        def buffer(self):
            return self.t

        def index(self):
            return 0

    class Untouchable:
        workers = 1

        def allreduce_async(self, buffer, priority=0):
            raise AssertionError("a bucket xagg cannot take reached the client")

    logged = []

    class Record(logging.Handler):
        def emit(self, record):
            logged.append(record.getMessage())

    logging.getLogger("xagg").addHandler(Record())
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29541", rank=0, world_size=1)
    # Buckets xagg cannot take go to the process group, each reason logged once and counted.
    state = xagg.torch.XaggState(Untouchable())
    for _ in range(2):
        out = xagg.torch.allreduce_hook(state, Bucket(torch.full((4,), 3.0, dtype=torch.float64)))
        assert torch.equal(out.wait(), torch.full((4,), 3.0, dtype=torch.float64))
    assert state.fallback_reasons == {"dtype torch.float64 (xagg sums float32)": 2}, \
        state.fallback_reasons
    assert [m for m in logged if "not xagg" in m] == [
        "a gradient bucket goes through the process group's all_reduce, not xagg: dtype "
        "torch.float64 (xagg sums float32) (logged once; counted in fallback_reasons)"], logged
    assert state.failed is None and state.fallback_buckets == 2

    state = xagg.torch.XaggState(Unreachable())
    out = xagg.torch.allreduce_hook(state, Bucket(torch.full((10,), 4.0))).wait()
    assert torch.equal(out, torch.full((10,), 4.0)), out
    assert state.fallback_buckets == 1 and state.failed is not None
    assert state.failed.args[1] == "unreachable", state.failed.args
    out = xagg.torch.allreduce_hook(state, Bucket(torch.full((3,), 2.0))).wait()  # stays on gloo
    assert state.fallback_buckets == 2 and state.xagg_buckets == 0
    assert state.fallback_reasons == {"xagg failed earlier": 2}, state.fallback_reasons
    dist.destroy_process_group()
    print("fallback: ok")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), sys.argv[3])
        return
    if len(sys.argv) == 2 and sys.argv[1] == "--fallback":
        fallback()
        return
    if os.geteuid() != 0:
        print("needs root: namespaces and XDP")
        sys.exit(0)
    with Testbed(BUILD, 4, "py") as bed:
        socket = bed.socket
        env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", PYTHONPATH=str(BUILD / "python"))
        out = run(["/usr/bin/python3", __file__, "--fallback"]).stdout
        print(out.strip())
        assert "fallback: ok" in out

        # api: two workers
        bed.ctl("job", "create", "--id", "1", "--workers", "2", "--elems", str(1024 * 256))
        procs = [bed.spawn(r, ["/usr/bin/python3", __file__, "--worker", str(r), socket], env)
                 for r in range(2)]
        for out, _ in bed.finish(procs, "api worker", timeout=120):
            print("api:", out.strip())

        # training: gloo, then the xagg hook, same seed
        bed.ctl("job", "create", "--id", "2", "--workers", "4", "--elems", str(4096 * 256))
        results = {}
        for tag, port, extra in [("gloo", 29531, []),
                                 ("xagg", 29532, ["--xagg", f"address=10.77.0.100,job=2,socket={socket}"])]:
            procs = [bed.spawn(r, ["/usr/bin/python3", str(ROOT / "examples" / "train_mlp.py"),
                                   "--rank", str(r), "--workers", "4", "--master",
                                   f"10.77.0.1:{port}", "--local", f"10.77.0.{r + 1}",
                                   "--steps", str(STEPS), *extra], env)
                     for r in range(4)]
            results[tag] = last_json_line(bed.finish(procs, f"{tag} training", 300)[0][0])
        gloo, hooked = results["gloo"], results["xagg"]
        worst = max(abs(a - b) for a, b in zip(gloo["losses"], hooked["losses"]))
        print(f"training: worst loss difference {worst:.5f} (tolerance {LOSS_TOLERANCE}); "
              f"accuracy gloo {gloo['accuracy']:.4f} xagg {hooked['accuracy']:.4f}; "
              f"median step gloo {gloo['median_step_seconds'] * 1000:.1f} ms "
              f"xagg {hooked['median_step_seconds'] * 1000:.1f} ms")
        assert len(hooked["losses"]) == STEPS
        assert worst <= LOSS_TOLERANCE, worst
        assert abs(gloo["accuracy"] - hooked["accuracy"]) <= ACCURACY_MARGIN
        assert hooked["losses"][-1] < 0.6 * hooked["losses"][0], "it did not train"
        assert hooked["fallback_buckets"] == 0 and hooked["xagg_buckets"] >= STEPS, hooked
        print("PASSED")


if __name__ == "__main__":
    main()
