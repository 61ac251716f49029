#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A small but real data-parallel training: an MLP classifying a synthetic data set (Gaussian
clusters in 32 dimensions, 10 classes, fixed by the seed), one process per worker with
torch.distributed (gloo for rendezvous and as the fallback), DistributedDataParallel, and, with
--xagg, the xagg communication hook: the two-line change.

Each worker prints one JSON line: its loss per step and the final accuracy on held-out data;
--plot (rank 0) draws the loss curves of this run and of --compare (another run's JSON line).

  train_mlp.py --rank R --workers W --master IP:PORT [--xagg address=IP,job=ID,socket=PATH]
               [--local IP] [--steps N] [--seed S] [--out FILE] [--plot PNG --compare FILE]
"""
import argparse
import json
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def dataset(seed, sample_seed, n, dim=32, classes=10):
    """Points around 10 class centers (fixed by `seed`), drawn by `sample_seed`; the clusters
    overlap, so a good model reaches about 90%, not 100%."""
    centers = torch.randn(classes, dim, generator=torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(sample_seed)
    labels = torch.randint(0, classes, (n,), generator=g)
    points = centers[labels] + torch.randn(n, dim, generator=g) * 2.2
    return points, labels


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--master", required=True)
    p.add_argument("--xagg", help="address=IP,job=ID,socket=PATH of the aggregator")
    p.add_argument("--local", help="this worker's IPv4 (with --xagg)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out")
    p.add_argument("--plot")
    p.add_argument("--compare")
    a = p.parse_args()

    dist.init_process_group("gloo", init_method=f"tcp://{a.master}", rank=a.rank,
                            world_size=a.workers)
    torch.manual_seed(a.seed)  # the same initial weights on every worker and in every run
    model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    ddp = DistributedDataParallel(model)
    if a.xagg:
        import xagg
        import xagg.torch
        spec = dict(item.split("=", 1) for item in a.xagg.split(","))
        spec["job"] = int(spec["job"])
        client = xagg.Client([spec], rank=a.rank, local_address=a.local)
        state = xagg.torch.XaggState(client)
        ddp.register_comm_hook(state, xagg.torch.allreduce_hook)  # the xagg change

    x, y = dataset(a.seed, a.seed + 1, 20000)
    test_x, test_y = dataset(a.seed, a.seed + 2, 4000)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    losses, step_times = [], []
    g = torch.Generator().manual_seed(a.seed * 1000 + a.rank)  # each worker its own batches
    for step in range(a.steps):
        idx = torch.randint(0, len(x), (a.batch,), generator=g)
        start = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x[idx]), y[idx])
        loss.backward()
        opt.step()
        step_times.append(time.perf_counter() - start)
        # The loss every worker agrees on: the mean over the workers' batches.
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / a.workers)
    with torch.no_grad():
        accuracy = (model(test_x).argmax(1) == test_y).float().mean().item()
    result = {"rank": a.rank, "xagg": bool(a.xagg), "losses": losses, "accuracy": accuracy,
              "median_step_seconds": sorted(step_times)[len(step_times) // 2]}
    if a.xagg:
        result.update(xagg_buckets=state.xagg_buckets, fallback_buckets=state.fallback_buckets)
    line = json.dumps(result)
    print(line, flush=True)
    if a.out:
        open(a.out, "w").write(line + "\n")
    if a.plot and a.rank == 0:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plt.figure(figsize=(7, 4))
        plt.plot(losses, label="xagg hook" if a.xagg else "gloo")
        if a.compare:
            other = json.loads(open(a.compare).read())
            plt.plot(other["losses"], "--", label="xagg hook" if other["xagg"] else "gloo")
        plt.xlabel("step")
        plt.ylabel("training loss (mean over workers)")
        plt.legend()
        plt.tight_layout()
        plt.savefig(a.plot, dpi=100)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
