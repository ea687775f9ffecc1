"""Bootstrap through mpi4py: rank discovery and the endpoint exchange, never the data path."""
import secrets

from nezha.bootstrap.base import Bootstrap, job_secret_from_env


class MPIBootstrap(Bootstrap):
    """Rank, size and local rank from an mpi4py communicator (COMM_WORLD by default)."""

    kind = "mpi"

    def __init__(self, comm=None):
        from mpi4py import MPI
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank = node.Get_rank()
        node.Free()
        # MPI is trusted to carry the secret; an explicit NEZHA_JOB_SECRET wins.
        secret = job_secret_from_env()
        if secret is None:
            secret = self.comm.bcast(secrets.token_bytes(32) if self.rank == 0 else None, root=0)
        self.secret = secret

    def allgather(self, obj):
        """mpi4py's object allgather."""
        return self.comm.allgather(obj)
