"""Session 29 (h42): nezha's allgather plan and per-rank times at 1-32 KiB a rank in an
OSU loop (a barrier after each call, outside the timer) like bench/_common.time_loop.
Rank 0 prints, per size: algorithm, the plan's slices (rail, elements), the model's
candidate times, and over ranks: mean call, median cycle (start to next start).
Run in a lab: nezha lab run -- python probe.py [iters]"""
import sys, time
import numpy as np
import nezha
from nezha.planner import ALGO_NAMES

iters = int(sys.argv[1]) if len(sys.argv) > 1 else 400
sizes = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "1024,2048,4096,8192,16384,32768").split(",")]
c = nezha.Communicator()
P = c.planner
for size in sizes:
    cnt = size // 4
    send, recv = np.ones(cnt, np.float32), np.zeros(cnt * c.size, np.float32)
    for _ in range(50):
        c.allgather(send, recv); c.barrier()
    c.barrier()
    calls, starts = np.empty(iters), np.empty(iters)
    for i in range(iters):
        t0 = time.perf_counter(); c.allgather(send, recv); calls[i] = time.perf_counter() - t0
        starts[i] = t0
        c.barrier()
    cyc = np.median(np.diff(starts))
    algo = P.algorithm("allgather", size * c.size)
    plan = P.blocks("allgather", cnt, 4, algo)
    g = c.allgather(np.array([calls.mean() * 1e6, np.median(calls) * 1e6, cyc * 1e6]), np.zeros(3 * c.size)) if False else None
    allv = np.zeros(3 * c.size)
    c.allgather(np.array([calls.mean() * 1e6, np.median(calls) * 1e6, cyc * 1e6]), allv)
    if c.rank == 0:
        a = allv.reshape(c.size, 3)
        times = P.flat_times("allgather", size * c.size)
        print(f"{size:6d} {ALGO_NAMES[algo]} slices {[(s[0], s[2]) for s in plan.slices]} "
              f"model {{{', '.join(f'{k} {v*1e6:.0f}' for k, v in times.items())}}} "
              f"mean-call {a[:,0].mean():.0f} per-rank {np.round(a[:,0]).astype(int).tolist()} cycle {a[:,2].mean():.0f}", flush=True)
if c.rank == 0:
    print(P.describe())
    print(P.describe_hop())
    print(P.describe_piece())
