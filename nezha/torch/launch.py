"""torch's env:// rendezvous under mpirun: RANK, WORLD_SIZE and LOCAL_RANK from the MPI
launcher's environment (Open MPI, PMI, PMIx) when torchrun did not set them."""
import os

import torch.distributed as dist

_RANK = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
_SIZE = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
_LOCAL = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PALS_LOCAL_RANKID")


def _first(names):
    for n in names:
        if os.environ.get(n):
            return os.environ[n]
    return None


def env_from_mpi():
    """Set RANK, WORLD_SIZE, LOCAL_RANK from the MPI launcher's variables where missing;
    MASTER_ADDR and MASTER_PORT must come from you (mpirun -x MASTER_ADDR=host0 -x
    MASTER_PORT=29500). Returns True when it set anything."""
    changed = False
    for key, names in (("RANK", _RANK), ("WORLD_SIZE", _SIZE), ("LOCAL_RANK", _LOCAL)):
        v = _first(names)
        if key not in os.environ and v is not None:
            os.environ[key] = v
            changed = True
    return changed


def init_process_group(backend="nezha", **kwargs):
    """dist.init_process_group(backend, ...) under torchrun or mpirun alike."""
    env_from_mpi()
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing and "init_method" not in kwargs and "store" not in kwargs:
        raise RuntimeError(f"nezha: set {' and '.join(missing)} (under mpirun: mpirun -x "
                           "MASTER_ADDR=<rank 0's host> -x MASTER_PORT=29500 ...)")
    return dist.init_process_group(backend, **kwargs)
