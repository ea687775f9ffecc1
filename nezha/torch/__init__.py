"""PyTorch integration: `import nezha.torch` registers the torch.distributed backend "nezha".

    import nezha.torch, torch.distributed as dist
    dist.init_process_group("nezha")           # under torchrun, as with "gloo"
    nezha.torch.init_process_group()           # the same under mpirun too (RANK from MPI)

or keep Gloo and send DDP's gradient buckets through nezha:

    ddp.register_comm_hook(None, nezha.torch.allreduce_hook)
"""
from nezha.torch.backend import create, register
from nezha.torch.hook import allreduce_hook
from nezha.torch.launch import env_from_mpi, init_process_group
from nezha.torch.process_group import BACKEND_NAME, ProcessGroupNezha
from nezha.torch.work import NezhaWork

register()

__all__ = ["BACKEND_NAME", "ProcessGroupNezha", "NezhaWork", "allreduce_hook", "create",
           "env_from_mpi", "init_process_group", "register"]
