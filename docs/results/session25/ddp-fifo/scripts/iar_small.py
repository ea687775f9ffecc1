"""Small non-blocking allreduce through the progress thread (what auto changes besides DDP:
a real-time progress thread does not spin): median and p90 us of iallreduce(8 B).wait() and
of allreduce(8 B) (caller's thread, untouched), per NEZHA_PROGRESS_SCHED of the environment.
Run: nezha mpirun -np 2 python iar_small.py (2 ranks, shm, a core each)."""
import sys
import time

import numpy as np

import nezha

comm = nezha.Communicator()
x = np.ones(2, dtype=np.int32)
out = {}
for name, fn in (("iallreduce", lambda: comm.iallreduce(x).wait(10)), ("allreduce", lambda: comm.allreduce(x))):
    for _ in range(300):
        fn()
    ts = []
    for _ in range(3000):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts = np.array(ts) * 1e6
    out[name] = (np.median(ts), np.percentile(ts, 90))
if comm.rank == 0:
    print(" ".join(f"{k} median {m:.1f} p90 {p:.1f} us" for k, (m, p) in out.items()), flush=True)
comm.close()
sys.exit(0)
