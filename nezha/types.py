"""Reduction ops and data types, numbered as in include/nezha/nezha_types.h."""
from enum import IntEnum

import numpy as np


class ReduceOp(IntEnum):
    """Reduction operation of a collective."""

    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4
    BAND = 5
    BOR = 6
    BXOR = 7


class DType(IntEnum):
    """Element type on the wire and in the kernels."""

    INT8 = 0
    UINT8 = 1
    INT16 = 2
    UINT16 = 3
    INT32 = 4
    UINT32 = 5
    INT64 = 6
    UINT64 = 7
    FLOAT16 = 8
    BFLOAT16 = 9
    FLOAT32 = 10
    FLOAT64 = 11

    @property
    def itemsize(self):
        """Bytes per element."""
        return _ITEMSIZE[self]

    @property
    def is_float(self):
        """True for the floating types (AVG allowed, bit ops not)."""
        return self >= DType.FLOAT16


_ITEMSIZE = {DType.INT8: 1, DType.UINT8: 1, DType.INT16: 2, DType.UINT16: 2,
             DType.INT32: 4, DType.UINT32: 4, DType.INT64: 8, DType.UINT64: 8,
             DType.FLOAT16: 2, DType.BFLOAT16: 2, DType.FLOAT32: 4, DType.FLOAT64: 8}

SUM, PROD, MIN, MAX, AVG, BAND, BOR, BXOR = (ReduceOp(i) for i in range(8))

# numpy dtype -> DType. bfloat16 has no numpy dtype; it arrives through DLPack (torch)
# or with an explicit dtype= argument.
_FROM_NUMPY = {
    np.dtype(np.int8): DType.INT8, np.dtype(np.uint8): DType.UINT8,
    np.dtype(np.int16): DType.INT16, np.dtype(np.uint16): DType.UINT16,
    np.dtype(np.int32): DType.INT32, np.dtype(np.uint32): DType.UINT32,
    np.dtype(np.int64): DType.INT64, np.dtype(np.uint64): DType.UINT64,
    np.dtype(np.float16): DType.FLOAT16, np.dtype(np.float32): DType.FLOAT32,
    np.dtype(np.float64): DType.FLOAT64,
}
_NUMPY_OF = {v: k for k, v in _FROM_NUMPY.items()}


def dtype_from_numpy(dt):
    """DType for a numpy dtype (native byte order only); TypeError otherwise."""
    dt = np.dtype(dt)
    if dt.byteorder not in ("=", "|") and dt.newbyteorder("=") != dt:
        raise TypeError(f"nezha: non-native byte order {dt} is not supported")
    try:
        return _FROM_NUMPY[dt.newbyteorder("=")]
    except KeyError:
        raise TypeError(
            f"nezha: unsupported dtype {dt}; supported: int8..int64, uint8..uint64, "
            "float16, bfloat16, float32, float64") from None


def numpy_dtype(dt):
    """numpy dtype for a DType; bfloat16 maps to uint16 storage."""
    dt = DType(dt)
    return np.dtype(np.uint16) if dt == DType.BFLOAT16 else _NUMPY_OF[dt]


def check_op_dtype(op, dt):
    """Raise ValueError if op is not defined for dt (before anything is sent)."""
    op, dt = ReduceOp(op), DType(dt)
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dt.is_float:
        raise ValueError(f"nezha: {op.name} is defined for integer types only, not {dt.name.lower()}")
    if op == ReduceOp.AVG and not dt.is_float:
        raise ValueError(f"nezha: AVG is defined for floating types only, not {dt.name.lower()}")
