"""The C reduction kernels (nezha._core.reduce) against numpy as the oracle.

Comparison rules (see `assert_same`):
  * integers: exact;
  * floats: NaN exactly where numpy has NaN (the payload may differ: float16/bfloat16
    results are re-encoded as a quiet NaN); all other results bit-exact, except that
    MIN/MAX may return either zero for min(+0, -0): numpy itself returns the first
    operand in its scalar/float16 loops and the second in its float32/float64 SIMD loops.
    Our own choice (first operand, as numpy's scalar loops) is pinned by
    test_signed_zero_min_max_keeps_operand_order.
No tolerances are needed: float16 via float32 then round-to-nearest-even is exactly
numpy's float16 result, and bfloat16 is checked against an independent rounding oracle.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nezha._core.reduce import avg_finish, reduce, reduce3
from nezha.types import DType, ReduceOp, numpy_dtype

ALL_DTYPES = list(DType)
FLOATS = [d for d in DType if d.is_float]
INTS = [d for d in DType if not d.is_float]
BITOPS = (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)
UFUNC = {ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PROD: np.multiply,
         ReduceOp.MIN: np.minimum, ReduceOp.MAX: np.maximum, ReduceOp.BAND: np.bitwise_and,
         ReduceOp.BOR: np.bitwise_or, ReduceOp.BXOR: np.bitwise_xor}


def supported(dt, op):
    """The kernel's own rule: bit ops on floats are the only unsupported pairs."""
    return not (dt.is_float and op in BITOPS)


PAIRS = [(dt, op) for dt in ALL_DTYPES for op in ReduceOp]
SUPPORTED = [p for p in PAIRS if supported(*p)]
UNSUPPORTED = [p for p in PAIRS if not supported(*p)]


def pid(p):
    return f"{p[0].name.lower()}-{p[1].name}"


# ---- bfloat16 oracle ----------------------------------------------------------------

def bf16_to_f32(bits):
    """bfloat16 bits (uint16) -> float32 values (exact)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """float32 -> bfloat16 bits, round to nearest even, computed independently of the
    kernel's bit trick: pick the nearer of the two bfloat16 neighbours in float64
    (ties to the even mantissa); the neighbour above the largest finite value counts as
    2**128, so overflow to Inf follows IEEE. Any NaN becomes 0x7fc0."""
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32)
    lo = (u >> 16).astype(np.uint32)  # truncation toward zero (sign-magnitude)
    hi = lo + 1                       # next bfloat16 away from zero
    with np.errstate(invalid="ignore"):  # widening a signalling NaN sets "invalid"
        lo_v = bf16_to_f32(lo.astype(np.uint16)).astype(np.float64)
        hi_v = np.where((hi & 0x7FFF) == 0x7F80, np.copysign(2.0 ** 128, lo_v),
                        bf16_to_f32((hi & 0xFFFF).astype(np.uint16)).astype(np.float64))
        xd = x.astype(np.float64)
        d_lo, d_hi = np.abs(xd - lo_v), np.abs(hi_v - xd)
        up = (d_hi < d_lo) | ((d_hi == d_lo) & ((lo & 1) == 1))
    out = np.where(np.isfinite(x) & up, hi, lo).astype(np.uint16)
    out[np.isnan(x)] = 0x7FC0
    return out


# ---- data and oracle ----------------------------------------------------------------

def rand(dt, n, rng):
    """n random elements of dt, with specials mixed in for floats."""
    if not dt.is_float:
        info = np.iinfo(numpy_dtype(dt))
        return rng.integers(info.min, info.max, n, dtype=numpy_dtype(dt), endpoint=True)
    if dt in (DType.FLOAT16, DType.BFLOAT16):
        # half arbitrary bit patterns (NaN, Inf, subnormals...), half moderate values
        bits = rng.integers(0, 1 << 16, n, dtype=np.uint16)
        vals = rng.standard_normal(n).astype(np.float32) * np.float32(2.0) ** rng.integers(-6, 7, n)
        moderate = (np.float16(vals).view(np.uint16) if dt == DType.FLOAT16 else f32_to_bf16(vals))
        out = np.where(rng.random(n) < 0.5, bits, moderate).astype(np.uint16)
        return out.view(np.float16) if dt == DType.FLOAT16 else out
    npdt = numpy_dtype(dt)
    vals = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 21, n)).astype(npdt)
    fi = np.finfo(npdt)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, fi.smallest_subnormal,
                         -fi.smallest_subnormal, fi.max, -fi.max, fi.tiny, 1.0], npdt)
    k = rng.random(n) < 0.05
    vals[k] = rng.choice(specials, int(k.sum()))
    return vals


def oracle(dt, op, a, b):
    """numpy's a OP b in dt (bfloat16: in float32, then rounded by f32_to_bf16)."""
    uf = UFUNC[op]
    with np.errstate(all="ignore"):
        if dt == DType.BFLOAT16:
            return f32_to_bf16(uf(bf16_to_f32(a), bf16_to_f32(b)))
        return uf(a, b)


