"""Small broadcast / reduce_scatter: per call µs and per call system calls, nezha against
Open MPI, in one job (session 31, h54, issue 17).

OSU's loop: the call timed, then a barrier outside the timer (each library its own). Per
round and variant: mean over ranks of each rank's mean call time (the OSU average), rank 0's
loop period (call + barrier), and per call the voluntary / involuntary context switches
(getrusage, the whole process) of each rank. Variants alternate order every round.

With STEP_PERF=DIR each rank also writes "enable" / "disable" to DIR/ctl.RANK (perf stat
--control fifo) around one extra counting loop of each variant (call + its barrier, as the
OSU loop; the nz-bar / mpi-bar variants count two barriers an iteration, to subtract), so perf
counts only those iterations. Run one variant per job then.

usage: step.py VARIANTS SIZES ITERS ROUNDS
  VARIANTS: nz-bcast, mpi-bcast, nz-rs, mpi-rs, nz-bar, mpi-bar (comma list); nz-bcast-tr:
  the op trace (TIMELINE); ":spin=N" after an nz variant: its own communicator, NEZHA_SPIN_US=N;
  "/mb" or "/nb" at the end: the loop's barrier is Open MPI's or nezha's whatever the call
  SIZES: bytes (broadcast: the buffer; reduce_scatter: the whole send buffer, as OSU)
"""
import json
import os
import resource
import sys
import time

import numpy as np
from mpi4py import MPI

import nezha

world = MPI.COMM_WORLD
rank, size = world.rank, world.size
variants = sys.argv[1].split(",")
sizes = [int(x) for x in sys.argv[2].split(",")]
iters, rounds = int(sys.argv[3]), int(sys.argv[4])
perf_dir = os.environ.get("STEP_PERF")
nz = nezha.Communicator()
COMMS = {"": nz}


def comm_of(v):
    """The communicator of a variant: "nz-bcast:spin=0" has its own with NEZHA_SPIN_US=0."""
    _, _, opt = v.split("/")[0].partition(":")
    if opt not in COMMS:
        cfg = {}
        for kv in opt.split("+"):
            k, _, val = kv.partition("=")
            cfg[{"spin": "SPIN_US"}[k]] = val
        COMMS[opt] = nezha.Communicator(config=cfg)
    return COMMS[opt]


