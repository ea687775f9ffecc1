"""One job: rank 0 prints the start-up step latency, the probe's rail rates, the switch
points, and per size the model's times per algorithm (flat_times, us), its choice and the
channels split() uses."""
import json

import numpy as np

import nezha
from nezha.planner import ALGO_NAMES

c = nezha.Communicator()
if c.rank == 0:
    print("MODEL tree", nezha.__file__)
c.allreduce(np.ones(2, np.int32))
p = c.planner
if c.rank == 0:
    print("STEP", json.dumps(c.stats()["probe"].get("step")))
    print("RATES_MBPS", [round(r * 8e-6) for r in p.rail_rates], "ALPHA_US %.1f" % (p.layout.rail_alpha * 1e6),
          p.describe_piece())
    print("TABLE", json.dumps(p.switch_table()))
    for coll in ("allreduce", "allgather", "reduce_scatter"):
        for n in (8192, 16384, 32768, 65536, 131072):
            t = {k: round(v * 1e6) for k, v in p.flat_times(coll, n).items()}
            blocks = 1 if coll == "allreduce" else c.size
            sl, _ = p.split(coll, n // 4 // blocks, 4, blocks)
            print("MODEL", coll, n, ALGO_NAMES[p.algorithm(coll, n)], t, "chans",
                  sorted(set(s[0] for s in sl)))
c.close()
