#!/usr/bin/env python
"""OSU-style allreduce latency (osu_allreduce layout) for the nezha, mpi and gloo backends."""
import numpy as np

from _common import Case, Columns, parse_args, run_benchmark


def prepare(be, size, dtype, args):
    """Buffers for `size` bytes, the timed allreduce and a validation pass."""
    count = size // dtype.itemsize
    send, recv = np.ones(count, dtype), np.zeros(count, dtype)
    if args.in_place:
        # Zeros keep repeated in-place sums from overflowing or reaching inf.
        step = lambda: be.allreduce(recv)  # noqa: E731
    else:
        step = lambda: be.allreduce(send, recv)  # noqa: E731

    def check():
        # Small integers so float sums are exact whatever order the ranks add in.
        ramp = np.arange(count) % 7
        data = (ramp + be.rank + 1).astype(dtype)
        expect = (ramp * be.size + be.size * (be.size + 1) // 2).astype(dtype)
        out = np.zeros(count, dtype)
        if args.in_place:
            be.allreduce(data)
            out = data
        else:
            be.allreduce(data, out)
        return np.array_equal(out, expect)

    return Case(step, check, count * dtype.itemsize)


def main(argv=None):
    """Entry point."""
    args = parse_args(__doc__, "collective", argv)
    cols = Columns(full=args.full, validate=args.validation, percentiles=args.tail_lat or (),
                   bw=args.bw)
    run_benchmark("Allreduce Latency", "allreduce", args, prepare, cols)


if __name__ == "__main__":
    main()
