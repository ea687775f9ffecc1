"""Communication backends measured by the OSU-style benchmarks: nezha, MPI (mpi4py) and Gloo.

Every backend exposes the same call shape on numpy buffers, so the timing core never
needs to know which library runs underneath. All three are launched by mpirun; mpi4py's
COMM_WORLD (``backend.world``) is also used, outside the timed region, to agree on
iteration counts and to reduce statistics.
"""
import os
import socket

import numpy as np
from mpi4py import MPI

BACKENDS = ("nezha", "mpi", "gloo")


class _Done:
    """Request for an operation that already completed (blocking fallback)."""

    def wait(self):
        """Nothing to wait for."""


class MpiBackend:
    """mpi4py buffer collectives on COMM_WORLD."""

    name = "mpi"

    def __init__(self, args):
        self.world = MPI.COMM_WORLD
        self.rank, self.size = self.world.rank, self.world.size
        self.library = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
        btl = os.environ.get("OMPI_MCA_btl", "default btl")
        ifs = os.environ.get("OMPI_MCA_btl_tcp_if_include", "any")
        self.rails = [f"btl={btl} if={ifs}"]

    def allreduce(self, sendbuf, recvbuf=None):
        """Sum-allreduce; in place when recvbuf is None."""
        if recvbuf is None:
            self.world.Allreduce(MPI.IN_PLACE, sendbuf, op=MPI.SUM)
        else:
            self.world.Allreduce(sendbuf, recvbuf, op=MPI.SUM)

    def bcast(self, buf, root=0):
        """Broadcast buf from root."""
        self.world.Bcast(buf, root=root)

    def allgather(self, sendbuf, recvbuf):
        """Gather every rank's sendbuf into recvbuf on all ranks."""
        self.world.Allgather(sendbuf, recvbuf)

    def reduce_scatter(self, sendbuf, recvbuf):
        """Sum-reduce sendbuf and leave block `rank` in recvbuf."""
        self.world.Reduce_scatter_block(sendbuf, recvbuf, op=MPI.SUM)

    def reduce(self, sendbuf, recvbuf, root=0):
        """Sum-reduce to root."""
        self.world.Reduce(sendbuf, recvbuf, op=MPI.SUM, root=root)

    def barrier(self):
        """Synchronise all ranks."""
        self.world.Barrier()

    def send(self, buf, dest):
        """Blocking send."""
        self.world.Send(buf, dest=dest)

    def recv(self, buf, source):
        """Blocking receive."""
        self.world.Recv(buf, source=source)

    def isend(self, buf, dest):
        """Non-blocking send; returns an object with wait()."""
        return _MpiRequest(self.world.Isend(buf, dest=dest))

    def irecv(self, buf, source):
        """Non-blocking receive; returns an object with wait()."""
        return _MpiRequest(self.world.Irecv(buf, source=source))

    def algorithm_for(self, nbytes, coll="allreduce"):
        """MPI picks its own algorithm."""
        return "library default"

    def stats(self):
        """No transport statistics."""
        return {}

    def close(self):
        """Nothing to release (MPI finalises at exit)."""


class _MpiRequest:
    def __init__(self, req):
        self._req = req

    def wait(self):
        """Complete the request."""
        self._req.Wait()


