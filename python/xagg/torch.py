# SPDX-License-Identifier: MIT
"""A DistributedDataParallel communication hook that all-reduces gradient buckets through xagg.

    import xagg, xagg.torch
    client = xagg.Client([{"address": "10.0.0.5", "job": 7}], rank=rank, local_address=my_ip)
    model = DistributedDataParallel(model)                    # gloo process group, as usual
    model.register_comm_hook(xagg.torch.XaggState(client), xagg.torch.allreduce_hook)

Each bucket is summed through xagg with its index as priority (DDP fills buckets from the last
layer back; the highest index holds the first layers, which the next forward pass needs first),
then divided by the number of workers summed. If xagg fails (aggregator unreachable, this
worker evicted, ...), the hook logs it once, counts it, and from then on uses the process
group's own all_reduce: training goes on. A bucket xagg cannot take (not float32, or not in host
memory) goes to the process group too, never silently: each reason is logged the first time and
counted in `state.fallback_reasons`.
"""
import collections
import logging
import threading

import torch
import torch.distributed as dist

from . import ClientError

log = logging.getLogger("xagg")


class XaggState:
    """What the hook needs: the client, and the process group to fall back to."""

    def __init__(self, client, process_group=None):
        self.client = client
        self.process_group = process_group
        self.failed = None          # the error that made the hook fall back, if any
        self.fallback_buckets = 0   # buckets all-reduced by the process group instead
        self.fallback_reasons = collections.Counter()  # why, bucket by bucket
        self.xagg_buckets = 0
        self.partial_buckets = 0    # summed without an evicted worker


def _unsupported(tensor):
    """Why xagg cannot sum this bucket, or None."""
    if tensor.device.type != "cpu":
        # xagg sums host memory; staging GPU buckets through pinned host memory is not built yet.
        return f"{tensor.device.type} tensor (xagg sums host memory)"
    if tensor.dtype != torch.float32:
        return f"dtype {tensor.dtype} (xagg sums float32)"
    return None


def _fallback(state, tensor, reason):
    state.fallback_buckets += 1
    if state.fallback_reasons[reason] == 0:
        log.warning("a gradient bucket goes through the process group's all_reduce, not xagg: "
                    "%s (logged once; counted in fallback_reasons)", reason)
    state.fallback_reasons[reason] += 1
    group = state.process_group or dist.group.WORLD
    work = dist.all_reduce(tensor, group=group, async_op=True)
    size = dist.get_world_size(group)
    return work.get_future().then(lambda fut: fut.value()[0].div_(size))


def allreduce(client, tensor, priority=0):
    """Sums a contiguous CPU float32 (or int32) tensor in place over the job's workers; a
    torch.futures.Future of (tensor, report). Raises xagg.ClientError if it cannot start."""
    pending = client.allreduce_async(tensor.numpy(), priority=priority)
    future = torch.futures.Future()

    def finish():
        try:
            future.set_result((tensor, pending.wait()))
        except Exception as e:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(e)

    threading.Thread(target=finish, daemon=True).start()
    return future


def allreduce_hook(state, bucket):
    tensor = bucket.buffer()
    if state.failed is not None:
        return _fallback(state, tensor, "xagg failed earlier")
    reason = _unsupported(tensor)
    if reason is not None:
        return _fallback(state, tensor, reason)
    try:
        summed = allreduce(state.client, tensor, priority=bucket.index())
    except ClientError as e:
        return _give_up(state, e, tensor)

    def average(fut):
        try:
            t, report = fut.value()
        except ClientError as e:
            # The values may be half-summed and DDP cannot give them again: this step's
            # gradient is lost, and later buckets go through the process group.
            _give_up(state, e, None)
            raise
        state.xagg_buckets += 1
        state.partial_buckets += report["partial_chunks"] > 0
        return t.div_(report["contributors"] or state.client.workers)

    return summed.then(average)


def _give_up(state, error, tensor):
    if state.failed is None:
        state.failed = error
        log.error("xagg all-reduce failed (%s); using the process group's all_reduce from now on",
                  error)
    return _fallback(state, tensor, "xagg failed earlier") if tensor is not None else None
