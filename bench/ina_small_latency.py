#!/usr/bin/env python
"""Small allreduce latency on one rail: nezha's TCP against the INA service, interleaved.

One process per rank holds three handles on the same rail and times each in turn at every
size (machine noise hits all alike); the table gives the median over repetitions, µs:

  tcp  nezha on the INA rail's interface as a TCP rail (recursive doubling, fast path)
  ina  nezha with NEZHA_INA_SMALL=on: every allreduce of one datagram whole on the service
       (TCP on --tcp-rail only for what INA cannot take; repeated calls: FastPath._call_ina)
  raw  InaClient.allreduce itself (its Python wrapper + the same C call)

Run inside a lab with an INA service on rail 1 (`nezha lab up --hosts 4 --rails 2 --ina 1`):

    nezha lab run -- python bench/ina_small_latency.py [--sizes 4,64,1024] [--reps 5]

Steering only: the lead's ratios come from `nezha bench compare --ina 1` (nezha-rail1 and
nezha-ina-small rows).
"""
import argparse
import os
import statistics
import time

import numpy as np
from mpi4py import MPI

import nezha
from nezha.rails.ina.client import InaClient


class _Raw:
    """The INA client alone (its own job on the service)."""

    def __init__(self, world, spin_us):
        self.c = InaClient(os.environ["NEZHA_INA_ADDR"].split(",")[0], secret=b"ina-small-bench",
                           rank=world.rank, size=world.size, tag=b"bench", timeout=5.0)
        self.c.set_spin(spin_us * 1e-6)

    def allreduce(self, buf):
        self.c.allreduce(buf)

    def close(self):
        self.c.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="4,64,1024", help="bytes, comma-separated")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--calls", type=int, default=1000, help="timed calls per sample")
    p.add_argument("--ina-rail", default="rail1", help="the interface of the INA rail")
    p.add_argument("--tcp-rail", default="rail0", help="the TCP rail beside INA in `ina`")
    p.add_argument("--systems", default="tcp,ina,raw")
    a = p.parse_args()
    world = MPI.COMM_WORLD
    names = a.systems.split(",")
    make = {
        "tcp": lambda: nezha.Communicator(rails=a.ina_rail),
        "ina": lambda: nezha.Communicator(rails=a.tcp_rail, config={
            "RAILS": "tcp,shm,ina", "INA_SMALL": "on"}),
        "raw": lambda: _Raw(world, float(os.environ.get("NEZHA_SPIN_US", "200"))),
    }
    comms = {n: make[n]() for n in names}
    sizes = [int(s) for s in a.sizes.split(",")]
    res = {}
    for _ in range(a.reps):
        for nbytes in sizes:
            buf = np.ones(max(1, nbytes // 4), np.float32)
            for n in names:
                c = comms[n]
                for _ in range(100):
                    c.allreduce(buf)
                world.Barrier()
                t = time.perf_counter()
                for _ in range(a.calls):
                    c.allreduce(buf)
                res.setdefault((n, nbytes), []).append((time.perf_counter() - t) / a.calls)
    if world.rank == 0:
        print(f"# small allreduce, {world.size} ranks, median of {a.reps} x {a.calls} calls, µs")
        print(f"# {'size':>6} " + " ".join(f"{n:>8}" for n in names) +
              ("   ina/tcp" if {"ina", "tcp"} <= set(names) else ""))
        for nbytes in sizes:
            med = {n: statistics.median(res[(n, nbytes)]) * 1e6 for n in names}
            ratio = f"   {med['ina'] / med['tcp']:7.2f}" if {"ina", "tcp"} <= set(names) else ""
            print(f"  {nbytes:>6} " + " ".join(f"{med[n]:>8.1f}" for n in names) + ratio,
                  flush=True)
    for c in comms.values():
        c.close()


if __name__ == "__main__":
    main()
