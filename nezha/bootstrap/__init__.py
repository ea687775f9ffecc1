"""Rank discovery and the endpoint exchange: mpi4py, or torchrun-style environment."""
import os
import sys

from nezha.bootstrap.base import Bootstrap

_MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "PMI_RANK",
            "PMI_FD", "PMIX_NAMESPACE", "MV2_COMM_WORLD_SIZE")
_TORCH_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def discover(mpi_comm=None, timeout=30.0):
    """The bootstrap for this process: the given mpi4py communicator, an MPI launch,
    a torchrun-style environment, MPI the process already initialised, or a single
    process (in that order). A Bootstrap instance (e.g.
    nezha.bootstrap.store.StoreBootstrap) is returned as it is."""
    if isinstance(mpi_comm, Bootstrap):
        return mpi_comm
    if mpi_comm is not None:
        from nezha.bootstrap.mpi import MPIBootstrap
        return MPIBootstrap(mpi_comm)
    if any(k in os.environ for k in _MPI_ENV):
        from nezha.bootstrap.mpi import MPIBootstrap
        return MPIBootstrap(None)
    if all(k in os.environ for k in _TORCH_ENV):
        from nezha.bootstrap.env import EnvBootstrap
        return EnvBootstrap.from_environ(timeout=timeout)
    if _mpi_initialized():
        from nezha.bootstrap.mpi import MPIBootstrap
        return MPIBootstrap(None)
    # No launcher: a world of one, without MPI_Init. A singleton MPI_Init gains nothing
    # here and Open MPI 5.0.x leaves its 16 MiB /dev/shm/sm_segment.* behind after it
    # (open-mpi/ompi#13261; docs/results/session31/shm-leak)
    from nezha.bootstrap.base import SingleBootstrap
    return SingleBootstrap()


def _mpi_initialized():
    """Whether this process already initialised MPI through mpi4py (never imports it)."""
    mpi = sys.modules.get("mpi4py.MPI")
    try:
        return bool(mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized())
    except Exception:  # a broken or stub mpi4py: as if absent
        return False
