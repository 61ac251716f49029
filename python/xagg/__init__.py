# SPDX-License-Identifier: MIT
"""xagg: all-reduce through xagg aggregators (in-network gradient aggregation on servers).

    import numpy, xagg
    c = xagg.Client([{"address": "10.0.0.5", "job": 7, "socket": "/run/xagg/xaggd.sock"}],
                    rank=0, local_address="10.0.0.11")
    grads = numpy.ones(1 << 20, dtype=numpy.float32)
    c.allreduce(grads)            # in place: the sum over every worker of the job

CPU torch tensors: c.allreduce(t.numpy()) sums in place (numpy shares the tensor's memory).
xagg.torch has the torch.distributed backend "xagg" and the DistributedDataParallel
communication hook. docs/PYTHON.md is the manual.
"""
from ._xagg import AllReduce, Client, ClientError, create_job, delete_job

__all__ = ["AllReduce", "Client", "ClientError", "create_job", "delete_job"]
