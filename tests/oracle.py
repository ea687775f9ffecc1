"""Test data and the numpy oracle: every rank can build every rank's input and the result.

Values are small integers so that sums and products are exact in every floating type
(bfloat16 holds integers up to 256 exactly); integer types wrap exactly as numpy does.
"""
import numpy as np

from nezha.types import DType, ReduceOp, numpy_dtype

ALL_DTYPES = list(DType)
INT_DTYPES = [d for d in DType if not d.is_float]
FLOAT_DTYPES = [d for d in DType if d.is_float]


def ops_for(dt):
    """Every op defined for dt."""
    ops = [ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MIN, ReduceOp.MAX]
    ops += [ReduceOp.AVG] if dt.is_float else [ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR]
    return ops


def values(dt, count, rank, op, seed=0):
    """Rank's input: storage array (bfloat16 as its uint16 bit pattern)."""
    rng = np.random.default_rng([seed, rank, count, int(dt), int(op)])
    if op == ReduceOp.PROD:
        v = rng.choice(np.array([1, 2, 1, 1, -1] if dt in (DType.INT8, DType.INT16, DType.INT32,
                                                             DType.INT64) or dt.is_float
                                else [1, 2, 1, 3]), size=count)
    elif op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
        hi = 1 << min(8 * dt.itemsize - 1, 30)
        v = rng.integers(0, hi, size=count)
    elif dt.is_float or dt.name.startswith("INT"):
        v = rng.integers(-4, 5, size=count)
    else:
        v = rng.integers(0, 9, size=count)
    return from_float(v.astype(np.float64), dt) if dt.is_float else v.astype(numpy_dtype(dt))


def from_float(v, dt):
    """float values -> storage array of dt (exact for the small integers used here)."""
    if dt == DType.BFLOAT16:
        return (np.asarray(v, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return np.asarray(v).astype(numpy_dtype(dt))


def to_float(a, dt):
    """Storage array of dt -> float64 values."""
    if dt == DType.BFLOAT16:
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def reduce(dt, op, arrays):
    """The oracle: op over the ranks' arrays, in the dtype's own arithmetic."""
    if dt.is_float:
        f = [to_float(a, dt) for a in arrays]
        fn = {ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PROD: np.multiply,
              ReduceOp.MIN: np.minimum, ReduceOp.MAX: np.maximum}[op]
        out = f[0].copy()
        for a in f[1:]:
            out = fn(out, a)
        if op == ReduceOp.AVG:
            out = out / len(arrays)
        return from_float(out, dt)
    fn = {ReduceOp.SUM: np.add, ReduceOp.PROD: np.multiply, ReduceOp.MIN: np.minimum,
          ReduceOp.MAX: np.maximum, ReduceOp.BAND: np.bitwise_and, ReduceOp.BOR: np.bitwise_or,
          ReduceOp.BXOR: np.bitwise_xor}[op]
    out = arrays[0].copy()
    for a in arrays[1:]:
        out = fn(out, a)  # numpy wraps integers the way the kernels do
    return out


def assert_result(got, expected, dt, op):
    """Exact for integers and exact sums; AVG of floats within the dtype's rounding."""
    if op == ReduceOp.AVG:
        # one division, rounded once in the dtype: stay within half a unit in the last place
        rtol = {DType.FLOAT16: 1e-3, DType.BFLOAT16: 8e-3, DType.FLOAT32: 1e-7,
                DType.FLOAT64: 1e-15}[dt]
        np.testing.assert_allclose(to_float(got, dt), to_float(expected, dt), rtol=rtol, atol=0)
    else:
        np.testing.assert_array_equal(got, expected)
