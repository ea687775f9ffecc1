#!/usr/bin/env python
"""OSU-style broadcast latency (osu_bcast layout, root 0) for the nezha, mpi and gloo backends."""
import numpy as np

from _common import Case, Columns, parse_args, run_benchmark


def prepare(be, size, dtype, args):
    """Buffer for `size` bytes, the timed broadcast from rank 0 and a validation pass."""
    count = size // dtype.itemsize
    buf = np.ones(count, dtype)

    def check():
        expect = (np.arange(count) % 7 + 1).astype(dtype)
        data = expect.copy() if be.rank == 0 else np.zeros(count, dtype)
        be.bcast(data, 0)
        return np.array_equal(data, expect)

    return Case(lambda: be.bcast(buf, 0), check, count * dtype.itemsize)


def main(argv=None):
    """Entry point."""
    args = parse_args(__doc__, "collective", argv)
    cols = Columns(full=args.full, validate=args.validation, percentiles=args.tail_lat or (),
                   bw=args.bw)
    run_benchmark("Broadcast Latency", "broadcast", args, prepare, cols)


if __name__ == "__main__":
    main()
