"""How much faster an allreduce runs after the links idled (the lab's tbf buckets refill).

    nezha lab run -x NEZHA_SOCKET_IFNAME=rail0,rail1 -- python bench/idle_burst.py \
        [--size 1M] [--idle-ms 0,0.5,1.5,3,6,12] [--calls 20]

nezha sim's replay credits each rail a full token bucket after any idle, a model sync's
1.5 ms included (nezha/sim/benchloop.py); issue 16's equal-rails 512 KiB-1 MiB rows miss by
up to 13 % with that credit. This measures the credit: every rank does barrier, sleep(idle),
timed allreduce, for each idle length in turn (interleaved, --calls rounds), and rank 0
prints each idle's median call time (the slowest rank's) and its ratio to idle 0.
"""
import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import nezha
from _common import parse_size, report_json  # bench/ is on sys.path when run as a script


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="1M")
    p.add_argument("--idle-ms", default="0,0.5,1.5,3,6,12")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--json")
    a = p.parse_args()
    nbytes = parse_size(a.size)
    idles = [float(x) * 1e-3 for x in a.idle_ms.split(",")]
    world = MPI.COMM_WORLD
    comm = nezha.Communicator()
    buf = np.ones(nbytes // 4, np.float32)
    for _ in range(a.warmup):  # the model HOT for this size, as in a compare run
        comm.allreduce(buf)
        comm.barrier()
    times = {i: [] for i in idles}
    for _ in range(a.calls):
        for idle in idles:
            comm.barrier()
            if idle:
                time.sleep(idle)
            t0 = time.perf_counter()
            comm.allreduce(buf)
            times[idle].append(time.perf_counter() - t0)
    got = world.gather(times, root=0)
    if world.rank == 0:
        # the slowest rank's time per call, then the median over calls
        med = {i: statistics.median(max(g[i][k] for g in got) for k in range(a.calls)) * 1e6
               for i in idles}
        doc = {"nbytes": nbytes, "ranks": world.size, "rails": list(comm.rails),
               "calls": a.calls, "median_us": {f"{i * 1e3:g}": round(v, 1) for i, v in med.items()},
               "vs_idle0": {f"{i * 1e3:g}": round(v / med[idles[0]], 3) for i, v in med.items()},
               "model": comm.stats()["model"]["buckets"]}
        report_json(doc, a.json)
    comm.close()


if __name__ == "__main__":
    main()
