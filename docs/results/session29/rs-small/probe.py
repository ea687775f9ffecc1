"""One rank of a small reduce_scatter probe in the lab: per size, the plan (algorithm, the
split), the median call and the median start-to-start period over a loop, and the rails'
bytes. Usage: nezha lab run -- python probe.py [sizes...]; env RS_FORCE=rd|ring forces
NEZHA_ALGO through the planner."""
import os
import sys
import time

import numpy as np
from mpi4py import MPI  # noqa: F401  (bootstrap as the OSU benchmark does)

import nezha
from nezha.planner import ALGO_NAMES

comm = nezha.Communicator()
r, n = comm.rank, comm.size
sizes = [int(s) for s in sys.argv[1:]] or [1024, 2048, 4096, 8192, 16384, 32768, 65536]
iters = int(os.environ.get("RS_ITERS", "1000"))
if r == 0:
    p = comm.planner
    print("# nezha from", nezha.__file__, "rail_rates", p.rail_rates, "probe", dict(comm.probe),
          "alpha", getattr(p, "rail_alpha", None), flush=True)
for size in sizes:
    cnt = size // 4
    send = (np.arange(cnt, dtype=np.float32) + r + 1)
    out = np.empty(cnt // n, np.float32)
    for _ in range(50):
        comm.reduce_scatter(send, out)
    before = comm.stats()["rails"]
    starts = np.empty(iters)
    durs = np.empty(iters)
    for i in range(iters):
        t0 = time.perf_counter()
        comm.reduce_scatter(send, out)
        starts[i] = t0
        durs[i] = time.perf_counter() - t0
    st = comm.stats()
    want = (np.arange(cnt, dtype=np.float32).reshape(n, -1)[r] * n + sum(range(1, n + 1)))
    ok = np.array_equal(out, want)
    if r == 0:
        p = comm.planner
        a = p.algorithm("reduce_scatter", size)
        plan = p.blocks("reduce_scatter", cnt // n, 4, a)
        sent = {k: (v["bytes_sent"] - before[k]["bytes_sent"]) // iters for k, v in st["rails"].items()}
        ft = {k: round(v * 1e6, 1) for k, v in p.flat_times("reduce_scatter", size).items()}
        print(f"{size:6d} algo={ALGO_NAMES.get(a)} slices={plan.slices} call_med={np.median(durs)*1e6:.1f}us "
              f"period_med={np.median(np.diff(starts))*1e6:.1f}us sent/call={sent} model={ft} ok={ok} "
              f"last_plan={st['last_plan'][:160]}", flush=True)
