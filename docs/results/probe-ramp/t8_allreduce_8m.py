import os, time, json, numpy as np
_r = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
if os.environ.get("PIN") == "1":
    os.sched_setaffinity(0, {_r % 2})
elif os.environ.get("PIN") == "2":
    os.sched_setaffinity(0, {_r // 2})
import nezha
comm = nezha.Communicator()
T = {"run": 0.0, "agree": 0.0}
orig_run, orig_agree = comm._run, comm._fo.agree
def run(*a, **k):
    t = time.perf_counter(); r = orig_run(*a, **k); T["run"] += time.perf_counter() - t
    if T.get("ch") is None:
        T["ch"] = [round(x / 1e6, 1) for x, _ in comm._engine.channel_times_ns()]
    return r
def agree(*a, **k):
    t = time.perf_counter(); r = orig_agree(*a, **k); T["agree"] += time.perf_counter() - t; return r
comm._run, comm._fo.agree = run, agree
n = int(os.environ.get("SZ", 8 << 20)) >> 2
a = np.ones(n, np.float32); b = np.empty_like(a)
res = []
import resource
ru0 = None
for i in range(int(os.environ.get("IT", 12))):
    comm.barrier()
    if i == 2:
        ru0 = resource.getrusage(resource.RUSAGE_SELF); ctx0 = open("/proc/self/status").read()
    T["run"] = T["agree"] = 0.0
    T["ch"] = None
    t0 = time.perf_counter()
    comm.allreduce(a, b)
    t1 = time.perf_counter()
    res.append((round((t1 - t0) * 1e3, 2), round(T["run"] * 1e3, 2), round(T["agree"] * 1e3, 2), T["ch"]))
if True:
    import statistics as st
    r = res[2:]
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    k = len(res) - 2
    print("CPU", comm.rank, "user %.2f sys %.2f ms/coll vol %d invol %d" % ((ru1.ru_utime - ru0.ru_utime) * 1e3 / k, (ru1.ru_stime - ru0.ru_stime) * 1e3 / k, (ru1.ru_nvcsw - ru0.ru_nvcsw) // k, (ru1.ru_nivcsw - ru0.ru_nivcsw) // k), flush=True)
    print("ITER", comm.rank, json.dumps([x[3] for x in r]), flush=True)
    print(comm.rank, os.environ.get("NEZHA_X"), "total %.2f run %.2f agree %.2f" % tuple(st.median(x[i] for x in r) for i in range(3)), "ch", r[-1][3], r[-2][3], r[-3][3])
comm.close()
