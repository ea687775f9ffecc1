#!/usr/bin/env python
"""OSU-style allgather latency (osu_allgather layout) for the nezha, mpi and gloo backends.

Size is the per-rank contribution, as in OSU; algbw uses the gathered total (nccl-tests).
"""
import numpy as np

from _common import Case, Columns, parse_args, run_benchmark


def prepare(be, size, dtype, args):
    """Buffers for `size` bytes per rank, the timed allgather and a validation pass."""
    count = size // dtype.itemsize
    send, recv = np.ones(count, dtype), np.zeros(count * be.size, dtype)

    def check():
        ramp = np.arange(count) % 7
        out = np.zeros(count * be.size, dtype)
        be.allgather((ramp + be.rank + 1).astype(dtype), out)
        expect = np.concatenate([ramp + r + 1 for r in range(be.size)]).astype(dtype)
        return np.array_equal(out, expect)

    return Case(lambda: be.allgather(send, recv), check, recv.nbytes)


def main(argv=None):
    """Entry point."""
    args = parse_args(__doc__, "collective", argv)
    cols = Columns(full=args.full, validate=args.validation, percentiles=args.tail_lat or (),
                   bw=args.bw)
    run_benchmark("Allgather Latency", "allgather", args, prepare, cols)


if __name__ == "__main__":
    main()
