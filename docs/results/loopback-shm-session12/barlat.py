import time, statistics
from mpi4py import MPI
import nezha
w = MPI.COMM_WORLD
c = nezha.Communicator(config={"RAILS": "tcp,shm", "SOCKET_IFNAME": "lo"})
res = {"nezha": [], "mpi": []}
for rep in range(5):
    for name, f in (("nezha", c.barrier), ("mpi", w.Barrier)):
        for _ in range(200): f()
        t = time.perf_counter()
        for _ in range(3000): f()
        res[name].append(w.allreduce((time.perf_counter() - t) / 3000) / w.size)
if w.rank == 0:
    print({k: round(statistics.median(v) * 1e6, 2) for k, v in res.items()}, c.stats()["fast_path_calls"])
c.close()
