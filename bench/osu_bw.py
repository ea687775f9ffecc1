#!/usr/bin/env python
"""OSU-style unidirectional bandwidth (osu_bw layout) from rank 0 to rank 1; MB/s = 1e6 B/s.

Each iteration posts a window of non-blocking sends (receives on rank 1), waits for all,
then rank 1 returns a 1-byte acknowledgement, as OSU does.
"""
import sys

import numpy as np

from _common import Case, Columns, parse_args, run_benchmark, time_loop


def prepare(be, size, dtype, args):
    """Send/receive buffer for `size` bytes; step is one window plus the acknowledgement."""
    count = size // dtype.itemsize
    buf, ack = np.ones(count, dtype), np.zeros(1, np.uint8)
    window = args.window_size

    def step():
        if be.rank == 0:
            for req in [be.isend(buf, 1) for _ in range(window)]:
                req.wait()
            be.recv(ack, 1)
        else:
            for req in [be.irecv(buf, 0) for _ in range(window)]:
                req.wait()
            be.send(ack, 0)

    def check():
        expect = (np.arange(count) % 7 + 1).astype(dtype)
        data = expect.copy() if be.rank == 0 else np.zeros(count, dtype)
        if be.rank == 0:
            be.send(data, 1)
        else:
            be.recv(data, 0)
        return np.array_equal(data, expect)

    return Case(step, check, count * dtype.itemsize * window)


def measure(be, case, iters, warm):
    """Windows synchronise through the acknowledgement; no barrier per iteration."""
    return time_loop(case.step, be.barrier, iters, warm, barrier_each=False)


def main(argv=None):
    """Entry point."""
    def extra(p):
        p.add_argument("-W", "--window-size", type=int, default=64, help="messages per window")
    args = parse_args(__doc__, "bw", argv, extra=extra)
    # osu_bw has no min/max latency columns; -f is accepted and ignored, as in OSU.
    cols = Columns(metric="Bandwidth (MB/s)", validate=args.validation,
                   percentiles=args.tail_lat or (), tail_unit="BW(MB/s)", bw=args.bw)
    from mpi4py import MPI
    if MPI.COMM_WORLD.size != 2:
        sys.exit("osu_bw.py needs exactly 2 ranks")
    run_benchmark("Bandwidth", "pt2pt", args, prepare, cols, measure=measure)


if __name__ == "__main__":
    main()
