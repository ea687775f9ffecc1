#!/usr/bin/env python
"""Small-message allreduce latency, nezha on each rail alone and on all rails, interleaved.

One process per rank holds one communicator per system; each repetition times every system
at every size in turn (so that machine noise hits all of them alike), and the table gives
the median over repetitions and the ratios to the best single rail and to Open MPI
(mpi4py's Allreduce over the same COMM_WORLD, timed alike). Run inside the lab:

    nezha lab run --mca btl_tcp_if_include rail0 -- python bench/small_messages.py \
        [--sizes 4,1024,8192] [--reps 7] [--calls 2000]

(Open MPI's own traffic goes over the lab's unshaped mgmt network unless told otherwise:
the --mca puts it on rail 0, as the comparison suite's mpi-rail0.)
"""
import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import nezha


class _Mpi:
    def __init__(self, world):
        self.world = world

    def allreduce(self, buf):
        self.world.Allreduce(MPI.IN_PLACE, buf)

    def close(self):
        pass


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="4,1024,8192", help="bytes, comma-separated")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--calls", type=int, default=2000, help="timed calls per sample")
    p.add_argument("--rails", default="rail0,rail1")
    a = p.parse_args()
    world = MPI.COMM_WORLD
    rails = a.rails.split(",")
    systems = [(r, r, {}) for r in rails]
    systems += [("all", a.rails, {}), ("all-nofo", a.rails, {"FAILOVER": "n"})]
    comms = [(name, nezha.Communicator(rails=r, config=cfg)) for name, r, cfg in systems]
    # Open MPI itself (mpi4py, in place, as the comparison suite's "mpi" systems call it)
    systems.append(("mpi", None, {}))
    comms.append(("mpi", _Mpi(world)))
    sizes = [int(s) for s in a.sizes.split(",")]
    res = {}
    for _ in range(a.reps):
        for nbytes in sizes:
            buf = np.ones(max(1, nbytes // 4), np.float32)
            for name, comm in comms:
                for _ in range(100):
                    comm.allreduce(buf)
                world.Barrier()
                t = time.perf_counter()
                for _ in range(a.calls):
                    comm.allreduce(buf)
                res.setdefault((name, nbytes), []).append((time.perf_counter() - t) / a.calls)
    if world.rank == 0:
        print(f"# nezha small-message allreduce, {world.size} ranks, median of {a.reps} x "
              f"{a.calls} calls, µs; mpi = Open MPI (mpi4py Allreduce, in place)")
        print(f"# {'size':>6} " + " ".join(f"{n:>10}" for n, _, _ in systems) +
              "   all/best-rail   all/mpi")
        for nbytes in sizes:
            med = {n: statistics.median(res[(n, nbytes)]) * 1e6 for n, _, _ in systems}
            best = min(med[r] for r in rails)
            print(f"  {nbytes:>6} " + " ".join(f"{med[n]:>10.1f}" for n, _, _ in systems) +
                  f"   {med['all'] / best:15.2f}   {med['all'] / med['mpi']:7.2f}", flush=True)
    for _, comm in comms:
        comm.close()


if __name__ == "__main__":
    main()