def as_float(dt, x):
    """Float values of a result array (bfloat16 bits widened to float32)."""
    return bf16_to_f32(x) if dt == DType.BFLOAT16 else np.asarray(x)


def assert_same(dt, op, got, want):
    """The comparison rules of the module docstring."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    if not dt.is_float:
        np.testing.assert_array_equal(got, want)
        return
    g, w = as_float(dt, got), as_float(dt, want)
    gn, wn = np.isnan(g), np.isnan(w)
    assert np.array_equal(gn, wn), f"NaN mismatch at {np.flatnonzero(gn != wn)[:10]}"
    g, w = g[~gn], w[~wn]
    if op in (ReduceOp.MIN, ReduceOp.MAX):
        bad = g != w
    else:
        bad = g.view(f"u{g.itemsize}") != w.view(f"u{w.itemsize}")
    assert not bad.any(), (f"{bad.sum()} mismatches, first: got {g[bad][:5]} want {w[bad][:5]}"
                           f" ({dt.name} {op.name})")


# ---- every dtype x op x count -------------------------------------------------------

@pytest.mark.parametrize("count", [0, 1, 7, 1_000_003])
@pytest.mark.parametrize("pair", SUPPORTED, ids=pid)
def test_matches_numpy(pair, count):
    dt, op = pair
    rng = np.random.default_rng([int(dt), int(op), count])
    a, b = rand(dt, count, rng), rand(dt, count, rng)
    want = oracle(dt, op, a, b)
    a_before, b_before = a.copy(), b.copy()
    out = np.full_like(a, 0x55 if not dt.is_float else 0)
    reduce3(out, a, b, dt, op)
    assert_same(dt, op, out, want)
    np.testing.assert_array_equal(a.view(np.uint8), a_before.view(np.uint8))  # inputs untouched
    reduce(a, b, dt, op)
    assert_same(dt, op, a, want)
    np.testing.assert_array_equal(b.view(np.uint8), b_before.view(np.uint8))


@pytest.mark.parametrize("pair", UNSUPPORTED, ids=pid)
@pytest.mark.parametrize("count", [0, 5])
def test_unsupported_pairs_raise(pair, count):
    dt, op = pair
    a = np.ones(count, numpy_dtype(dt))
    b, out = a.copy(), np.zeros_like(a)
    with pytest.raises(ValueError, match=f"{op.name} is not supported for dtype {dt.name.lower()}"):
        reduce(a, b, dt, op)
    with pytest.raises(ValueError, match="not supported"):
        reduce3(out, a, b, dt, op)
    assert (a == 1).all() and (out == 0).all()


@pytest.mark.parametrize("dtype, op", [(12, 0), (-1, 0), (DType.FLOAT32, 8), (DType.INT32, -1),
                                       (DType.INT8, 99)])
def test_bad_enums_raise(dtype, op):
    buf = np.zeros(8, np.uint8)
    with pytest.raises(ValueError):
        reduce(buf, buf.copy(), dtype, op)
    with pytest.raises(ValueError):
        reduce3(buf, buf.copy(), buf.copy(), dtype, op)


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name.lower())
def test_avg_combines_like_sum_in_the_kernel(dt):
    # The Python layer forbids AVG on integers; the kernel itself treats it as SUM.
    rng = np.random.default_rng(int(dt))
    a, b = rand(dt, 100, rng), rand(dt, 100, rng)
    want = oracle(dt, ReduceOp.SUM, a, b)
    reduce(a, b, dt, ReduceOp.AVG)
    assert_same(dt, ReduceOp.SUM, a, want)


# ---- alignment and aliasing ---------------------------------------------------------

@pytest.mark.parametrize("byte_shift", [None, 1], ids=["elem1", "byte1"])
@pytest.mark.parametrize("pair", [(dt, op) for dt in ALL_DTYPES
                                  for op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.BXOR)
                                  if supported(dt, op)], ids=pid)
def test_unaligned_views(pair, byte_shift):
    """Views starting one element (or one byte) into a buffer: no vector alignment."""
    dt, op = pair
    npdt = numpy_dtype(dt)
    n = 1003
    rng = np.random.default_rng(int(dt))
    a0, b0 = rand(dt, n, rng), rand(dt, n, rng)
    want = oracle(dt, op, a0, b0)

    def view(x):
        if byte_shift is None:
            buf = np.empty(n + 1, x.dtype)
            buf[1:] = x
            return buf[1:]
        raw = bytearray(x.nbytes + 1 + 16)
        start = 1 + (-np.frombuffer(raw, np.uint8).ctypes.data) % 16  # address = 1 mod 16
        v = np.frombuffer(raw, x.dtype, count=n, offset=start)
        v[...] = x
        return v

    a, b, out = view(a0), view(b0), view(np.zeros(n, npdt))
    assert a.ctypes.data % 16 == (1 if byte_shift else npdt.itemsize % 16)
    reduce3(out, a, b, dt, op)
    assert_same(dt, op, np.array(out), want)
    reduce(a, b, dt, op)
    assert_same(dt, op, np.array(a), want)


ALIAS_MODES = ["distinct", "out=a", "out=b", "a=b", "out=a=b"]


def run_aliased(mode, dt, op, a, b):
    """Run reduce3 with the given aliasing; returns (result, the operands really used)."""
    a, b = a.copy(), b.copy()
    if mode == "distinct":
        out = np.empty_like(a)
        reduce3(out, a, b, dt, op)
        return out, a, b
    if mode == "out=a":
        x = a.copy()
        reduce3(a, a, b, dt, op)
        return a, x, b
    if mode == "out=b":
        y = b.copy()
        reduce3(b, a, b, dt, op)
        return b, a, y
    if mode == "a=b":
        out = np.empty_like(a)
        reduce3(out, a, a, dt, op)
        return out, a, a
    x = a.copy()
    reduce3(a, a, a, dt, op)
    return a, x, x


@pytest.mark.parametrize("mode", ALIAS_MODES)
@pytest.mark.parametrize("pair", [(dt, op) for dt in ALL_DTYPES for op in ReduceOp
                                  if supported(dt, op) and op != ReduceOp.AVG], ids=pid)
def test_aliasing(pair, mode):
    dt, op = pair
    rng = np.random.default_rng([int(dt), int(op)])
    a, b = rand(dt, 517, rng), rand(dt, 517, rng)
    got, x, y = run_aliased(mode, dt, op, a, b)
    assert_same(dt, op, got, oracle(dt, op, x, y))


def test_signed_zero_min_max_keeps_operand_order():
    """min/max of equal zeros returns the first operand, also when out is the second."""
    for dt in FLOATS:
        npdt = numpy_dtype(dt)
        pz, nz = np.zeros(64, np.float32), np.full(64, -0.0, np.float32)
        if dt == DType.BFLOAT16:
            pz, nz = f32_to_bf16(pz), f32_to_bf16(nz)
        else:
            pz, nz = pz.astype(npdt), nz.astype(npdt)
        for op in (ReduceOp.MIN, ReduceOp.MAX):
            for first, second in ((pz, nz), (nz, pz)):
                for mode in ALIAS_MODES[:3]:
                    got, _, _ = run_aliased(mode, dt, op, first, second)
                    assert np.signbit(as_float(dt, got)).tolist() == \
                        np.signbit(as_float(dt, first)).tolist(), (dt, op, mode)


def test_partial_overlap_is_rejected():
    buf = np.arange(32, dtype=np.float32)
    other = np.ones(10, np.float32)
    with pytest.raises(ValueError, match="overlap"):
        reduce(buf[1:11], buf[0:10], DType.FLOAT32, ReduceOp.SUM)
    with pytest.raises(ValueError, match="overlap"):
        reduce3(buf[0:10], buf[5:15], other, DType.FLOAT32, ReduceOp.SUM)
    with pytest.raises(ValueError, match="overlap"):
        reduce3(buf[5:15], other, buf[0:10], DType.FLOAT32, ReduceOp.SUM)
    np.testing.assert_array_equal(buf, np.arange(32, dtype=np.float32))
    # exact aliasing through different view objects is fine
    reduce3(buf[0:10], buf[0:10], buf[20:30], DType.FLOAT32, ReduceOp.SUM)
    assert buf[:10].tolist() == [float(i + i + 20) for i in range(10)]


# ---- integer wrap-around ------------------------------------------------------------

@pytest.mark.parametrize("dt, op, a, b, want", [
    (DType.INT8, ReduceOp.SUM, 127, 1, -128),
    (DType.INT8, ReduceOp.PROD, -128, -1, -128),
    (DType.UINT8, ReduceOp.SUM, 255, 2, 1),
    (DType.UINT8, ReduceOp.PROD, 16, 16, 0),
    (DType.INT16, ReduceOp.PROD, -32768, -1, -32768),
    (DType.UINT16, ReduceOp.PROD, 65535, 65535, 1),  # would overflow int if promoted
    (DType.INT32, ReduceOp.SUM, 2**31 - 1, 1, -2**31),
    (DType.INT32, ReduceOp.PROD, 2**30, 4, 0),
    (DType.UINT32, ReduceOp.PROD, 2**32 - 1, 2**32 - 1, 1),
    (DType.INT64, ReduceOp.SUM, 2**63 - 1, 1, -2**63),
    (DType.INT64, ReduceOp.PROD, -2**63, -1, -2**63),
    (DType.UINT64, ReduceOp.SUM, 2**64 - 1, 2, 1),
    (DType.UINT64, ReduceOp.PROD, 2**63 + 1, 2**63 + 1, 1),
], ids=lambda v: str(v) if not isinstance(v, (DType, ReduceOp)) else v.name.lower())
def test_integer_wraparound(dt, op, a, b, want):
    npdt = numpy_dtype(dt)
    x, y = np.full(37, a, npdt), np.full(37, b, npdt)  # 37: vector body and scalar tail
    assert (oracle(dt, op, x, y) == want).all()  # numpy agrees with the expectation
    reduce(x, y, dt, op)
    assert x.tolist() == [want] * 37


# ---- NaN propagation and special values --------------------------------------------

@pytest.mark.parametrize("op", [ReduceOp.MIN, ReduceOp.MAX])
@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name.lower())
def test_nan_propagation_min_max(dt, op):
    vals = np.array([np.nan, 1.0, np.nan, -np.inf, np.inf, 0.0, -2.5, np.nan], np.float32)
    other = np.array([1.0, np.nan, np.nan, np.nan, -np.inf, -0.0, 3.0, -np.inf], np.float32)
    reps = 9  # 72 elements: through the vector loop and the tail
    a32, b32 = np.tile(vals, reps), np.tile(other, reps)
    if dt == DType.BFLOAT16:
        a, b = f32_to_bf16(a32), f32_to_bf16(b32)
    else:
        a, b = a32.astype(numpy_dtype(dt)), b32.astype(numpy_dtype(dt))
    want = oracle(dt, op, a, b)
    for mode in ALIAS_MODES[:3]:
        got, _, _ = run_aliased(mode, dt, op, a, b)
        assert np.isnan(as_float(dt, got)).tolist() == (np.isnan(a32) | np.isnan(b32)).tolist()
        assert_same(dt, op, got, want)


F16_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0**-24, -2.0**-24, 2.0**-14, 2.0**-14 - 2.0**-24,
             65504.0, -65504.0, 2048.0, 1.0 + 2.0**-10, 3.0 * 2.0**-25, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MIN, ReduceOp.MAX])
def test_float16_all_values(op):
    """Every float16 value against a set of partners (edges + random), vs numpy float16."""
    rng = np.random.default_rng(16 + int(op))
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    partners = np.concatenate([np.array(F16_EDGES, np.float16), rand(DType.FLOAT16, 47, rng)])
    a = np.tile(every, len(partners))
    b = np.repeat(partners, len(every))
    out = np.empty_like(a)
    reduce3(out, a, b, DType.FLOAT16, op)
    assert_same(DType.FLOAT16, op, out, oracle(DType.FLOAT16, op, a, b))


@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MIN, ReduceOp.MAX])
def test_bfloat16_all_values(op):
    """Every bfloat16 bit pattern against a set of partners, vs the float64 rounding oracle."""
    rng = np.random.default_rng(160 + int(op))
    every = np.arange(1 << 16, dtype=np.uint16)
    edges = f32_to_bf16(np.array(F16_EDGES + [3.0e38, -3.0e38, 2.0**-126, 2.0**-133], np.float32))
    partners = np.concatenate([edges, rand(DType.BFLOAT16, 43, rng)])
    a = np.tile(every, len(partners))
    b = np.repeat(partners, len(every))
    out = np.empty_like(a)
    reduce3(out, a, b, DType.BFLOAT16, op)
    assert_same(DType.BFLOAT16, op, out, oracle(DType.BFLOAT16, op, a, b))


S, P = ReduceOp.SUM, ReduceOp.PROD


@pytest.mark.parametrize("op, x, y, want", [
    (S, 2048.0, 1.0, 2048.0),           # tie -> even (down)
    (S, 2048.0, 3.0, 2052.0),           # tie -> even (up)
    (S, 65504.0, 16.0, np.inf),         # 65520 ties to 65536 -> overflow
    (S, 65504.0, 15.0, 65504.0),        # just below the tie
    (S, -65504.0, -16.0, -np.inf),
    (P, 2.0**-24, 0.5, 0.0),            # 2^-25 ties to 0 (subnormal rounding)
    (P, 3 * 2.0**-24, 0.5, 2.0**-23),   # 1.5 ulp ties to 2 ulp
    (P, 5 * 2.0**-24, 0.5, 2.0**-23),   # 2.5 ulp ties to 2 ulp
    (P, 2.0**-14, 0.75, 0.75 * 2.0**-14),  # normal -> subnormal, exact
    (S, 2.0**-14, -2.0**-24, 2.0**-14 - 2.0**-24),  # normal -> largest subnormal
    (S, 2.0**-14 - 2.0**-24, 2.0**-24, 2.0**-14),   # largest subnormal -> min normal
    (S, -1.0, 1.0, 0.0),                # exact cancellation gives +0
])
def test_float16_rounding_cases(op, x, y, want):
    a, b = np.full(19, x, np.float16), np.full(19, y, np.float16)
    assert float(a[0]) == x and float(b[0]) == y  # inputs are exact halves
    reduce(a, b, DType.FLOAT16, op)
    assert a.tolist() == [want] * 19
    assert np.signbit(a).tolist() == [bool(want < 0)] * 19


@pytest.mark.parametrize("x, y, want_bits", [
    (1.0, 2.0**-8, 0x3F80),                    # 1 + half ulp: tie -> even (down)
    (1.0 + 2.0**-7, 2.0**-8, 0x3F82),          # odd + half ulp: tie -> even (up)
    (1.0, 2.0**-8 + 2.0**-15, 0x3F81),         # just above the tie: up
    (3.3895313892515355e38, 3.3895313892515355e38, 0x7F80),  # max + max -> Inf
    (-3.3895313892515355e38, -3.3895313892515355e38, 0xFF80),
    (1.0, -1.0, 0x0000),
])
def test_bfloat16_rounding_cases(x, y, want_bits):
    a = f32_to_bf16(np.full(21, x, np.float32))
    b = f32_to_bf16(np.full(21, y, np.float32))
    assert (bf16_to_f32(a) == np.float32(x)).all() and (bf16_to_f32(b) == np.float32(y)).all()
    reduce(a, b, DType.BFLOAT16, ReduceOp.SUM)
    assert a.tolist() == [want_bits] * 21


def test_bfloat16_nan_stays_nan():
    nans = np.array([0x7FC0, 0xFFC0, 0x7F81, 0xFFFF, 0x7FFF], np.uint16)  # incl. signalling
    a, b = np.tile(nans, 5), np.zeros(25, np.uint16)
    for op in (ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MIN, ReduceOp.MAX):
        out = np.empty_like(a)
        reduce3(out, a, b, DType.BFLOAT16, op)
        assert np.isnan(bf16_to_f32(out)).all(), op
        reduce3(out, b, a, DType.BFLOAT16, op)
        assert np.isnan(bf16_to_f32(out)).all(), op


# ---- avg_finish ---------------------------------------------------------------------

@pytest.mark.parametrize("divisor", [1, 2, 3, 4, 7, 8])
@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name.lower())
def test_avg_finish(dt, divisor):
    rng = np.random.default_rng(int(dt) * 10 + divisor)
    x = rand(dt, 1001, rng)
    with np.errstate(all="ignore"):
        if dt == DType.BFLOAT16:
            want = f32_to_bf16(bf16_to_f32(x) / np.float32(divisor))
        elif dt == DType.FLOAT64:
            want = x / divisor
        else:  # numpy's float16 divide also works in float32
            want = (x.astype(np.float32) / np.float32(divisor)).astype(numpy_dtype(dt))
    avg_finish(x, dt, divisor)
    assert_same(dt, ReduceOp.SUM, x, want)


def test_avg_finish_float16_matches_numpy_float16_divide():
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16).copy()
    with np.errstate(all="ignore"):
        want = x / np.float16(3)
    avg_finish(x, DType.FLOAT16, 3)
    assert_same(DType.FLOAT16, ReduceOp.SUM, x, want)


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name.lower())
def test_avg_finish_rejects_integers(dt):
    x = np.arange(10, dtype=numpy_dtype(dt))
    with pytest.raises(ValueError, match="floating"):
        avg_finish(x, dt, 2)
    assert x.tolist() == list(range(10))


# ---- the buffer protocol ------------------------------------------------------------

def test_accepts_bytearray_and_memoryview():
    a = bytearray(np.arange(10, dtype=np.int32).tobytes())
    b = memoryview(bytearray(np.full(10, 5, np.int32).tobytes()))
    out = bytearray(40)
    reduce3(memoryview(out), a, b, DType.INT32, ReduceOp.SUM)
    assert np.frombuffer(out, np.int32).tolist() == [i + 5 for i in range(10)]
    reduce(a, bytes(b), DType.INT32, ReduceOp.PROD)  # read-only src is fine
    assert np.frombuffer(a, np.int32).tolist() == [i * 5 for i in range(10)]
    two_d = np.ones((3, 4), np.float64)
    reduce(two_d, np.full((3, 4), 2.0), DType.FLOAT64, ReduceOp.SUM)
    assert (two_d == 3.0).all()


def test_rejects_read_only_destination():
    src = np.ones(4, np.float32)
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False
    for dst in (bytes(16), ro, memoryview(bytearray(16)).toreadonly()):
        with pytest.raises((BufferError, ValueError)):
            reduce(dst, src, DType.FLOAT32, ReduceOp.SUM)
        with pytest.raises((BufferError, ValueError)):
            reduce3(dst, src, src, DType.FLOAT32, ReduceOp.SUM)
        with pytest.raises((BufferError, ValueError)):
            avg_finish(dst, DType.FLOAT32, 2.0)
    assert (ro == 1).all()


def test_rejects_size_mismatch_and_partial_items():
    f = DType.FLOAT32
    with pytest.raises(ValueError, match="size mismatch"):
        reduce(np.zeros(4, np.float32), np.zeros(5, np.float32), f, ReduceOp.SUM)
    with pytest.raises(ValueError, match="size mismatch"):
        reduce3(np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(3, np.float32),
                f, ReduceOp.SUM)
    with pytest.raises(ValueError, match="multiple of the item size"):
        reduce(bytearray(6), bytearray(6), f, ReduceOp.SUM)
    with pytest.raises(ValueError, match="multiple of the item size"):
        avg_finish(bytearray(6), f, 2.0)
    # the same 8 bytes are 2 float32 or 4 float16: the count comes from the dtype
    a = np.ones(2, np.float32)
    reduce(a, np.ones(2, np.float32), f, ReduceOp.SUM)
    assert a.tolist() == [2.0, 2.0]


def test_rejects_non_contiguous():
    a = np.ones(20, np.float32)
    with pytest.raises((BufferError, ValueError)):
        reduce(a[::2], np.ones(10, np.float32), DType.FLOAT32, ReduceOp.SUM)
    with pytest.raises((BufferError, ValueError)):
        reduce(np.ones(10, np.float32), a[::2], DType.FLOAT32, ReduceOp.SUM)
    assert (a == 1).all()


# ---- property-based -----------------------------------------------------------------

@st.composite
def operands(draw):
    dt, op = draw(st.sampled_from(SUPPORTED))
    n = draw(st.integers(0, 300))
    npdt = numpy_dtype(dt)  # bfloat16: any uint16 bit pattern
    a = draw(hnp.arrays(npdt, n))
    b = draw(hnp.arrays(npdt, n))
    return dt, op, a, b


@settings(max_examples=400, deadline=None)
@given(operands(), st.sampled_from(ALIAS_MODES))
def test_property_matches_numpy(args, mode):
    dt, op, a, b = args
    got, x, y = run_aliased(mode, dt, op, a, b)
    assert_same(dt, op, got, oracle(dt, op, x, y))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(FLOATS).flatmap(
    lambda dt: st.tuples(st.just(dt), hnp.arrays(numpy_dtype(dt), st.integers(0, 200)))),
    st.integers(1, 64))
def test_property_avg_finish(args, divisor):
    dt, x = args
    with np.errstate(all="ignore"):
        if dt == DType.BFLOAT16:
            want = f32_to_bf16(bf16_to_f32(x) / np.float32(divisor))
        elif dt == DType.FLOAT64:
            want = x / divisor
        else:
            want = (x.astype(np.float32) / np.float32(divisor)).astype(x.dtype)
    x = x.copy()
    avg_finish(x, dt, divisor)
    assert_same(dt, ReduceOp.SUM, x, want)
