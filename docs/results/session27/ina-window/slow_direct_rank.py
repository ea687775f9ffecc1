import json, time, numpy as np, nezha
comm = nezha.Communicator()
big = np.ones((4 << 20) // 4, np.float32); out = np.empty_like(big)
res = []
for nb, calls in ((1 << 20, 35), (2 << 20, 18), (4 << 20, 13)):
    n = nb // 4
    o0, f0 = comm._ina.offloads, comm._ina.failures
    t = []
    for i in range(calls):
        t0 = time.perf_counter(); comm.allreduce(big[:n], out[:n]); t.append(time.perf_counter() - t0)
    res.append(dict(mib=nb >> 20, offloads=comm._ina.offloads - o0, failures=comm._ina.failures - f0,
                    alive=comm._ina.alive, ms=[round(x * 1e3) for x in t]))
if comm.rank == 0:
    print("RESULT", json.dumps(res))
    print("WINDOW", comm._ina.client.window if comm._ina.client else None, getattr(comm._ina, "window_why", ""))
comm.close()
