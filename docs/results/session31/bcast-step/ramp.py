"""The first second after nezha.Communicator(): OSU's loop (call timed, the library's barrier
after it) from the moment the communicator is up, binned by time since then, to see whether
the first sizes of a bench run pay a start-up cost (session 31, h54, issue 17).

usage: ramp.py MODE SECONDS [NBYTES]
  MODE nz: nezha broadcast (root 0) + nezha barrier; mpi: Open MPI Bcast + Barrier (nezha's
  communicator made first all the same, so both start from the same state of the host);
  nz-rs / mpi-rs: reduce_scatter of NBYTES in all (OSU's size) instead.
Prints per 100 ms bin: calls, OSU average (mean over ranks of each rank's mean call time) and
rank 0's median period."""
import sys
import time

import numpy as np
from mpi4py import MPI

import nezha

world = MPI.COMM_WORLD
mode, secs = sys.argv[1], float(sys.argv[2])
nbytes = int(sys.argv[3]) if len(sys.argv) > 3 else 4
nz = nezha.Communicator()
world.Barrier()
t_up = time.perf_counter()
t_up = world.bcast(t_up, root=0)  # one clock on one host: rank 0's stamp for everyone
if mode.endswith("rs"):
    blk = max(1, nbytes // 4 // world.size)
    send, recv = np.ones(blk * world.size, np.float32), np.zeros(blk, np.float32)
    call = ((lambda: nz.reduce_scatter(send, recv)) if mode.startswith("nz")
            else (lambda: world.Reduce_scatter_block(send, recv, op=MPI.SUM)))
else:
    buf = np.ones(max(1, nbytes // 4), np.float32)
    call = (lambda: nz.broadcast(buf, 0)) if mode.startswith("nz") else (lambda: world.Bcast(buf, 0))
bar = nz.barrier if mode.startswith("nz") else world.Barrier
clk = time.perf_counter
rows = []
stop = False
while not stop:
    t0 = clk()
    call()
    t1 = clk()
    bar()
    rows.append((t0 - t_up, t1 - t0))
    # every rank stops at the same call: rank 0's clock decides, told through the barrier
    # pattern (a bcast every 256 calls)
    if len(rows) % 256 == 0:
        stop = world.bcast(t1 - t_up > secs, root=0)
allr = world.gather(np.array(rows), root=0)
if world.rank == 0:
    n = min(len(x) for x in allr)
    a = np.array([x[:n] for x in allr])  # rank, call, (start, dur)
    start = a[0, :, 0]
    per = np.diff(start)
    print(f"# {mode} {nbytes} B, {n} calls; bins of 100 ms after the communicator is up")
    for b in range(int(np.ceil(start[-1] / 0.1))):
        m = (start >= b * 0.1) & (start < (b + 1) * 0.1)
        if not m.any():
            continue
        osu = a[:, m, 1].mean() * 1e6
        pm = m[:-1]
        p = np.median(per[pm]) * 1e6 if pm.any() else float("nan")
        print(f"{b * 100:5d}-{(b + 1) * 100:5d} ms  calls {int(m.sum()):5d}  OSU {osu:6.1f} us"
              f"  period {p:6.1f} us  per-rank {' '.join(f'{a[r, m, 1].mean() * 1e6:.1f}' for r in range(len(a)))}")
nz.close()
