"""One lab job: what the start-up probe measured (the step, the whole-payload sizes), the
planner's choices at 2-64 KiB, and the slowest rank's median call of broadcast, allreduce and
allgather (per rank) at 4-32 KiB, by the default choice and each algorithm forced (OSU loop:
a nezha barrier between calls, 10 warm-up + 40 timed). Rank 0 prints one JSON line."""
import json, time
import numpy as np, nezha
from nezha.planner import ALGO_NAMES
t0 = time.perf_counter()
c = nezha.Communicator()
start = time.perf_counter() - t0
p = c.planner
step = c.stats()["probe"]["step"]
choice = {coll: {kb: ALGO_NAMES[p.algorithm(coll, kb << 10)] for kb in (2, 4, 8, 16, 32, 64)}
          for coll in ("broadcast", "allreduce", "allgather", "reduce_scatter")}
choice["allgather_per_rank"] = {kb: ALGO_NAMES[p.algorithm("allgather", (kb << 10) * c.size)]
                                for kb in (2, 4, 8)}


def force(small=None, algo="auto"):
    p.small, p.algo = small, algo   # the algo setter forgets the choices
    p._choice_memo, p._hier_memo = {}, {}
    c._forget_plans()


def timed(fn):
    ts = []
    for i in range(50):
        c.barrier()
        a = time.perf_counter(); fn(); ts.append(time.perf_counter() - a)
    m = np.array([np.median(ts[10:])])
    c.allreduce(m, op=nezha.MAX)
    return round(float(m[0]) * 1e6, 1)


us = {}
for kb in (4, 8, 16, 32):
    buf = np.ones((kb << 10) // 4, np.float32)
    for name, s in (("default", None), ("tree", 1 << 30), ("chain", 1)):
        force(s); us[f"broadcast {kb}K {name}"] = timed(lambda: c.broadcast(buf, root=0))
    for name in ("auto", "rd", "rab", "ring"):
        force(None, name); us[f"allreduce {kb}K {name}"] = timed(lambda: c.allreduce(buf))
    if kb <= 8:
        rb = np.ones(buf.size * c.size, np.float32)
        for name, s in (("default", None), ("rd", 1 << 30), ("ring", 1)):
            force(s); us[f"allgather {kb}K/rank {name}"] = timed(lambda: c.allgather(buf, rb))
force()
if c.rank == 0:
    print(json.dumps({"start_s": round(start, 3), "step": step, "hop": getattr(p.layout, "hop", None) and p.layout.hop.describe(),
                      "rates": [round(r * 8e-6) for r in p.rail_rates], "choice": choice, "us": us}))
c.close()
