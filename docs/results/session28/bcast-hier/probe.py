import os, sys, time, numpy as np
from mpi4py import MPI
import nezha
from nezha import failover
comm = nezha.Communicator()
acc = {"vote": 0.0, "n": 0}
orig = failover.Failover._vote
def timed(self, *a, **k):
    t = time.perf_counter(); r = orig(self, *a, **k); acc["vote"] += time.perf_counter() - t; acc["n"] += 1; return r
failover.Failover._vote = timed
n = int(sys.argv[1]) // 4
buf = np.ones(n, np.float32)
for _ in range(20): comm.broadcast(buf, 0)
acc["vote"] = 0; acc["n"] = 0
t = time.perf_counter()
for _ in range(100): comm.broadcast(buf, 0)
dt = (time.perf_counter() - t) / 100
print(f"rank {comm.rank} per call {dt*1e6:.0f} us vote {acc['vote']/max(acc['n'],1)*1e6:.0f} us x{acc['n']}", flush=True)
comm.close() if hasattr(comm, "close") else None
