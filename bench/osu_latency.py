#!/usr/bin/env python
"""OSU-style ping-pong latency (osu_latency layout) between ranks 0 and 1; one-way = RTT/2."""
import sys

import numpy as np

from _common import Case, Columns, parse_args, run_benchmark, time_loop


def prepare(be, size, dtype, args):
    """Ping-pong buffer for `size` bytes; step is one round trip."""
    count = size // dtype.itemsize
    buf = np.ones(count, dtype)
    peer = 1 - be.rank

    def step():
        if be.rank == 0:
            be.send(buf, peer)
            be.recv(buf, peer)
        else:
            be.recv(buf, peer)
            be.send(buf, peer)

    def check():
        expect = (np.arange(count) % 7 + 1).astype(dtype)
        data = expect.copy() if be.rank == 0 else np.zeros(count, dtype)
        if be.rank == 0:
            be.send(data, peer)
        else:
            be.recv(data, peer)
        return np.array_equal(data, expect)

    return Case(step, check, count * dtype.itemsize)


def measure(be, case, iters, warm):
    """Ping-pong needs no barrier per iteration; report one-way time = round trip / 2."""
    return time_loop(case.step, be.barrier, iters, warm, barrier_each=False) / 2


def main(argv=None):
    """Entry point."""
    args = parse_args(__doc__, "latency", argv)
    cols = Columns(full=args.full, validate=args.validation, percentiles=args.tail_lat or (),
                   bw=args.bw)
    from mpi4py import MPI
    if MPI.COMM_WORLD.size != 2:
        sys.exit("osu_latency.py needs exactly 2 ranks")
    run_benchmark("Latency", "pt2pt", args, prepare, cols, measure=measure,
                  min_bytes=lambda nranks, item: 0)


if __name__ == "__main__":
    main()
