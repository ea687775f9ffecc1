"""A DDP communication hook for users who keep Gloo (or another backend) as process group:
the gradient buckets go through nezha over every rail.

    ddp.register_comm_hook(None, nezha.torch.allreduce_hook)   # a communicator made lazily
    ddp.register_comm_hook(comm, nezha.torch.allreduce_hook)   # or your nezha.Communicator
"""
import threading

import torch
import torch.distributed as dist

from nezha.types import ReduceOp
from nezha.torch.tensors import as_buffer, check_device
from nezha.torch.work import Completer, NezhaWork

_lock = threading.Lock()
_state = {}  # id(comm) or "default" -> (comm, completer, submit lock)


def _default_comm():
    """A nezha communicator over the default group's ranks, bootstrapped through its store
    (every rank reaches its first bucket, so every rank makes it)."""
    import nezha
    from nezha.bootstrap.store import StoreBootstrap
    from torch.distributed import distributed_c10d as c10d
    store = dist.PrefixStore("nezha-hook/", c10d._get_default_store())
    pg = c10d._get_default_group()
    secs = c10d._get_default_timeout(dist.get_backend(pg)).total_seconds()
    return nezha.Communicator(StoreBootstrap(store, dist.get_rank(), dist.get_world_size(), secs))


def _resolve(state):
    key = "default" if state is None else id(state)
    with _lock:
        got = _state.get(key)
        if got is None:
            comm = _default_comm() if state is None else getattr(state, "comm", state)
            got = _state[key] = (comm, Completer(comm.timeout + 30.0, "ddp-hook"),
                                 threading.Lock())
        return got


def allreduce_hook(state, bucket):
    """Average the bucket over every rank with nezha; the returned future completes by
    itself (a completion thread), so backward overlaps with communication.

    state: None (a communicator over the default group, made at the first bucket), a
    nezha.Communicator, or a ProcessGroupNezha.
    """
    comm, completer, lock = _resolve(state)
    t = bucket.buffer()
    check_device(t, "the DDP gradient bucket")
    op = ReduceOp.AVG if t.dtype.is_floating_point else ReduceOp.SUM
    work = NezhaWork(t, "ddp bucket allreduce")
    with lock:
        req = comm.iallreduce(as_buffer(t), op=op)
    completer.track(work, [req])
    return work.get_future()


def forget(state=None):
    """Drop the hook's communicator and thread for state (closing the lazily made one)."""
    key = "default" if state is None else id(state)
    with _lock:
        got = _state.pop(key, None)
    if got is not None:
        got[1].stop()
        if state is None:
            got[0].close()
