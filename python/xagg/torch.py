# SPDX-License-Identifier: MIT
"""PyTorch through xagg, two ways (docs/PYTHON.md):

The torch.distributed backend "xagg", registered when this module is imported:

    import torch.distributed as dist
    import xagg.torch                                 # registers "xagg"
    dist.init_process_group("xagg", init_method=..., rank=rank, world_size=n)   # XAGG_* settings
    model = DistributedDataParallel(model)            # gradients summed by the aggregator

all_reduce of a float32 or int32 tensor with SUM or AVG goes through xagg; every other
collective, dtype and op goes to a gloo group the backend holds, counted and logged once by kind.
The aggregator and job come from XAGG_* environment variables (see `backend_settings`).

A DistributedDataParallel communication hook, on any process group:

    import xagg, xagg.torch
    client = xagg.Client([{"address": "10.0.0.5", "job": 7}], rank=rank, local_address=my_ip)
    model = DistributedDataParallel(model)                    # gloo process group, as usual
    model.register_comm_hook(xagg.torch.XaggState(client), xagg.torch.allreduce_hook)

Each bucket is summed through xagg with its index as priority (DDP fills buckets from the last
layer back; the highest index holds the first layers, which the next forward pass needs first),
then divided by the number of workers summed. If xagg fails (aggregator unreachable, this
worker evicted, ...), the hook logs it once, counts it, and from then on uses the process
group's own all_reduce: training goes on. A bucket on a GPU is staged through pinned host
memory. A bucket xagg cannot take (not float32) goes to the process group too, never silently:
each reason is logged the first time and counted in `state.fallback_reasons`.
"""
import collections
import logging
import os
import socket
import threading

import torch
import torch.distributed as dist

from . import ClientError, create_job

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
    """Sums a contiguous float32 (or int32) tensor in place over the job's workers; a
    torch.futures.Future of (tensor, report). Raises xagg.ClientError if it cannot start.

    xagg sums host memory: a tensor on a GPU is copied to pinned host memory (a blocking copy,
    after the kernels that produced it on its current stream), summed there, and copied back on
    that stream before the future completes."""
    host = tensor
    stream = None
    if tensor.device.type != "cpu":
        host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
        host.copy_(tensor)
        stream = torch.cuda.current_stream(tensor.device) if tensor.is_cuda else None
    pending = client.allreduce_async(host.numpy(), priority=priority)
    future = torch.futures.Future()

    def finish():
        try:
            report = pending.wait()
            if host is not tensor:
                if stream is not None:
                    with torch.cuda.stream(stream):
                        tensor.copy_(host)
                    stream.synchronize()
                else:
                    tensor.copy_(host)
            future.set_result((tensor, report))
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


# --- The torch.distributed backend "xagg" ------------------------------------------------------

