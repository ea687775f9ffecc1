"""Per-call, per-rank broadcast times (OSU loop: a barrier after each call, outside the
timer), nezha and Open MPI in one job. Prints per rank mean/p50/p90 and the per-iteration
mean over ranks; nezha's stats (votes, fast path calls, algorithm) before/after."""
import sys, time, json
import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.rank, world.size
sizes = [int(x) for x in sys.argv[1].split(",")]
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 500
which = sys.argv[3].split(",") if len(sys.argv) > 3 else ["nezha", "mpi"]
nz = None
import os
if any(w.startswith("nezha") for w in which):
    import nezha
    nz = nezha.Communicator()

def loop(bc, bar, n, warm=50):
    for _ in range(warm):
        bc(); bar()
    bar()
    t = np.empty((n, 2))
    clk = time.perf_counter  # CLOCK_MONOTONIC: one clock for every namespace of the lab
    for i in range(n):
        t0 = clk(); bc(); t[i] = (t0, clk())
        bar()
    return t

out = {}
KEEP = []
# PERCALL_NOBARRIER=1: back to back, no barrier between calls (a lazy tree, then the
# allreduce that follows one, alternate: the even/odd iteration means show it)
nobar = (lambda: None) if os.environ.get("PERCALL_NOBARRIER") else None
for s in sizes:
    for w in which:
        buf = np.ones(s, np.uint8)  # its own buffer: plans and fast-path entries are per buffer
        KEEP.append(buf)  # never freed: a new one at a freed one's address would hit its plan
        if w.startswith("nezha"):

            v0 = nz.stats()["votes"]
            t = loop(lambda: nz.broadcast(buf, 0), nobar or nz.barrier, iters)
            st = nz.stats()
            extra = dict(votes=st["votes"] - v0, fast=st["fast_path_calls"], algo=nz.algorithm_for(s, "broadcast"),
                         plan=st["last_plan"])
        else:
            t = loop(lambda: world.Bcast(buf, 0), nobar or world.Barrier, iters)
            extra = {}
        allt = world.gather(t, root=0)
        ex = world.gather(extra, root=0)
        if rank == 0:
            ab = np.array(allt) * 1e6          # rank, iter, (start, end)
            a = ab[:, :, 1] - ab[:, :, 0]
            z = ab[0, :, 0]                      # the root's entry
            ent = np.median(ab[:, :, 0] - z, axis=1); ext = np.median(ab[:, :, 1] - z, axis=1)
            print(f"       timeline from the root's entry (medians): " + ", ".join(
                f"r{r} in {ent[r]:.0f} out {ext[r]:.0f}" for r in range(size)))
            per_rank = [f"r{r}: mean {a[r].mean():6.1f} p50 {np.median(a[r]):6.1f} p90 {np.percentile(a[r],90):6.1f} max {a[r].max():7.1f}" for r in range(size)]
            it = a.mean(axis=0)
            print(f"{w:6s} {s:6d} B  OSU avg {a.mean():6.1f} us  per-iter p50 {np.median(it):6.1f} p90 {np.percentile(it,90):6.1f} p99 {np.percentile(it,99):6.1f}  {ex[0]}")
            for line in per_rank:
                print("      ", line)
            # alternation check: even vs odd iterations
            print(f"       even iters {it[0::2].mean():6.1f} odd {it[1::2].mean():6.1f}")
            sys.stdout.flush()
if nz is not None:
    nz.close()
