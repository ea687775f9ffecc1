"""Repro v2: N ranks on loop rails, async allreduces (DDP-like buckets); rank DOOMED leaves
abruptly at step DIE_AT (HOW=exit|kill|raise, WHEN=idle|inflight); survivors: per-thread CPU."""
import os, sys, time, signal, threading
import numpy as np
import nezha

def tasks():
    return set(int(t) for t in os.listdir("/proc/self/task"))

def cpu(tid):
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            s = f.read()
        fl = s[s.rindex(")") + 2:].split()
        return (int(fl[11]) + int(fl[12])) / os.sysconf("SC_CLK_TCK"), int(fl[37]), int(fl[38])
    except FileNotFoundError:
        return None

rank = int(os.environ["RANK"]); doomed = int(os.environ.get("DOOMED", "3"))
how = os.environ.get("HOW", "exit"); when = os.environ.get("WHEN", "idle")
die_at = int(os.environ.get("DIE_AT", "5"))
before = tasks()
comm = nezha.Communicator()
pyt = {t.native_id for t in threading.enumerate()}
health = sorted(tasks() - before - pyt)
if os.environ.get("HEALTH_FIFO") == "1":
    for t in health:
        os.sched_setscheduler(t, os.SCHED_FIFO, os.sched_param(2))
pass
bufs = [np.arange(1 << 18, dtype=np.int64) for _ in range(4)]
err = None
t_err = None
hc0, ht0 = comm._engine.health_counts(), time.monotonic()
hcpu0 = cpu(health[0])[0] if health else 0
try:
    for step in range(1000):
        if rank == doomed and step == die_at and when == "idle":
            time.sleep(0.05)
            if how == "kill": os.kill(os.getpid(), signal.SIGKILL)
            if how == "raise": raise SystemExit("doomed leaves")
            os._exit(0)
        reqs = []
        for b in bufs:
            b[:] = np.arange(b.size) + rank
            reqs.append(comm.iallreduce(b))
            if rank == doomed and step == die_at and when == "inflight":
                if how == "kill": os.kill(os.getpid(), signal.SIGKILL)
                os._exit(0)
        t_err = time.monotonic()
        for r in reqs:
            r.wait()
        n = comm.size
        for b in bufs:
            assert np.array_equal(b, np.arange(b.size) * n + n * (n - 1) // 2)
        if step == 2:
            print(f"R{rank} health policy {cpu(health[0])[2]} prio {cpu(health[0])[1]}", flush=True)
        hc_last, hcpu_last, ht_last = comm._engine.health_counts(), cpu(health[0])[0], time.monotonic()
        time.sleep(0.01)
except Exception as exc:
    err = exc
    print(f"R{rank} step {step} raised after {time.monotonic()-t_err:.2f}s: {type(exc).__name__}: {str(exc)[:250]}", flush=True)
hc1, hcpu1 = hc_last, hcpu_last
print(f"R{rank} training {ht_last-ht0:.1f}s steps {step} health polls {hc1[0]-hc0[0]} refused {hc1[1]-hc0[1]} health cpu {hcpu1-hcpu0:.2f}s run_polls {comm._engine.run_polls()}", flush=True)
new = sorted(tasks() - before)
hc0 = comm._engine.health_counts()
time.sleep(float(os.environ.get("IDLE", "2")))
c0 = {t: cpu(t) for t in new}
t0 = time.monotonic(); time.sleep(1.0); dt = time.monotonic() - t0
c1 = {t: cpu(t) for t in new}
use = {t: (round((c1[t][0] - c0[t][0]) / dt, 2), c1[t][2]) for t in new if c0.get(t) and c1.get(t)}
hc1 = comm._engine.health_counts()
print(f"R{rank} threads (cpu/s, policy) {use} health={health} idle polls {hc1[0]-hc0[0]} refused {hc1[1]-hc0[1]}", flush=True)
t0 = time.monotonic()
try:
    a = np.arange(1000, dtype=np.int64)
    comm.allreduce(a)
    print(f"R{rank} next allreduce returned after {time.monotonic()-t0:.2f}s", flush=True)
except Exception as exc:
    print(f"R{rank} next allreduce raised after {time.monotonic()-t0:.2f}s: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
t0 = time.monotonic()
try:
    comm.close()
except Exception as exc:
    print(f"R{rank} close raised {type(exc).__name__}", flush=True)
print(f"R{rank} closed after {time.monotonic()-t0:.2f}s", flush=True)
