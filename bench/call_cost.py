#!/usr/bin/env python
"""Per-call cost of blocking collectives on tiny buffers (4 B per rank): numpy arrays and
torch CPU tensors, every collective, each call on the same buffers (what the fast path,
nezha/_core/fastpath.pxi, serves). On one rank this is the Python cost of a call; with
more it adds the wire. Prints one row per (collective, buffer kind): the median over reps
of the mean µs per call, and how many of the timed calls took the fast path.

    python bench/call_cost.py [--calls 5000] [--reps 5]                      # one rank
    python -m nezha mpirun -np 4 -- python bench/call_cost.py               # four ranks

Uses the public API and comm.stats() only, so it runs against any tree (PYTHONPATH).
"""
import argparse
import statistics
import time

import numpy as np

import nezha


def _calls(comm, kind):
    n = comm.size
    if kind == "torch":
        import torch
        make = lambda k: torch.zeros(k, dtype=torch.float32)  # noqa: E731
    else:
        make = lambda k: np.zeros(k, np.float32)  # noqa: E731
    one, many, out = make(1), make(n), make(n)
    return (("allreduce", lambda: comm.allreduce(one)),
            ("reduce", lambda: comm.reduce(one, root=0)),
            ("broadcast", lambda: comm.broadcast(one, root=0)),
            ("allgather", lambda: comm.allgather(one, out)),
            ("reduce_scatter", lambda: comm.reduce_scatter(many, one)),
            ("alltoall", lambda: comm.alltoall(many, out)),
            ("barrier", comm.barrier))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=5000, help="timed calls per sample")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--kinds", default="numpy,torch")
    a = p.parse_args()
    comm = nezha.Communicator(config={"PROBE": "off"})
    rows = []
    for kind in a.kinds.split(","):
        for name, call in _calls(comm, kind):
            for _ in range(100):
                call()
            samples, fast = [], 0
            for _ in range(a.reps):
                comm.barrier()
                before = comm.stats()["fast_path_calls"]
                t = time.perf_counter()
                for _ in range(a.calls):
                    call()
                samples.append((time.perf_counter() - t) / a.calls * 1e6)
                fast += comm.stats()["fast_path_calls"] - before
            rows.append((name, kind, statistics.median(samples), fast, a.calls * a.reps))
    if comm.rank == 0:
        print(f"{comm.size} rank(s), rails {comm.rails}")
        print(f"{'collective':<16}{'buffers':<8}{'us/call':>9}  fast calls")
        for name, kind, us, fast, total in rows:
            print(f"{name:<16}{kind:<8}{us:9.2f}  {fast}/{total}")
    comm.close()


if __name__ == "__main__":
    main()
