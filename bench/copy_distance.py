"""memcpy against nezha's shared-memory copy by the distance between destination and source
modulo a page (not a test). On AMD Zen cores glibc's `rep movsb` (2 KiB - 512 KiB in glibc
2.36) is 15-25x slower when the destination starts 1-31 bytes after the source: a copy out
of a page-aligned shared segment into a numpy array (data 16 bytes into its page) is such a
copy. include/nezha/nezha_copy.h takes a vector loop there.

    python bench/copy_distance.py [--sizes 64K,256K,1M] [--dists 0,16,48,64,2048] [--budget 0.2]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import parse_size  # noqa: E402
from nezha._core.reduce import copy  # noqa: E402

PAGE = 4096


def _pages(n):
    raw = np.ones(n + PAGE, np.uint8)
    off = (-raw.ctypes.data) % PAGE
    return raw[off:off + n]


def rate(fn, dst, src, budget):
    """Bytes per second of fn(dst, src) over about budget seconds."""
    fn(dst, src)
    n, t0 = 0, time.perf_counter()
    while (t := time.perf_counter() - t0) < budget:
        for _ in range(8):
            fn(dst, src)
        n += 8
    return n * src.nbytes / t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64K,256K,1M")
    ap.add_argument("--dists", default="0,16,48,64,2048")
    ap.add_argument("--budget", type=float, default=0.2, help="seconds per measurement")
    a = ap.parse_args()
    print(f"# host {os.uname().nodename}: GB/s (1e9 B/s) of one copy, dst - src = dist mod {PAGE}")
    print(f"{'# size (B)':>12} {'dist':>5} {'memcpy':>8} {'nz_copy':>8}")
    for s in a.sizes.split(","):
        size = parse_size(s)
        src = _pages(size)
        dst = _pages(size + PAGE)
        for d in (int(x) for x in a.dists.split(",")):
            out = dst[d:d + size]
            mc = rate(np.copyto, out, src, a.budget)
            nz = rate(copy, out, src, a.budget)
            print(f"{size:>12} {d:>5} {mc / 1e9:>8.1f} {nz / 1e9:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