def make(v, s):
    v = v.split("/")[0]  # the loop's barrier (barrier_of) is no part of the call
    c = comm_of(v)
    base = v.partition(":")[0]
    if base.endswith("-tr"):
        inner = make(v.replace("-tr", "", 1), s)
        return traced(lambda: inner(), (v, s), c)
    v = base
    if v.endswith("bcast"):
        buf = np.ones(max(1, s // 4), np.float32)
        if v.startswith("nz"):
            return lambda: c.broadcast(buf, 0)
        return lambda: world.Bcast(buf, 0)
    if v.endswith("rs"):
        blk = max(1, s // 4 // size)
        send, recv = np.ones(blk * size, np.float32), np.zeros(blk, np.float32)
        if v.startswith("nz"):
            return lambda: c.reduce_scatter(send, recv)
        return lambda: world.Reduce_scatter_block(send, recv, op=MPI.SUM)
    if v.endswith("bar"):
        return c.barrier if v.startswith("nz") else world.Barrier
    raise SystemExit(f"unknown variant {v}")


TRACE = {}


def traced(call, key, c):
    """call, with a .post the loop runs after its exit stamp: keep the engine's op times of
    the run (CLOCK_MONOTONIC, the clock of time.perf_counter and of every rank here)."""
    eng = c._engine
    eng.trace_ops(1, 64)
    rows = TRACE.setdefault(key, [])

    call.post = lambda: rows.append(eng.op_times())
    call.stamps = []
    return call


def barrier_of(v):
    """The loop's barrier: the variant's library's, or "/mb" Open MPI's, "/nb" nezha's."""
    if v.endswith("/mb"):
        return world.Barrier
    if v.endswith("/nb"):
        return comm_of(v).barrier
    return comm_of(v).barrier if v.startswith("nz") else world.Barrier


def loop(call, bar, n, warm=50):
    for _ in range(warm):
        call()
        bar()
    bar()
    t = np.empty((n, 2))
    clk = time.perf_counter
    post = getattr(call, "post", None)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    for i in range(n):
        t0 = clk()
        call()
        t[i] = (t0, clk())
        if post is not None:
            post()
            call.stamps.append((t0, t[i][1]))
        bar()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return t, (r1.ru_nvcsw - r0.ru_nvcsw) / n, (r1.ru_nivcsw - r0.ru_nivcsw) / n


calls = CALLS = {(v, s): make(v, s) for v in variants for s in sizes}
res = {}
for rnd in range(rounds):
    for s in sizes:
        for v in (variants if rnd % 2 == 0 else variants[::-1]):
            t, vol, inv = loop(calls[(v, s)], barrier_of(v), iters)
            allt = world.gather((t, vol, inv), root=0)
            if rank == 0:
                ab = np.array([x[0] for x in allt]) * 1e6
                a = ab[:, :, 1] - ab[:, :, 0]
                per = np.diff(ab[0, :, 0])
                # one clock (CLOCK_MONOTONIC, one host): each rank's entry and exit after
                # rank 0's entry, medians over iterations
                ent = np.median(ab[:, :, 0] - ab[0, :, 0], axis=1)
                ext = np.median(ab[:, :, 1] - ab[0, :, 0], axis=1)
                res.setdefault((v, s), []).append(
                    (float(a.mean()), float(np.median(per)),
                     [float(x) for x in a.mean(axis=1)],
                     [x[1] for x in allt], [x[2] for x in allt],
                     [float(x) for x in ent], [float(x) for x in ext]))

if perf_dir:
    n = iters
    ctl = open(os.path.join(perf_dir, f"ctl.{rank}"), "w", buffering=1)  # kept open: no EOF
    for s in sizes:
        for v in variants:
            call, bar = calls[(v, s)], barrier_of(v)
            for _ in range(50):
                call()
                bar()
            world.Barrier()
            ctl.write("enable\n")
            time.sleep(0.1)  # let perf act on it before the loop
            for _ in range(n):
                call()
                bar()
            ctl.write("disable\n")
            time.sleep(0.1)
            world.Barrier()
    if rank == 0:
        print(f"PERF counted {n} calls x {len(sizes)} sizes x {len(variants)} variants per rank")

# the traced variants: per iteration, every rank's entry, op finishes and exit on one clock,
# after rank 0's entry; medians over iterations (ops by position in each rank's schedule)
for key in sorted(TRACE):
    call = CALLS[key]
    mine = [(a, b, tr["t0"], tr["ops"]) for (a, b), tr in zip(call.stamps, TRACE[key])]
    every = world.gather(mine, root=0)
    if rank == 0:
        n = min(len(x) for x in every)
        print(f"TIMELINE {key[0]} {key[1]} B ({n} calls; us after rank 0 enters; op: kind peer "
              f"bytes @finish)")
        for r in range(size):
            ent = [(every[r][i][0] - every[0][i][0]) * 1e6 for i in range(n)]
            ext = [(every[r][i][1] - every[0][i][0]) * 1e6 for i in range(n)]
            st = [(every[r][i][2] / 1e9 - every[0][i][0]) * 1e6 for i in range(n)]
            ops = every[r][0][3]
            cells = []
            for j, o in enumerate(ops):
                fin = [(every[r][i][2] + every[r][i][3][j][6]) / 1e3 - every[0][i][0] * 1e6
                       for i in range(n) if j < len(every[r][i][3]) and every[r][i][3][j][6] >= 0]
                kind = {0: "send", 1: "recv", 2: "recv+", 3: "hdr", 4: "local"}[o[0]]
                cells.append(f"{kind} {o[1]} {o[3]}B @{np.median(fin):.1f}" if fin else f"{kind} -")
            print(f"  rank {r}: enter {np.median(ent):6.1f} start {np.median(st):6.1f}  "
                  + "; ".join(cells) + f"; exit {np.median(ext):6.1f}")

if rank == 0:
    print("plan", nz.stats()["last_plan"], "fast", nz.stats()["fast_path_calls"])
    for s in sizes:
        for v in variants:
            r = res[(v, s)]
            osu = np.median([x[0] for x in r])
            per = np.median([x[1] for x in r])
            rk = np.median(np.array([x[2] for x in r]), axis=0)
            vol = np.median(np.array([x[3] for x in r]), axis=0)
            inv = np.median(np.array([x[4] for x in r]), axis=0)
            ent = np.median(np.array([x[5] for x in r]), axis=0)
            ext = np.median(np.array([x[6] for x in r]), axis=0)
            print(f"{s:6d} {v:10s} OSU {osu:6.1f} us period {per:6.1f} us  rounds "
                  f"{' '.join(f'{x[0]:.1f}' for x in r)}  per-rank {' '.join(f'{x:.1f}' for x in rk)}"
                  f"  vcsw/call {' '.join(f'{x:.2f}' for x in vol)}"
                  f"  ivcsw/call {' '.join(f'{x:.2f}' for x in inv)}"
                  f"\n{'':18s}after rank 0 enters: enter {' '.join(f'{x:.1f}' for x in ent)}"
                  f"  exit {' '.join(f'{x:.1f}' for x in ext)}")
    print("JSON", json.dumps({f"{v} {s}": res[(v, s)] for v, s in res}))
for c in COMMS.values():
    c.close()