class GlooBackend:
    """torch.distributed with the Gloo backend, on tensors that share the numpy buffers."""

    name = "gloo"

    def __init__(self, args):
        import datetime

        import torch
        import torch.distributed as dist

        self.world = MPI.COMM_WORLD
        self.rank, self.size = self.world.rank, self.world.size
        self._torch, self._dist = torch, dist
        port = None
        if self.rank == 0:
            # Bind to port 0 to let the kernel pick a free port; a tiny race window is acceptable.
            with socket.socket() as s:
                s.bind((args.gloo_addr, 0))
                port = s.getsockname()[1]
        port = self.world.bcast(port, root=0)
        os.environ["MASTER_ADDR"] = args.gloo_addr
        os.environ["MASTER_PORT"] = str(port)
        os.environ["GLOO_SOCKET_IFNAME"] = args.gloo_ifname
        dist.init_process_group("gloo", rank=self.rank, world_size=self.size,
                                timeout=datetime.timedelta(seconds=args.timeout))
        self.library = f"torch {torch.__version__} gloo"
        self.rails = [args.gloo_ifname]
        # Newer torch renamed the *_into_tensor collectives; use whichever exists.
        self._allgather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        self._reduce_scatter = (getattr(dist, "reduce_scatter_single", None)
                                or dist.reduce_scatter_tensor)

    def _t(self, buf):
        return self._torch.from_numpy(buf)

    def allreduce(self, sendbuf, recvbuf=None):
        """Sum-allreduce; Gloo is in-place only, so out-of-place pays one copy."""
        if recvbuf is None:
            self._dist.all_reduce(self._t(sendbuf))
        else:
            np.copyto(recvbuf, sendbuf)
            self._dist.all_reduce(self._t(recvbuf))

    def bcast(self, buf, root=0):
        """Broadcast buf from root."""
        self._dist.broadcast(self._t(buf), src=root)

    def allgather(self, sendbuf, recvbuf):
        """Gather every rank's sendbuf into recvbuf on all ranks."""
        self._allgather(self._t(recvbuf), self._t(sendbuf))

    def reduce_scatter(self, sendbuf, recvbuf):
        """Sum-reduce sendbuf and leave block `rank` in recvbuf."""
        self._reduce_scatter(self._t(recvbuf), self._t(sendbuf))

    def reduce(self, sendbuf, recvbuf, root=0):
        """Sum-reduce to root; Gloo reduces in place, so recvbuf is scratch on every rank."""
        np.copyto(recvbuf, sendbuf)
        self._dist.reduce(self._t(recvbuf), dst=root)

    def barrier(self):
        """Synchronise all ranks."""
        self._dist.barrier()

    def send(self, buf, dest):
        """Blocking send."""
        self._dist.send(self._t(buf), dst=dest)

    def recv(self, buf, source):
        """Blocking receive."""
        self._dist.recv(self._t(buf), src=source)

    def isend(self, buf, dest):
        """Non-blocking send; returns an object with wait()."""
        return self._dist.isend(self._t(buf), dst=dest)

    def irecv(self, buf, source):
        """Non-blocking receive; returns an object with wait()."""
        return self._dist.irecv(self._t(buf), src=source)

    def algorithm_for(self, nbytes, coll="allreduce"):
        """Gloo's ProcessGroup picks its own algorithm."""
        return "library default"

    def stats(self):
        """No transport statistics."""
        return {}

    def close(self):
        """Tear down the process group."""
        self._dist.destroy_process_group()


class NezhaBackend:
    """nezha.Communicator, bootstrapped from mpi4py COMM_WORLD."""

    name = "nezha"

    def __init__(self, args):
        import nezha

        self.world = MPI.COMM_WORLD
        self._nezha = nezha
        self.comm = nezha.Communicator()
        self.rank, self.size = self.comm.rank, self.comm.size
        self.library = f"nezha {nezha.__version__}"
        self.rails = list(self.comm.rails)

    def allreduce(self, sendbuf, recvbuf=None):
        """Sum-allreduce; in place when recvbuf is None."""
        self.comm.allreduce(sendbuf, recvbuf, op=self._nezha.SUM)

    def bcast(self, buf, root=0):
        """Broadcast buf from root."""
        self.comm.broadcast(buf, root=root)

    def allgather(self, sendbuf, recvbuf):
        """Gather every rank's sendbuf into recvbuf on all ranks."""
        self.comm.allgather(sendbuf, recvbuf)

    def reduce_scatter(self, sendbuf, recvbuf):
        """Sum-reduce sendbuf and leave block `rank` in recvbuf."""
        self.comm.reduce_scatter(sendbuf, recvbuf, op=self._nezha.SUM)

    def reduce(self, sendbuf, recvbuf, root=0):
        """Sum-reduce to root."""
        self.comm.reduce(sendbuf, recvbuf, op=self._nezha.SUM, root=root)

    def barrier(self):
        """Synchronise all ranks."""
        self.comm.barrier()

    def send(self, buf, dest):
        """Blocking send."""
        self.comm.send(buf, dest)

    def recv(self, buf, source):
        """Blocking receive."""
        self.comm.recv(buf, source)

    def isend(self, buf, dest):
        """Non-blocking send when nezha has one, else a blocking send (in-order, so no deadlock)."""
        if hasattr(self.comm, "isend"):
            return self.comm.isend(buf, dest)
        self.comm.send(buf, dest)
        return _Done()

    def irecv(self, buf, source):
        """Non-blocking receive when nezha has one, else a blocking receive."""
        if hasattr(self.comm, "irecv"):
            return self.comm.irecv(buf, source)
        self.comm.recv(buf, source)
        return _Done()

    def algorithm_for(self, nbytes, coll="allreduce"):
        """The algorithm nezha would pick for nbytes ("auto" if it does not say)."""
        fn = getattr(self.comm, "algorithm_for", None)
        if fn is None:
            return "auto"
        try:
            return str(fn(nbytes, coll=coll))
        except TypeError:   # an algorithm_for(nbytes) without coll only speaks for allreduce
            return str(fn(nbytes)) if coll == "allreduce" else "auto"

    def stats(self):
        """nezha's own counters (per-rail bytes, ...)."""
        return dict(self.comm.stats())

    def close(self):
        """Close the communicator."""
        self.comm.close()


def make_backend(args):
    """Create the backend named by args.backend."""
    cls = {"nezha": NezhaBackend, "mpi": MpiBackend, "gloo": GlooBackend}[args.backend]
    return cls(args)
