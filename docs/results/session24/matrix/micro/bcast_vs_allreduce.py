"""Why a small broadcast on two rails costs more than an allreduce of the same size: both are
recursive doubling with failover (the broadcast ORs zeros in), so they should cost alike.
One job, interleaved rounds (A B B A ...), barrier after each call (the OSU loop), per-call
µs: median over rounds of each round's mean over ranks. Run in the lab:
  nezha lab run -- python bcast_vs_allreduce.py [sizes]"""
import sys
import time

import numpy as np
from mpi4py import MPI

import nezha

world = MPI.COMM_WORLD
comm = nezha.Communicator()
sizes = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "4,1024,4096").split(",")]
CALLS, ROUNDS = 200, 6


def loop(step):
    for _ in range(20):
        step()
        comm.barrier()
    t = 0.0
    for _ in range(CALLS):
        t0 = time.perf_counter()
        step()
        t += time.perf_counter() - t0
        comm.barrier()
    return world.allreduce(t / CALLS) / world.size * 1e6


for size in sizes:
    n = size // 4
    a = np.ones(n, np.float32)
    b = np.ones(n, np.float32)
    cases = {"allreduce": lambda: comm.allreduce(a, op=nezha.SUM),
             "broadcast": lambda: comm.broadcast(b, root=0)}
    got = {k: [] for k in cases}
    v0 = comm.stats().get("votes", 0)
    for r in range(ROUNDS):
        order = list(cases) if r % 4 in (0, 3) else list(cases)[::-1]
        for k in order:
            got[k].append(loop(cases[k]))
    st = comm.stats()
    if comm.rank == 0:
        print(f"{size:>7} B  " + "  ".join(f"{k} {np.median(v):7.1f} us" for k, v in got.items())
              + f"  broadcast/allreduce {np.median(got['broadcast']) / np.median(got['allreduce']):.2f}"
              f"  votes {st.get('votes', 0) - v0}  fast {st.get('fast_path_calls')}", flush=True)
comm.close() if hasattr(comm, "close") else None