def _local_address_towards(address):
    """The IPv4 this host sends from to reach `address` (what the kernel's routing picks)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((address, 9))  # UDP: no packet is sent
        return s.getsockname()[0]


def backend_settings(environ=None):
    """The backend's settings, read from the environment (docs/PYTHON.md lists them):

    XAGG_AGGREGATOR       the aggregator's data-plane IPv4 (required)
    XAGG_JOB              the job to join; unset: rank 0 creates one for the run (and deletes
                          it when the process group is destroyed) and hands its id to the others
                          through the rendezvous store
    XAGG_JOB_ELEMS        the created job's size in values (default 1048576: a window of it, any
                          tensor size runs through it)
    XAGG_CHUNK_ELEMS      the created job's chunk size: 768 or 2048 (jumbo, MTU 9000); unset:
                          the aggregator's default_chunk_elems (2048 where its MTU allows)
    XAGG_CONTROL_SOCKET   the daemon's Unix control socket (default /run/xagg/xaggd.sock), or
    XAGG_CONTROL_HOST     HOST:PORT of its TCP control API, with XAGG_TOKEN, XAGG_TLS_CA,
                          XAGG_TLS_CERT, XAGG_TLS_KEY, XAGG_TLS_PLAINTEXT=1
    XAGG_LOCAL_ADDRESS    this worker's IPv4 (default: the one routed towards the aggregator)
    LOCAL_RANK, LOCAL_WORLD_SIZE   (set by torchrun) ranks sharing this host: each sends from a
                          UDP port of its own, the job's group port + 1 + LOCAL_RANK
    XAGG_PORT             this worker's UDP port outright (instead of the above)
    XAGG_LOCAL_FIRST=1    reduce inside the host first: LOCAL_RANK 0 sends the host's sum as
                          the job's one member for the host (a job rank 0 creates is sized so)
    XAGG_WINDOW, XAGG_PARTITION_CHUNKS, XAGG_AUTOTUNE=0/1, XAGG_CONGESTION_CONTROL=0/1,
    XAGG_TIMEOUT_MS, XAGG_MAX_RETRIES   the client's options (docs/CLIENT.md)

    Returns (aggregator dict, client keyword arguments, job size for creation)."""
    env = os.environ if environ is None else environ
    if "XAGG_AGGREGATOR" not in env:
        raise ValueError("the xagg backend needs XAGG_AGGREGATOR (the aggregator's IPv4); "
                         "docs/PYTHON.md lists its settings")
    aggregator = {"address": env["XAGG_AGGREGATOR"]}
    for key, var in (("socket", "XAGG_CONTROL_SOCKET"), ("host", "XAGG_CONTROL_HOST"),
                     ("token", "XAGG_TOKEN"), ("ca", "XAGG_TLS_CA"), ("cert", "XAGG_TLS_CERT"),
                     ("key", "XAGG_TLS_KEY")):
        if env.get(var):
            aggregator[key] = env[var]
    if env.get("XAGG_TLS_PLAINTEXT") == "1":
        aggregator["plaintext"] = True
    if env.get("XAGG_JOB"):
        aggregator["job"] = int(env["XAGG_JOB"])
    options = {"local_address": env.get("XAGG_LOCAL_ADDRESS")
               or _local_address_towards(aggregator["address"])}
    for key, var, kind in (("window", "XAGG_WINDOW", int),
                           ("partition_chunks", "XAGG_PARTITION_CHUNKS", int),
                           ("timeout_ms", "XAGG_TIMEOUT_MS", int),
                           ("max_retries", "XAGG_MAX_RETRIES", int),
                           ("autotune", "XAGG_AUTOTUNE", lambda v: v == "1"),
                           ("congestion_control", "XAGG_CONGESTION_CONTROL", lambda v: v == "1"),
                           ("local_rank", "LOCAL_RANK", int),
                           ("local_ranks", "LOCAL_WORLD_SIZE", int),
                           ("port", "XAGG_PORT", int),
                           ("local_first", "XAGG_LOCAL_FIRST", lambda v: v == "1")):
        if env.get(var):
            options[key] = kind(env[var])
    sizing = {"gradient_elems": int(env.get("XAGG_JOB_ELEMS", 1 << 20)),
              "chunk_elems": int(env.get("XAGG_CHUNK_ELEMS", 0))}
    return aggregator, options, sizing


_JOB_KEY = "xagg/job"


def _create_backend(store, rank, world_size, timeout):
    """Backend "xagg"'s creator (torch.distributed calls it from init_process_group)."""
    try:
        from ._torch_backend import ProcessGroupXagg
    except ImportError as e:
        raise RuntimeError("the xagg backend's extension (xagg._torch_backend) is not built: "
                           "build xagg with libtorch-dev installed") from e
    aggregator, options, sizing = backend_settings()
    delegate = dist.ProcessGroupGloo(dist.PrefixStore("xagg/gloo", store), rank, world_size,
                                     timeout)
    owns_job = "job" not in aggregator
    if owns_job:
        if rank == 0:
            # With local-first reduction the job has one member a host.
            # (Without LOCAL_WORLD_SIZE the client refuses local-first, saying why.)
            members = (world_size // options.get("local_ranks", 1) if options.get("local_first")
                       else world_size)
            job = create_job(aggregator, members, **sizing)
            store.set(_JOB_KEY, str(job))
            log.info("xagg: created job %d for %d workers on %s", job, world_size,
                     aggregator["address"])
        aggregator["job"] = int(store.get(_JOB_KEY))  # waits for rank 0, within the timeout
    return ProcessGroupXagg(rank, world_size, delegate, [aggregator],
                            owns_job=owns_job and rank == 0, **options)


if not hasattr(dist.Backend, "XAGG"):
    dist.Backend.register_backend("xagg", _create_backend)
