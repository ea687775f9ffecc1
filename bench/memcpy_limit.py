"""This host's memory-copy limit, the ceiling for an allreduce over shared memory (not a test).

P processes copy an S-byte buffer into another (np.copyto: memcpy) for a time budget, all
started together; each reports bytes copied / time. GB = 1e9 bytes of payload (a copy reads
and writes it: twice that crosses the memory bus). --mode cma: each process instead reads
the next process's buffer into its own with process_vm_readv (cross-memory attach, the
kernel's single copy between two address spaces, as Open MPI's sm/vader does for large
messages).

Why it bounds an allreduce: busbw counts 2(n-1)/n * S per rank, i.e. 2(n-1) * S over the
job, and every one of those bytes is at least copied once (a reduce also reads a second
operand), so with n ranks on this host busbw <= (aggregate copy rate over all ranks) / n.

    python bench/memcpy_limit.py [--sizes 16M,64M] [--procs 1,2,4] [--budget 1.0] [--ranks 4]
                                 [--mode memcpy,cma]
"""
import argparse
import ctypes
import multiprocessing as mp
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import parse_size  # noqa: E402


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _cma_reader(size, pid, addr, dst):
    """A copy function reading `size` bytes at addr in process pid into dst."""
    libc = ctypes.CDLL(None, use_errno=True)
    loc, rem = _Iovec(dst.ctypes.data, size), _Iovec(addr, size)

    def copy():
        if libc.process_vm_readv(pid, ctypes.byref(loc), 1, ctypes.byref(rem), 1, 0) != size:
            raise OSError(ctypes.get_errno(), "process_vm_readv")
    return copy


def _copier(i, procs, mode, size, budget, start, where, out):
    src = np.ones(size, np.uint8)
    dst = np.zeros(size, np.uint8)
    copy = lambda: np.copyto(dst, src)  # noqa: E731
    if mode == "cma":  # read the next process's src (it waits for everyone at the end)
        where[i] = (os.getpid(), src.ctypes.data)
        start.wait()
        copy = _cma_reader(size, *where[(i + 1) % procs], dst)
    copy()  # fault the pages in before the clock starts
    start.wait()
    t0 = time.perf_counter()
    n = 0
    while True:
        copy()
        n += 1
        t = time.perf_counter() - t0
        if t >= budget:
            break
    out.put((n * size, t0, t0 + t))  # perf_counter is CLOCK_MONOTONIC: one clock for all
    start.wait()  # the others may still read src


def measure(size, procs, budget, mode="memcpy"):
    """Aggregate copy rate (bytes/s) of `procs` processes copying `size` bytes at once:
    all bytes over the span from the first start to the last end (with more processes than
    CPUs each one's own rate would count time it spent descheduled)."""
    start = mp.Barrier(procs)
    out = mp.Queue()
    where = mp.Manager().dict()
    ps = [mp.Process(target=_copier, args=(i, procs, mode, size, budget, start, where, out))
          for i in range(procs)]
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
    ap.add_argument("--mode", default="memcpy", help="memcpy, cma or both (memcpy,cma)")
    a = ap.parse_args()
    print(f"# memcpy limit, host {os.uname().nodename}, {os.cpu_count()} CPUs, "
          f"budget {a.budget:g} s; busbw limit = aggregate / {a.ranks} ranks")
    print(f"{'# mode':>7} {'size (B)':>10} {'procs':>6} {'per proc GB/s':>14} "
          f"{'aggregate GB/s':>15} {'busbw limit GB/s':>17}")
    for s in a.sizes.split(","):
        size = parse_size(s)
        for p in (int(x) for x in a.procs.split(",")):
            for mode in a.mode.split(","):
                if mode == "cma" and p < 2:
                    continue
                agg = measure(size, p, a.budget, mode)
                print(f"{mode:>7} {size:>10} {p:>6} {agg / p / 1e9:>14.2f} {agg / 1e9:>15.2f} "
                      f"{agg / a.ranks / 1e9:>17.2f}", flush=True)


if __name__ == "__main__":
    main()
