"""One rank of the allreduce-step experiment (run by exp.py through Lab.run / mpirun).

The OSU loop of bench/_common.time_loop (call, then a barrier, outside the timer), with
optional extra idle time after the barrier (LOOP_GAP_US, spin) and, per iteration, the call's
and the barrier's time; the rank's rail tx/rx bytes over the timed loop (/proc/net/dev of its
namespace); for nezha the plan and an op trace of the last few calls (Engine.trace_ops).
env: LOOP_SIZE (bytes), LOOP_ITERS, LOOP_WARM, LOOP_GAP_US, LOOP_OUT (json per rank),
LOOP_BACKEND (nezha | mpi), LOOP_TRACE (calls traced at the end, nezha)."""
import json, os, sys, time
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../../../.."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from _common import parse_args  # noqa: E402
from _backends import make_backend  # noqa: E402

size = int(os.environ.get("LOOP_SIZE", "8192"))
iters = int(os.environ.get("LOOP_ITERS", "1000"))
warm = int(os.environ.get("LOOP_WARM", "200"))
gap = float(os.environ.get("LOOP_GAP_US", "0")) * 1e-6
ntrace = int(os.environ.get("LOOP_TRACE", "0"))
out = os.environ["LOOP_OUT"]
args = parse_args(__doc__, "collective", ["--backend", os.environ.get("LOOP_BACKEND", "nezha"),
                                          "-m", f"{size}:{size}"])
be = make_backend(args)


def netdev():
    res = {}
    with open("/proc/net/dev") as f:
        for ln in f.readlines()[2:]:
            name, rest = ln.split(":", 1)
            v = rest.split()
            res[name.strip()] = (int(v[8]), int(v[0]), int(v[9]), int(v[1]))  # tx B, rx B, tx pkts, rx pkts
    return res


count = size // 4
send, recv = np.ones(count, np.float32), np.zeros(count, np.float32)
clock = time.perf_counter
for _ in range(warm):
    be.allreduce(send, recv)
    be.barrier()
eng = getattr(getattr(be, "comm", None), "_engine", None)
be.barrier()
traces = []
call, bar, starts = np.empty(iters), np.empty(iters), np.empty(iters)
n0 = netdev()
for i in range(iters):
    if eng is not None and ntrace and i == iters - ntrace:
        eng.trace_ops(1, 1 << 16)
    t0 = clock()
    be.allreduce(send, recv)
    t1 = clock()
    if eng is not None and ntrace and i >= iters - ntrace:
        traces.append(eng.op_times())
    be.barrier()
    t2 = clock()
    if gap:
        time.sleep(gap)  # idle (yields the CPU): the link's bucket refills
    call[i], bar[i], starts[i] = t1 - t0, t2 - t1, t0
n1 = netdev()
assert recv[0] == be.size and recv[-1] == be.size
rec = {"rank": be.rank, "size": size, "iters": iters, "gap_us": gap * 1e6,
       "backend": os.environ.get("LOOP_BACKEND"), "file": be.__class__.__module__,
       "call_us": (call * 1e6).round(1).tolist(), "barrier_us": (bar * 1e6).round(1).tolist(),
       "start_us": ((starts - starts[0]) * 1e6).round(1).tolist(),
       "net": {k: [n1[k][j] - n0[k][j] for j in range(4)] for k in n1 if k.startswith("rail")}}
if eng is not None:
    import nezha
    rec["nezha"] = nezha.__file__
    rec["plan"] = str(be.comm.stats().get("last_plan"))
    if ntrace:
        rec["trace"] = traces
        rec["polls"] = eng.run_polls()
with open(f"{out}.rank{be.rank}.json", "w") as f:
    json.dump(rec, f)
