#!/usr/bin/env python
"""OSU-style reduce-scatter latency (osu_reduce_scatter layout) for nezha, mpi and gloo.

Size is the whole send buffer, as in OSU; each rank keeps size/ranks bytes (equal blocks,
any remainder elements are left out), and algbw uses the send buffer (nccl-tests).
"""
import numpy as np

from _common import Case, Columns, parse_args, run_benchmark


def prepare(be, size, dtype, args):
    """Buffers for `size` bytes in total, the timed reduce-scatter and a validation pass."""
    block = size // dtype.itemsize // be.size
    send, recv = np.ones(block * be.size, dtype), np.zeros(block, dtype)

    def check():
        ramp = np.arange(block * be.size) % 7
        out = np.zeros(block, dtype)
        be.reduce_scatter((ramp + be.rank + 1).astype(dtype), out)
        full = ramp * be.size + be.size * (be.size + 1) // 2
        return np.array_equal(out, full[be.rank * block:(be.rank + 1) * block].astype(dtype))

    return Case(lambda: be.reduce_scatter(send, recv), check, send.nbytes)


def main(argv=None):
    """Entry point."""
    args = parse_args(__doc__, "collective", argv)
    cols = Columns(full=args.full, validate=args.validation, percentiles=args.tail_lat or (),
                   bw=args.bw)
    run_benchmark("Reduce_scatter Latency", "reduce_scatter", args, prepare, cols,
                  min_bytes=lambda nranks, item: nranks * item)


if __name__ == "__main__":
    main()
