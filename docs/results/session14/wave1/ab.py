"""A/B: median time per call (max over ranks per call) for collectives that vote, and a pure vote."""
import time, json, os, sys
import numpy as np
import nezha
from nezha import failover as fo
comm = nezha.Communicator()
def bench(fn, reps=80, warm=20):
    for _ in range(warm):
        fn()
    ts = np.zeros(reps)
    for i in range(reps):
        comm.barrier()
        t = time.perf_counter()
        fn()
        ts[i] = time.perf_counter() - t
    ts = comm.allreduce(ts, op=nezha.ReduceOp.MAX) if hasattr(nezha, "ReduceOp") else ts
    return float(np.median(ts) * 1e6)
out = {}
for n in (4 << 10, 16 << 10):
    x = np.ones(n // 4, np.float32)
    out[f"bcast {n >> 10}K"] = bench(lambda: comm.broadcast(x, root=0))
for n in (64 << 10, 256 << 10, 1 << 20):
    x = np.ones(n // 4, np.float32)
    out[f"allreduce {n >> 10}K"] = bench(lambda: comm.allreduce(x), reps=40 if n > 300000 else 80)
for n in (16 << 10, 128 << 10):
    x = np.ones(n // 4, np.float32)
    y = np.empty(comm.size * x.size, np.float32)
    out[f"allgather {n >> 10}K"] = bench(lambda: comm.allgather(x, y))
out["vote"] = bench(lambda: comm._fo._vote(None, comm._st.ncoll, 0, 0), reps=150)
if comm.rank == 0:
    print(os.environ.get("TAG"), json.dumps({k: round(v) for k, v in out.items()}), flush=True)
comm.close()
