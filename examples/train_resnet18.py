#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Data-parallel training of torchvision's resnet18 (11.2M parameters) three ways, one process
per worker, DistributedDataParallel in all three:

  --comm gloo      init_process_group("gloo"): the baseline;
  --comm backend   init_process_group("xagg") after `import xagg.torch`: the only change;
  --comm hook      gloo, and DDP's gradient buckets through xagg.torch.allreduce_hook.

The data: synthetic learnable images, 10 classes, each a fixed random 3x32x32 pattern (from
--seed) seen through heavy noise, so that accuracy climbs over the steps without saturating
quickly; every worker draws its own batches, and held-out images come from another stream of
the same patterns. xagg's settings come from XAGG_* variables (docs/PYTHON.md): for the backend,
XAGG_AGGREGATOR and the control socket, and rank 0 creates the job; for the hook, also XAGG_JOB.

Each worker prints one JSON line: its loss per step (the mean over workers), the median step
time and rank 0's held-out accuracy.

  train_resnet18.py --rank R --workers W --master IP:PORT --comm gloo|backend|hook
                    [--steps N] [--batch B] [--seed S] [--noise X]
"""
import argparse
import json
import time

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel


def images(patterns, sample_seed, n, noise):
    g = torch.Generator().manual_seed(sample_seed)
    labels = torch.randint(0, len(patterns), (n,), generator=g)
    return patterns[labels] + noise * torch.randn(n, *patterns.shape[1:], generator=g), labels


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--master", required=True)
    p.add_argument("--comm", choices=["gloo", "backend", "hook"], required=True)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--noise", type=float, default=4.0)
    p.add_argument("--held-out", type=int, default=2000)
    a = p.parse_args()
    torch.set_num_threads(1)  # one core's worth per worker: several share a machine in tests

    if a.comm == "backend":
        import xagg.torch  # noqa: F401 - registers the backend "xagg"
    dist.init_process_group("xagg" if a.comm == "backend" else "gloo",
                            init_method=f"tcp://{a.master}", rank=a.rank, world_size=a.workers)
    torch.manual_seed(a.seed)  # the same initial weights on every worker and in every run
    model = torchvision.models.resnet18(num_classes=10)
    ddp = DistributedDataParallel(model)
    state = None
    if a.comm == "hook":
        import xagg
        import xagg.torch
        aggregator, options, _ = xagg.torch.backend_settings()
        state = xagg.torch.XaggState(xagg.Client([aggregator], rank=a.rank, **options))
        ddp.register_comm_hook(state, xagg.torch.allreduce_hook)

    patterns = torch.randn(10, 3, 32, 32, generator=torch.Generator().manual_seed(a.seed))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.02, momentum=0.9)
    losses, step_times = [], []
    for step in range(a.steps):
        x, y = images(patterns, (a.seed * 1000 + a.rank) * 100000 + step, a.batch, a.noise)
        start = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        step_times.append(time.perf_counter() - start)
        mean = loss.detach().clone()
        dist.all_reduce(mean)  # with the backend, this goes through xagg too
        losses.append(mean.item() / a.workers)
    result = {"rank": a.rank, "comm": a.comm, "losses": losses,
              "median_step_seconds": sorted(step_times)[len(step_times) // 2]}
    if a.rank == 0:
        # Batch statistics, not BatchNorm's running averages: after a few dozen steps those
        # still lag the weights by far (with them, held-out accuracy sat below chance while the
        # training loss had halved). Batches of 250 held-out images are large enough.
        test_x, test_y = images(patterns, a.seed * 7 + 12345, a.held_out, a.noise)
        with torch.no_grad():
            predicted = torch.cat([model(test_x[i:i + 250]).argmax(1)
                                   for i in range(0, a.held_out, 250)])
        result["accuracy"] = (predicted == test_y).float().mean().item()
    if state is not None:
        result.update(xagg_buckets=state.xagg_buckets, fallback_buckets=state.fallback_buckets)
    if a.comm == "backend":
        pg = dist.distributed_c10d._get_default_group()
        result.update(xagg_allreduces=pg.xagg_allreduces, delegated=pg.delegated())
        del pg
    dist.barrier()  # every worker done before rank 0's group deletes the job it created
    print(json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
