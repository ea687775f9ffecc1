"""Rank discovery and the endpoint exchange: mpi4py, or torchrun-style environment."""
import os

from nezha.bootstrap.base import Bootstrap

_MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "PMI_RANK")
_TORCH_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def discover(mpi_comm=None, timeout=30.0):
    """The bootstrap for this process: the given mpi4py communicator, an MPI launch,
    a torchrun-style environment, or a single process (in that order). A Bootstrap
    instance (e.g. nezha.bootstrap.store.StoreBootstrap) is returned as it is."""
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
    try:
        from nezha.bootstrap.mpi import MPIBootstrap
        return MPIBootstrap(None)
    except ImportError:
        from nezha.bootstrap.base import SingleBootstrap
        return SingleBootstrap()
