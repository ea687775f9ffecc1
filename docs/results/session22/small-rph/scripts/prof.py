"""Where a small allreduce's time goes with several ranks per host (issue 12)."""
import os, resource, sys, time
import numpy as np
from mpi4py import MPI
import nezha

W = MPI.COMM_WORLD
N = int(os.environ.get("PROF_CALLS", "3000"))
L = int(os.environ["PROF_L"])
rank, size = W.rank, W.size
host = rank // L


def timed(fn, n=N):
    if os.environ.get("PROF_OSU"):  # the OSU loop: a (nezha) barrier after each call, untimed
        for _ in range(200):
            fn(); comm.barrier()
        W.Barrier()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0); comm.barrier()
        return (np.mean(ts) * 1e6, np.median(ts) * 1e6, 0, 0)
    for _ in range(200):
        fn()
    W.Barrier()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    c0 = time.process_time()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t = time.perf_counter() - t0
    c = time.process_time() - c0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return (t / n * 1e6, c / n * 1e6, (r1.ru_nvcsw - r0.ru_nvcsw) / n,
            (r1.ru_nivcsw - r0.ru_nivcsw) / n)


def report(name, row):
    rows = W.gather(row, root=0)
    if rank == 0:
        a = np.array(rows)
        print(f"{name:28s} us/call {np.median(a[:,0]):7.1f} (max {a[:,0].max():7.1f})  cpu us/call/rank "
              f"{np.median(a[:,1]):6.1f}  vol cs/call {np.median(a[:,2]):5.2f}  invol {np.median(a[:,3]):5.2f}",
              flush=True)


x = np.ones(1, np.float32)
y = np.zeros(1, np.float32)
x2 = np.ones(1, np.float32)
y2 = np.zeros(1, np.float32)
comm = nezha.Communicator(W)
if rank == 0:
    print("algo 4B:", comm.algorithm_for(4), "1K:", comm.algorithm_for(1024), flush=True)
hostc = W.Split(host, rank)
leadc = W.Split(0 if rank % L == 0 else MPI.UNDEFINED, rank)
hcomm = nezha.Communicator(hostc)
lcomm = nezha.Communicator(leadc) if leadc != MPI.COMM_NULL else None
crossc = W.Split(rank % L, rank)
ccomm = nezha.Communicator(crossc)
def leaders(name, call):
    """us per call of call() among the leaders alone (the others wait), median over them."""
    if lcomm is not None:
        for _ in range(200):
            call()
        leadc.Barrier()
        t0 = time.perf_counter()
        for _ in range(N):
            call()
        row = ((time.perf_counter() - t0) / N * 1e6, 0, 0, 0)
    else:
        row = (np.nan, 0, 0, 0)
    comm.barrier()
    rows = W.gather(row, root=0)
    if rank == 0:
        print(f"{name:28s} us/call {np.nanmedian(np.array(rows)[:,0]):7.1f}", flush=True)


for rep in range(2):
    report("world nezha 4B", timed(lambda: comm.allreduce(x, y)))
    if os.environ.get("PROF_ONLY_WORLD"):
        continue
    report("world mpi(sm across hosts!) 4B", timed(lambda: W.Allreduce(x, y)))
    comm.planner.algo = "hier"
    report("world nezha hier 4B", timed(lambda: comm.allreduce(x2, y2)))
    comm.planner.algo = "auto"
    report("host-only nezha 4B", timed(lambda: hcomm.allreduce(x, y)))
    report("host-only mpi 4B", timed(lambda: hostc.Allreduce(x, y)))
    hcomm.planner.algo = "rd"
    report("host-only nezha rd 4B", timed(lambda: hcomm.allreduce(x2, y2)))
    hcomm.planner.algo = "auto"
    report("cross (all L at once) nezha", timed(lambda: ccomm.allreduce(x, y)))
    # leaders alone, the others asleep
    leaders("leaders nezha 4B", lambda: lcomm.allreduce(x, y))
    W.Barrier()
    leaders("leaders mpi 4B", lambda: leadc.Allreduce(x, y))
    if rank == 0:
        print("fast hits", comm.stats().get("fast_hits", comm._fast.hits), flush=True)
comm.close(); hcomm.close()
if lcomm: lcomm.close()
