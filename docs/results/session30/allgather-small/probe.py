"""One rank of a small allgather / allreduce probe in the lab: per size (OSU's: allgather
per rank, allreduce the buffer), the plan (algorithm, the split), the median call and the
median start-to-start period over a loop, the rails' bytes a call, the model's prices.
Usage: nezha lab run -- python probe.py COLL [sizes...] (COLL allgather|allreduce);
PR_ITERS loop length; PR_BARRIER=1: a barrier after each call outside the timer, as the OSU
loop of bench compare (its period is then bench compare's period_us). Checks every result
exactly (int32 sums / gathers). Every rank prints its median call (the skew among ranks)."""
import os
import sys
import time

import numpy as np
from mpi4py import MPI  # noqa: F401  (bootstrap as the OSU benchmark does)

import nezha
from nezha.planner import ALGO_NAMES

comm = nezha.Communicator()
r, n = comm.rank, comm.size
coll = sys.argv[1]
sizes = [int(s) for s in sys.argv[2:]] or [512, 1024, 2048, 4096]
iters = int(os.environ.get("PR_ITERS", "1000"))
barrier = os.environ.get("PR_BARRIER") == "1"
if r == 0:
    p = comm.planner
    print("# nezha from", nezha.__file__, "rail_rates", p.rail_rates, "probe", dict(comm.probe),
          flush=True)
for size in sizes:
    cnt = size // 4
    if coll == "allgather":
        send = np.arange(cnt, dtype=np.int32) + r * cnt
        out = np.empty(cnt * n, np.int32)
        run = lambda: comm.allgather(send, out)  # noqa: E731
        want = np.arange(cnt * n, dtype=np.int32)
        total = size * n
    else:
        send = np.arange(cnt, dtype=np.int32) + r + 1
        out = np.empty(cnt, np.int32)
        run = lambda: comm.allreduce(send, out)  # noqa: E731
        want = np.arange(cnt, dtype=np.int32) * n + sum(range(1, n + 1))
        total = size
    for _ in range(50):
        run()
    before = comm.stats()["rails"]
    starts = np.empty(iters)
    durs = np.empty(iters)
    for i in range(iters):
        t0 = time.perf_counter()
        run()
        starts[i] = t0
        durs[i] = time.perf_counter() - t0
        if barrier:
            comm.barrier()
    st = comm.stats()
    ok = np.array_equal(out, want)
    if r == 0:
        p = comm.planner
        a = p.algorithm(coll, total)
        if coll == "allgather":
            plan = p.blocks(coll, cnt, 4, a)
        else:
            plan = p.allreduce(cnt, 4) if hasattr(p, "allreduce") else None
        sent = {k: (v["bytes_sent"] - before[k]["bytes_sent"]) // iters for k, v in st["rails"].items()}
        ft = {k: round(v * 1e6, 1) for k, v in p.flat_times(coll, total).items()}
        print(f"{coll} {size:6d} algo={ALGO_NAMES.get(a)} slices={getattr(plan, 'slices', plan)} "
              f"call_med={np.median(durs)*1e6:.1f}us period_med={np.median(np.diff(starts))*1e6:.1f}us "
              f"sent/call={sent} model={ft} ok={ok}", flush=True)
    print(f"rank {r} {coll} {size} call_med={np.median(durs)*1e6:.1f}us ok={ok}", flush=True)
