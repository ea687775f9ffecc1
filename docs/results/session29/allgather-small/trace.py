"""Session 29 (h42): the engine's op trace (Engine.trace_ops) of nezha's allgather in an
OSU loop (barrier after each call): per rank, the median over calls of each op's finish
time after the call's start (kind 0 send, 1 recv; peer; channel; bytes), the call's start
offset from the earliest rank's, and its time. Run in a lab:
nezha lab run -- python trace.py SIZE [iters]"""
import sys, time
import numpy as np
import nezha

size = int(sys.argv[1]); iters = int(sys.argv[2]) if len(sys.argv) > 2 else 300
c = nezha.Communicator()
eng = c._engine
cnt = size // 4
send, recv = np.ones(cnt, np.float32), np.zeros(cnt * c.size, np.float32)
for _ in range(100):
    c.allgather(send, recv); c.barrier()
eng.trace_ops(1, 4096)
rows, starts, calls = [], [], []
for i in range(iters):
    t0 = time.perf_counter(); c.allgather(send, recv); calls.append(time.perf_counter() - t0)
    starts.append(t0)
    tr = eng.op_times()
    rows.append(tr)
    c.barrier()
eng.trace_ops(0, 0)
ops = rows[-1]["ops"]
fin = np.array([[o[6] for o in r["ops"]] for r in rows if len(r["ops"]) == len(ops)]) / 1e3
t0s = np.array([r["t0"] for r in rows]) / 1e3  # us, CLOCK_MONOTONIC
allt0 = np.zeros(c.size * iters)
c.allgather(t0s.astype(np.float64), allt0)
allt0 = allt0.reshape(c.size, iters)
off = np.median(t0s - allt0.min(0))
desc = " ".join(f"{'SR'[o[0]] if o[0] < 2 else o[0]}{o[1]}c{o[2]}:{o[3]}B@{np.median(fin[:, j]):.0f}"
                for j, o in enumerate(ops))
line = f"rank {c.rank}: start +{off:.0f} us, call {np.median(calls) * 1e6:.0f} (mean {np.mean(calls) * 1e6:.0f}) | {desc}"
lines = [None] * c.size
buf = np.zeros(4096, np.uint8); b = line.encode()[:4096]; buf[:len(b)] = np.frombuffer(b, np.uint8)
out = np.zeros(4096 * c.size, np.uint8)
c.allgather(buf, out)
if c.rank == 0:
    for r in range(c.size):
        print(bytes(out[r * 4096:(r + 1) * 4096]).rstrip(b"\0").decode(), flush=True)
