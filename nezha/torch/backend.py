"""Registering "nezha" with torch.distributed."""
import torch.distributed as dist

from nezha.torch.process_group import BACKEND_NAME, ProcessGroupNezha


def create(common_opts, backend_opts=None):
    """torch's extended-API creator: the group's store, rank, size, timeout and name (one
    nezha communicator per group; subgroups get their own prefix store from torch)."""
    return ProcessGroupNezha(common_opts.store, common_opts.group_rank, common_opts.group_size,
                             common_opts.timeout, group_name=str(common_opts.group_id),
                             global_ranks=list(common_opts.global_ranks_in_group))


def register():
    """Make dist.init_process_group("nezha") work (idempotent; the torch.backends entry point)."""
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND_NAME, create, extended_api=True, devices=["cpu"])
