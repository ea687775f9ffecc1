"""Lab job (4 x 1): what the start-up measure gives, how repeatable the second slice's
measure is within one job, what Communicator() costs with and without it, and the plans
that follow. Run by startup.sh (nezha lab run); rank 0 prints one RESULT line."""
import json
import os
import time

import numpy as np

t0 = time.perf_counter()
import nezha  # noqa: E402
from nezha.planner import ALGO_NAMES  # noqa: E402
from nezha.topo import rateprobe, steplatency  # noqa: E402

t1 = time.perf_counter()
c = nezha.Communicator()
t2 = time.perf_counter()
step = c.stats()["probe"]["step"]
reps = []
pair = steplatency._slice_channels(c) if hasattr(steplatency, "_slice_channels") else None
if pair is not None and os.environ.get("REPS", "5") != "0":
    algo, ina = c.planner.algo, c._ina
    c.planner.algo, c._ina = "rd", None
    try:
        for i in range(int(os.environ.get("REPS", "5"))):
            t = time.perf_counter()
            one, two = steplatency._time_slices(c, pair)
            dt = time.perf_counter() - t
            c.planner.__dict__.pop("allreduce", None)
            a = rateprobe.agree_max(c, [one, two], steplatency.SEQ + 1 + i)
            reps.append({"one_ns": a[0], "two_ns": a[1],
                         "steps": steplatency.slice_steps(a[0], a[1]), "ms": round(dt * 1e3, 2)})
    finally:
        c.planner.__dict__.pop("allreduce", None)
        c.planner.algo, c._ina = algo, ina
        c._forget_plans()
pl = c.planner
plans = {}
for coll in ("allreduce", "broadcast", "allgather", "reduce_scatter"):
    for kib in (1, 2, 4, 8, 16, 32):
        n = kib << 10
        a = pl.algorithm(coll, n)
        name = ALGO_NAMES[a]
        if coll == "broadcast" and name == "tree":
            k = pl._tree_rails(n)
        elif name in ("rd",) and coll == "allreduce":
            k = 1
        else:
            k = pl._rails_used(n, coll, name)
        plans[f"{coll} {kib}K"] = f"{name}{k}"
if c.rank == 0:
    print("RESULT " + json.dumps({"import_s": round(t1 - t0, 3), "comm_s": round(t2 - t1, 3),
                                  "step": step, "reps": reps, "plans": plans,
                                  "describe": pl.describe()}), flush=True)
c.close()
