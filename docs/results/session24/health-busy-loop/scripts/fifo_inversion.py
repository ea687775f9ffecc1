"""One CPU (run under taskset -c 0), both ranks' health threads SCHED_FIFO 2 (as ee1c0ba made
them): rank 0 holds a control endpoint's read lock for 0.2 s from an ordinary thread (which
must wake from its sleeps to let go). Wall time of the hold, and health polls meanwhile."""
import os, time, threading
import tests.test_health_thread as th

base = th._native_tids()

def body(comm, sync):
    eng = comm._engine
    sync.wait()
    if comm.rank == 1:
        sync.wait(); sync.wait(); return None
    for t in th._native_tids() - base:
        os.sched_setscheduler(t, os.SCHED_FIFO, os.sched_param(2))
    sync.wait()
    p0 = eng.health_counts()[0]; t0 = time.monotonic()
    eng.hold_ctrl_read(1, 0.2)
    dt = time.monotonic() - t0; p = eng.health_counts()[0] - p0
    for t in th._native_tids() - base:
        os.sched_setscheduler(t, os.SCHED_OTHER, os.sched_param(0))
    sync.wait()
    return dt, p

for i in range(2):
    (dt, p), _ = th.pair(body, config=dict(th.CONFIG, RAIL_TIMEOUT="5"), timeout=60)
    print(f"hold of 0.2 s took {dt:.2f} s, health polls {p}", flush=True)
