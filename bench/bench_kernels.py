"""Benchmark of the C reduction kernels against numpy ufuncs (not a test).

For each dtype, op and size it times the in-place update a = a OP b with
nezha._core.reduce.reduce(a, b, ...) and with np.<ufunc>(a, b, out=a) on the same arrays.
Bandwidth counts 3 x nbytes per call (read a, read b, write a) and GB = 1e9 bytes.
Each figure is the best of repeated calls within a small time budget (one warm-up call
first, so page faults are not timed). numpy has no bfloat16 type: its column says n/a.

    python bench/bench_kernels.py [--json FILE] [--budget SECONDS] [--max-bytes N]
"""
import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from nezha._core.reduce import reduce as nz_reduce  # noqa: E402
from nezha.types import DType, ReduceOp  # noqa: E402

DTYPES = [DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16, DType.INT32, DType.FLOAT64]
OPS = {ReduceOp.SUM: np.add, ReduceOp.MAX: np.maximum}
SIZES = [4 << (2 * k) << 10 for k in range(8)]  # 4 KiB .. 64 MiB, powers of 4


def make(dt, nbytes, rng):
    """Two arrays of nbytes each with values that stay finite-ish and never go subnormal."""
    n = nbytes // DType(dt).itemsize
    if dt == DType.BFLOAT16:
        # float32 in [1, 2) truncated to its top half is a valid bfloat16
        return [(rng.uniform(1, 2, n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
                for _ in range(2)]
    if dt == DType.INT32:
        return [rng.integers(-1000, 1000, n, dtype=np.int32) for _ in range(2)]
    npdt = {DType.FLOAT16: np.float16, DType.FLOAT32: np.float32, DType.FLOAT64: np.float64}[dt]
    return [rng.uniform(1, 2, n).astype(npdt) for _ in range(2)]


def best_time(fn, budget, min_reps=3, max_reps=1000):
    """Best wall time of fn() over repeats filling about `budget` seconds."""
    fn()  # warm-up: page faults, caches
    best, reps, t_end = float("inf"), 0, time.perf_counter() + budget
    while reps < min_reps or (time.perf_counter() < t_end and reps < max_reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        reps += 1
    return best


def fmt_bytes(n):
    """4096 -> '4 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n} {unit}"
        n //= 1024
    return f"{n} TiB"


def main(argv=None):
    """Run the benchmark and print the table (optionally also write JSON)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--budget", type=float, default=0.04,
                    help="seconds of timing per (dtype, op, size, impl) (default 0.04)")
    ap.add_argument("--max-bytes", type=int, default=SIZES[-1],
                    help="largest size (default 64 MiB)")
    args = ap.parse_args(argv)

    rng = np.random.default_rng(0)
    rows = []
    print("# a = a OP b in place; GB/s = 3 x nbytes (2 reads + 1 write) / best time, GB = 1e9 B")
    print(f"{'dtype':<9} {'op':<4} {'bytes':>8} {'nezha GB/s':>11} {'numpy GB/s':>11} "
          f"{'ratio':>6}")
    t_start = time.perf_counter()
    for dt in DTYPES:
        for op, ufunc in OPS.items():
            for nbytes in (s for s in SIZES if s <= args.max_bytes):
                a, b = make(dt, nbytes, rng)
                t_nz = best_time(lambda: nz_reduce(a, b, dt, op), args.budget)
                if dt == DType.BFLOAT16:
                    t_np = None
                else:
                    t_np = best_time(lambda: ufunc(a, b, out=a), args.budget)
                gbs_nz = 3 * nbytes / t_nz / 1e9
                gbs_np = 3 * nbytes / t_np / 1e9 if t_np else None
                ratio = gbs_nz / gbs_np if gbs_np else None
                rows.append({"dtype": dt.name.lower(), "op": op.name, "bytes": nbytes,
                             "nezha_gbps": round(gbs_nz, 3),
                             "numpy_gbps": round(gbs_np, 3) if gbs_np else None,
                             "ratio": round(ratio, 3) if ratio else None})
                print(f"{dt.name.lower():<9} {op.name:<4} {fmt_bytes(nbytes):>8} {gbs_nz:>11.2f} "
                      + (f"{gbs_np:>11.2f} {ratio:>6.2f}" if gbs_np else f"{'n/a':>11} {'n/a':>6}"),
                      flush=True)
    print(f"# {time.perf_counter() - t_start:.1f} s, numpy {np.__version__}, {platform.machine()}")
    if args.json:
        meta = {"numpy": np.__version__, "machine": platform.machine(),
                "python": platform.python_version(), "bytes_counted": "3 x nbytes", "gb": 1e9,
                "budget_s": args.budget}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": rows}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
