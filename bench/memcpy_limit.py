"""This host's memory-copy limit, the ceiling for an allreduce over shared memory (not a test).

P processes copy an S-byte buffer into another (np.copyto: memcpy) for a time budget, all
started together; each reports bytes copied / time. GB = 1e9 bytes of payload (a copy reads
and writes it: twice that crosses the memory bus).

Why it bounds an allreduce: busbw counts 2(n-1)/n * S per rank, i.e. 2(n-1) * S over the
job, and every one of those bytes is at least copied once (a reduce also reads a second
operand), so with n ranks on this host busbw <= (aggregate copy rate over all ranks) / n.

    python bench/memcpy_limit.py [--sizes 16M,64M] [--procs 1,2,4] [--budget 1.0] [--ranks 4]
"""
import argparse
import multiprocessing as mp
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import parse_size  # noqa: E402


def _copier(size, budget, start, out):
    src = np.ones(size, np.uint8)
    dst = np.zeros(size, np.uint8)
    np.copyto(dst, src)  # fault the pages in before the clock starts
    start.wait()
    t0 = time.perf_counter()
    n = 0
    while True:
        np.copyto(dst, src)
        n += 1
        t = time.perf_counter() - t0
        if t >= budget:
            break
    out.put((n * size, t0, t0 + t))  # perf_counter is CLOCK_MONOTONIC: one clock for all


def measure(size, procs, budget):
    """Aggregate copy rate (bytes/s) of `procs` processes copying `size` bytes at once:
    all bytes over the span from the first start to the last end (with more processes than
    CPUs each one's own rate would count time it spent descheduled)."""
    start = mp.Barrier(procs)
    out = mp.Queue()
    ps = [mp.Process(target=_copier, args=(size, budget, start, out)) for _ in range(procs)]
    for p in ps:
        p.start()
    got = [out.get(timeout=budget + 60) for _ in ps]
    for p in ps:
        p.join(timeout=10)
    return sum(b for b, _, _ in got) / (max(e for _, _, e in got) - min(s for _, s, _ in got))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16M,32M,64M")
    ap.add_argument("--procs", default="1,2,4")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds per measurement")
    ap.add_argument("--ranks", type=int, default=4, help="ranks of the allreduce it bounds")
    a = ap.parse_args()
    print(f"# memcpy limit, host {os.uname().nodename}, {os.cpu_count()} CPUs, "
          f"budget {a.budget:g} s; busbw limit = aggregate / {a.ranks} ranks")
    print(f"{'# size (B)':>12} {'procs':>6} {'per proc GB/s':>14} {'aggregate GB/s':>15} "
          f"{'busbw limit GB/s':>17}")
    for s in a.sizes.split(","):
        size = parse_size(s)
        for p in (int(x) for x in a.procs.split(",")):
            agg = measure(size, p, a.budget)
            print(f"{size:>12} {p:>6} {agg / p / 1e9:>14.2f} {agg / 1e9:>15.2f} "
                  f"{agg / a.ranks / 1e9:>17.2f}", flush=True)


if __name__ == "__main__":
    main()
