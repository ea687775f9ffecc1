"""Read the ops of an engine Schedule (nezha/_core/engine.pyx) as a numpy record array.

The Schedule keeps its ops in a C array (nz_op_t, include/nezha/nezha_engine.h) and shows
only (kind, endpoint, nbytes, done, channel) per op through op_info(); the simulator also
needs each op's dependencies and flags. Rather than change the engine, we read the array
where the object keeps it and check every op against op_info(): if the engine's layout
ever changes, this fails loudly instead of simulating something else.
"""
import ctypes

import numpy as np

# nz_op_t: ptr, src, nbytes, done, ep, dep[2], chan, kind, flags (48 bytes)
OP_DTYPE = np.dtype([("ptr", "<u8"), ("src", "<u8"), ("nbytes", "<u8"), ("done", "<u8"),
                     ("ep", "<i4"), ("dep0", "<i4"), ("dep1", "<i4"), ("chan", "<i2"),
                     ("kind", "u1"), ("flags", "u1")])
assert OP_DTYPE.itemsize == 48

SEND, RECV, RECV_REDUCE, RECV_HDR, LOCAL_REDUCE = 0, 1, 2, 3, 4
DEP_FULL, DEP_STARTED = 1, 2

# cdef class Schedule: PyObject head (16 bytes), vtable pointer, then its fields in
# declaration order: nz_op_t *ops, int32 nops, int32 cap, ...
_OPS_OFFSET = 24
_NOPS_OFFSET = 32


class LayoutError(RuntimeError):
    """The engine's Schedule no longer looks as ops.py expects."""


def read_ops(sched):
    """A copy of sched's ops as a record array of OP_DTYPE (checked against op_info)."""
    n = sched.nops
    if n == 0:
        return np.zeros(0, OP_DTYPE)
    base = id(sched)
    nops = ctypes.c_int32.from_address(base + _NOPS_OFFSET).value
    ptr = ctypes.c_uint64.from_address(base + _OPS_OFFSET).value
    if nops != n or not ptr:
        raise LayoutError(f"Schedule layout changed: nops at +{_NOPS_OFFSET} reads {nops}, "
                          f"the property says {n}")
    buf = (ctypes.c_char * (n * OP_DTYPE.itemsize)).from_address(ptr)
    ops = np.frombuffer(bytes(buf), OP_DTYPE).copy()
    for i in {0, n // 2, n - 1}:
        o = ops[i]
        if sched.op_info(i) != (o["kind"], o["ep"], o["nbytes"], o["done"], o["chan"]):
            raise LayoutError(f"Schedule layout changed: op {i} reads "
                              f"{tuple(o)}, op_info says {sched.op_info(i)}")
    return ops
