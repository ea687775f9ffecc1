"""Read the ops of an engine Schedule (nezha/_core/engine.pyx) as a numpy record array.

The Schedule keeps its ops in a C array (nz_op_t, include/nezha/nezha_engine.h);
Schedule.ops_bytes() copies it out. The simulator needs each op's dependencies and flags,
so it reads the records with OP_DTYPE, checked against the engine's record size and
op_info(): if nz_op_t ever changes, this fails loudly instead of simulating something else.
"""
import numpy as np

from nezha._core import engine as _eng

# nz_op_t: ptr, src, nbytes, done, ep, dep[2], chan, kind, flags (48 bytes)
OP_DTYPE = np.dtype([("ptr", "<u8"), ("src", "<u8"), ("nbytes", "<u8"), ("done", "<u8"),
                     ("ep", "<i4"), ("dep0", "<i4"), ("dep1", "<i4"), ("chan", "<i2"),
                     ("kind", "u1"), ("flags", "u1")])
assert OP_DTYPE.itemsize == 48

SEND, RECV, RECV_REDUCE, RECV_HDR, LOCAL_REDUCE = 0, 1, 2, 3, 4
DEP_FULL, DEP_STARTED = 1, 2


class LayoutError(RuntimeError):
    """The engine's nz_op_t no longer looks as ops.py expects."""


def read_ops(sched):
    """A copy of sched's ops as a record array of OP_DTYPE (checked against op_info)."""
    if _eng.OP_BYTES != OP_DTYPE.itemsize:
        raise LayoutError(f"nz_op_t is {_eng.OP_BYTES} bytes, ops.py reads "
                          f"{OP_DTYPE.itemsize}")
    ops = np.frombuffer(sched.ops_bytes(), OP_DTYPE).copy()
    n = len(ops)
    for i in {0, n // 2, n - 1} if n else ():
        o = ops[i]
        if sched.op_info(i) != (o["kind"], o["ep"], o["nbytes"], o["done"], o["chan"]):
            raise LayoutError(f"nz_op_t layout changed: op {i} reads "
                              f"{tuple(o)}, op_info says {sched.op_info(i)}")
    return ops
