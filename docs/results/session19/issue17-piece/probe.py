# Per-call wall, CPU and plan of a 64 KiB (SZ) allreduce; rank 0 prints one JSON line.
# Run by matrix.sh under `nezha lab run`. NOGUARD=1 drops the guard thread; NZ_LAZY_MULTI only
# acted with a throwaway edit of failover.lazy_ok (`len(plan.slices) == 1 or os.environ.get(...)`).
import os, sys, time, json
import numpy as np
import nezha
import nezha.failover as _fo
GL = [0, 0.0, 0]
_orig = _fo._guard_look
def _gl(comm):
    t = time.perf_counter(); r = _orig(comm); GL[1] += time.perf_counter() - t; GL[0] += 1; GL[2] += r is True
    return r
_fo._guard_look = _gl
if os.environ.get('NOGUARD'):
    _fo._guard = lambda ref: None
c = nezha.Communicator()
n = int(os.environ.get("SZ", 65536)) // 4
a = np.ones(n, np.float32); b = np.empty_like(a)
for _ in range(30): c.allreduce(a, b)
c.barrier()
T, CH = [], []
prof = None
if os.environ.get("PROF") and c.rank == 0:
    import cProfile; prof = cProfile.Profile(); prof.enable()
cpu0 = os.times(); GL0 = list(GL)
for _ in range(int(os.environ.get("IT", 200))):
    t = time.perf_counter(); c.allreduce(a, b); T.append(time.perf_counter() - t)
    CH.append([x for x, _ in c._engine.channel_times_ns()])
cpu1 = os.times()
if prof:
    prof.disable()
st = c.stats()
T = np.array(T) * 1e6; CH = np.array(CH) / 1e3
out = {"rank": c.rank, "p10/50/90": np.percentile(T, [10, 50, 90]).round().tolist(),
       "chan_p50": np.percentile(CH, 50, axis=0).round().tolist(),
       "tx_kicks": st["tx_kicks"], "votes": st["votes"], "resends": st["vote_resends"], "fast": st["fast_path_calls"],
       "cpu_us_per_call": round(((cpu1.user-cpu0.user)+(cpu1.system-cpu0.system))/len(T)*1e6),
       "guard_looks": GL[0]-GL0[0], "guard_again": GL[2]-GL0[2], "guard_ms": round((GL[1]-GL0[1])*1e3, 1), "plan": st["last_plan"], "model": st["model"] if os.environ.get("MODEL") else None}
print(json.dumps(out), flush=True)
if prof:
    import pstats, io; s = io.StringIO(); pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30); print(s.getvalue())
