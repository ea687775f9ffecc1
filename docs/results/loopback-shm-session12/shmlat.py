import argparse, statistics, time, sys
import numpy as np
from mpi4py import MPI
import nezha

class _Mpi:
    def __init__(self, w): self.w = w
    def allreduce(self, buf): self.w.Allreduce(MPI.IN_PLACE, buf)
    def barrier(self): self.w.Barrier()
    def close(self): pass

p = argparse.ArgumentParser()
p.add_argument("--sizes", default="4,64,1024")
p.add_argument("--reps", type=int, default=7)
p.add_argument("--calls", type=int, default=3000)
p.add_argument("--systems", default="shm,mpi")
p.add_argument("--bar", default="none", help="none|own|mpi")
a = p.parse_args()
w = MPI.COMM_WORLD
comms = []
for s in a.systems.split(","):
    if s == "mpi": comms.append((s, _Mpi(w)))
    elif s == "shm": comms.append((s, nezha.Communicator(config={"RAILS": "tcp,shm", "SOCKET_IFNAME": "lo"})))
    elif s == "tcp": comms.append((s, nezha.Communicator(config={"RAILS": "tcp", "SOCKET_IFNAME": "lo"})))
sizes = [int(x) for x in a.sizes.split(",")]
res = {}
for _ in range(a.reps):
    for nb in sizes:
        buf = np.ones(max(1, nb // 4), np.float32)
        for name, c in comms:
            for _ in range(200): c.allreduce(buf)
            w.Barrier()
            if a.bar == "none":
                t = time.perf_counter()
                for _ in range(a.calls): c.allreduce(buf)
                dt = (time.perf_counter() - t) / a.calls
            else:
                bar = w.Barrier if (a.bar == "mpi" or name == "mpi") else c.barrier
                dt = 0.0
                for _ in range(a.calls):
                    t = time.perf_counter(); c.allreduce(buf); dt += time.perf_counter() - t
                    bar()
                dt /= a.calls
            res.setdefault((name, nb), []).append(w.allreduce(dt) / w.size)
if w.rank == 0:
    names = [n for n, _ in comms]
    print("# size " + " ".join(f"{n:>8}" for n in names) + "  (us, median of reps of mean over ranks)")
    for nb in sizes:
        med = {n: statistics.median(res[(n, nb)]) * 1e6 for n in names}
        print(f"{nb:>6} " + " ".join(f"{med[n]:8.2f}" for n in names) +
              ("  ratio shm/mpi %.2f" % (med['shm'] / med['mpi']) if 'shm' in med and 'mpi' in med else ""))
    for n, c in comms:
        if n != "mpi": print(n, getattr(c, "stats", lambda: {})())
for _, c in comms: c.close()
