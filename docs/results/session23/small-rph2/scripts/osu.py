"""OSU loop of small allreduces with several ranks per host (issue 12): nezha barrier after
each call (untimed), as bench/ranks_per_host.py does; prints mean (median) us per size."""
import os, resource, time
import numpy as np
from mpi4py import MPI
import nezha

W = MPI.COMM_WORLD
N = int(os.environ.get("OSU_CALLS", "2000"))
SIZES = [int(s) for s in os.environ.get("OSU_SIZES", "4").split(",")]
comm = nezha.Communicator(W)
out = []
for nb in SIZES:
    x = np.ones(max(nb // 4, 1), np.float32); y = np.zeros_like(x)
    for _ in range(200):
        comm.allreduce(x, y); comm.barrier()
    W.Barrier()
    ts = np.empty(N)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    for i in range(N):
        t0 = time.perf_counter(); comm.allreduce(x, y); ts[i] = time.perf_counter() - t0
        comm.barrier()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    assert y[0] == W.size, y[0]
    rows = W.gather((ts.mean() * 1e6, np.median(ts) * 1e6, (r1.ru_nvcsw - r0.ru_nvcsw) / N), root=0)
    if W.rank == 0:
        a = np.array(rows)
        L = int(os.environ.get("OSU_L", "1"))
        lead = a[::L, 2].mean(); other = np.delete(a[:, 2], np.s_[::L]).mean() if L > 1 else 0
        out.append(f"{nb}B mean {a[:,0].mean():6.1f} med {np.median(a[:,1]):6.1f} vcs/call lead {lead:.2f} other {other:.2f}")
if W.rank == 0:
    print("osu", comm.algorithm_for(4), comm.algorithm_for(1024), " | ".join(out), flush=True)
comm.close()
