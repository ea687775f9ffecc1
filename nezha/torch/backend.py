"""Registering "nezha" with torch.distributed."""
import functools

import torch.distributed as dist

from nezha.torch.process_group import BACKEND_NAME, ProcessGroupNezha


def create(common_opts, backend_opts=None):
    """torch's extended-API creator: the group's store, rank, size, timeout and name (one
    nezha communicator per group; subgroups get their own prefix store from torch)."""
    return ProcessGroupNezha(common_opts.store, common_opts.group_rank, common_opts.group_size,
                             common_opts.timeout, group_name=str(common_opts.group_id),
                             global_ranks=list(common_opts.global_ranks_in_group))


def _batch_hook():
    """torch.distributed.batch_isend_irecv, for a nezha group, queued as one batch.

    torch calls a Python process group's isend/irecv one by one (its coalescing path is for
    C++ backends only), so the group cannot see where a batch ends. This wrapper tells it:
    the ops posted inside are queued together, in the order _flush_locked derives, when
    the list is done. Other groups go to torch's function unchanged."""
    import torch.distributed.distributed_c10d as c10d
    orig = c10d.batch_isend_irecv
    if getattr(orig, "_nezha", False):
        return

    @functools.wraps(orig)
    def batch_isend_irecv(p2p_op_list):
        pg = None
        try:
            pg = p2p_op_list[0].group
            if pg is None:
                pg = c10d._get_default_group()
        except Exception:  # torch's own checks report a bad list
            pg = None
        if not isinstance(pg, ProcessGroupNezha):
            return orig(p2p_op_list)
        with pg.batch():
            return orig(p2p_op_list)

    batch_isend_irecv._nezha = True
    c10d.batch_isend_irecv = batch_isend_irecv
    if getattr(dist, "batch_isend_irecv", None) is orig:
        dist.batch_isend_irecv = batch_isend_irecv


def register():
    """Make dist.init_process_group("nezha") work (idempotent; the torch.backends entry point)."""
    _batch_hook()
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND_NAME, create, extended_api=True, devices=["cpu"])
