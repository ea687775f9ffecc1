"""Per-op finish times inside one 4 B allreduce (instrumented engine, /work/hI-prof)."""
import os, time
import numpy as np
from mpi4py import MPI
import nezha
from nezha._core import engine as _eng

W = MPI.COMM_WORLD
L = int(os.environ["PROF_L"])
rank = W.rank
comm = nezha.Communicator(W)
x = np.ones(1, np.float32); y = np.zeros(1, np.float32)
for _ in range(3000):
    comm.allreduce(x, y)
W.Barrier()
rows, walls = [], []
OSU = os.environ.get("PROF_OSU")
for _ in range(1000):
    t = time.perf_counter_ns()
    comm.allreduce(x, y)
    walls.append(time.perf_counter_ns() - t)
    rows.append(_eng.prof(16))
    if OSU:
        comm.barrier()
st = np.array([r[:4] for r in rows], float)
nops = max(len([o for o in r[4] if o[0] or o[1]]) for r in rows)
ops = np.array([[o[0] for o in r[4]] for r in rows], float)
kinds = rows[-1][4]
names = {0: "send", 1: "recv", 2: "recv+red", 3: "red", 4: "hdr"}
out = [f"rank {rank} (local {rank % L}): wall med {np.median(walls)/1e3:.0f} us, progress start {np.median(st[:,0])/1e3:.1f} end {np.median(st[:,1])/1e3:.1f} us, yields {np.median(st[:,2]):.0f} polls(sleeps) {np.mean(st[:,3]):.2f}"]
n = comm.size
for i in range(16):
    if not (kinds[i][0] or kinds[i][1] or kinds[i][2]):
        continue
    ep = kinds[i][2]
    peer = ep % n if ep >= 0 else -1
    out.append(f"   op{i:2d} kind {kinds[i][1]} peer {peer:2d}: done at {np.median(ops[:,i])/1e3:7.1f} us (p90 {np.percentile(ops[:,i],90)/1e3:7.1f})")
allout = W.gather("\n".join(out), root=0)
if rank == 0:
    for r in (0, 1, L, L + 1, n - 1):
        print(allout[r], flush=True)
comm.close()
