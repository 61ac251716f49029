#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch's gloo all_reduce, the baseline bench/run measures xagg against: one process per
worker (each in its network namespace), rendezvous over TCP at rank 0's address. Prints one
JSON line: median and best seconds per all_reduce, every iteration's time, and the process's CPU
time in them (every thread's: gloo's included)."""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--master", required=True, help="IPV4:PORT of rank 0")
    p.add_argument("--elems", type=int, required=True, help="float32 values per tensor")
    p.add_argument("--iterations", type=int, default=5)
    a = p.parse_args()
    dist.init_process_group("gloo", init_method=f"tcp://{a.master}", rank=a.rank,
                            world_size=a.workers)
    t = torch.full((a.elems,), float(a.rank + 1), dtype=torch.float32)
    dist.all_reduce(t)  # warm-up: connections and buffers
    times, cpu = [], 0.0
    for _ in range(a.iterations):
        t.fill_(float(a.rank + 1))
        dist.barrier()
        start, cpu_start = time.perf_counter(), time.process_time()
        dist.all_reduce(t)
        times.append(time.perf_counter() - start)
        cpu += time.process_time() - cpu_start
    expected = a.workers * (a.workers + 1) / 2
    print(json.dumps({"median_seconds": statistics.median(times), "best_seconds": min(times),
                      "times": times, "cpu_seconds": cpu,
                      "exact": bool(torch.all(t == expected))}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
