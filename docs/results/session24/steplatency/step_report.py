"""One job: rank 0 prints the start-up step latency (comm.stats()["probe"]["step"]), the
switch points it gave, and the fast path's 8 B allreduce (median of 200 calls) beside it."""
import json
import time

import numpy as np

import nezha

c = nezha.Communicator()
x = np.ones(2, np.int32)
ts = []
for i in range(220):
    c.barrier()
    t0 = time.perf_counter()
    c.allreduce(x)
    ts.append(time.perf_counter() - t0)
med = float(np.median(ts[20:])) * 1e6
meds = c._boot.allgather(med)
if c.rank == 0:
    print("STEP", json.dumps(c.stats()["probe"].get("step")))
    print("ALPHA_US %.1f SHM_US %.1f (%s)" % (c.planner.layout.rail_alpha * 1e6,
                                            c.planner.layout.shm_alpha * 1e6, getattr(c.planner, "alpha_why", "constants")))
    print("FAST_8B_US per rank", " ".join("%.1f" % m for m in meds))
    print("TABLE", json.dumps(c.planner.switch_table()))
c.close()
