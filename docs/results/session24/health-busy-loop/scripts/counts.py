"""The two hold tests' counts, printed (tests/test_health_thread.py's bodies)."""
import sys, time, threading
import numpy as np
import tests.test_health_thread as th

def health(comm, sync):
    eng = comm._engine
    sync.wait()
    if comm.rank == 1:
        sync.wait(); return None
    p = th._polls_over(eng, lambda: eng.hold_ctrl_read(1, 1.0))
    idle = th._polls_over(eng, lambda: time.sleep(1.0))
    sync.wait()
    return p, idle

def run(comm, sync):
    eng = comm._engine
    a = np.arange(300_000, dtype=np.int64) + comm.rank
    sync.wait()
    if comm.rank == 1:
        time.sleep(0.8); comm.allreduce(a); return None
    t = threading.Thread(target=th._hold, args=(eng, 1, 1.0), daemon=True); t.start()
    time.sleep(0.05)
    p0 = eng.run_polls(); comm.allreduce(a); p = eng.run_polls() - p0
    t.join(10)
    return p

for i in range(2):
    (p, idle), _ = th.pair(health)
    r, _ = th.pair(run, config=dict(th.CONFIG, RAIL_TIMEOUT="2"))
    print(f"health polls: 1 s held {p}, 1 s idle {idle}; run polls while held ~0.8 s: {r}", flush=True)
