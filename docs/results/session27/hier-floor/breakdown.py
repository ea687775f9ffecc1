"""Per-rank timing of back-to-back and barrier-separated large allreduces (run under
`nezha lab run`): wall time per call (CLOCK_MONOTONIC, shared by every namespace, so
start/end skew across ranks is comparable), per-channel completion times and bytes
(Engine.channel_times_ns), the plan, and, when the engine has the op-time hook
(NEZHA_OP_TIMES=1 and engine.op_times()), per-op finish times of the last call.
Writes one JSON per rank to $BD_OUT/rank<r>.json."""
import json, os, sys, time
import numpy as np
import nezha

size = int(os.environ.get("BD_SIZE", str(16 << 20)))
reps = int(os.environ.get("BD_REPS", "10"))
out = os.environ.get("BD_OUT", "/tmp/h34-bd")
comm = nezha.Communicator()
n = size // 4
a = np.ones(n, np.float32)
r = np.empty_like(a)
for _ in range(3):
    comm.allreduce(a, r)
assert r[0] == comm.size and r[-1] == comm.size
if os.environ.get("BD_NOSYNC"):  # experiment: no model sync after warm-up (same on every rank)
    comm.planner.model.sync_bytes = comm.planner.model.sync_max = 1 << 50
rec = {"rank": comm.rank, "size": comm.size, "bytes": size, "file": nezha.__file__,
       "sep": [], "b2b": None}
eng = comm._engine
if hasattr(eng, "trace_ops"):
    eng.trace_ops(200, 1 << 20)
rec["kinds"] = eng.endpoint_kinds()
rec["local"] = list(comm._hosts[[comm.rank in h for h in comm._hosts].index(True)]) if getattr(comm, "_hosts", None) else None
rec["hosts"] = [list(h) for h in comm._hosts] if getattr(comm, "_hosts", None) else None
st0 = comm.stats()["rails"]
syncs0 = comm.planner.model.syncs
# where the time after the engine goes: wrap the executor's steps (this script only)
prof = {}
def wrap(obj, name):
    f = getattr(obj, name)
    def w(*a, **k):
        t = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        try:
            return f(*a, **k)
        finally:
            prof.setdefault(name, []).append((t, time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
    setattr(obj, name, w)
if os.environ.get("BD_PROF"):
    for obj, name in ((comm._fo, "agree"), (comm, "_feed_model"), (comm, "_sync_model"),
                      (comm, "_run"), (comm, "_execute"), (comm._fo, "_vote")):
        if hasattr(obj, name):
            wrap(obj, name)
for i in range(reps):
    comm.barrier()
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    comm.allreduce(a, r)
    t1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    rec["sep"].append({"t0": t0, "t1": t1, "chan": eng.channel_times_ns(),
                       "plan": comm.stats()["last_plan"]})
    if hasattr(eng, "op_times"):
        rec["sep"][-1]["ops"] = eng.op_times()
comm.barrier()
t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
for i in range(reps):
    comm.allreduce(a, r)
t1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
rec["b2b"] = {"t0": t0, "t1": t1, "n": reps}
rec["prof"] = prof
rec["model"] = {"syncs_timed": comm.planner.model.syncs - syncs0,
                "sync_bytes": comm.planner.model.sync_bytes}
st1 = comm.stats()["rails"]
rec["rails"] = {k: {kk: st1[k][kk] - st0[k][kk] for kk in st1[k]} for k in st1}
assert r[0] == comm.size
os.makedirs(out, exist_ok=True)
with open(f"{out}/rank{comm.rank}.json", "w") as f:
    json.dump(rec, f)
comm.close()
