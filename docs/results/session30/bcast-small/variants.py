"""Small broadcast, every tree choice in one job, interleaved with Open MPI (session 30, h47).
OSU's loop (a barrier after each call, outside the timer), per call and rank, one clock.
Variants: nezha (what the planner picks), one-bin / one-star (one rail, binomial / one
round), two-bin / two-star (striped over both rails), mpi (Open MPI's Bcast/Barrier).
usage: variants.py SIZES ITERS ROUNDS [VARIANTS]. Prints, per size and variant, the median
over rounds of the OSU average (mean over ranks of each rank's mean exit - entry), of the
per-iteration mean over ranks' median, and of rank 0's loop period (start to next start)."""
import json
import sys
import time

import numpy as np
from mpi4py import MPI

import nezha

world = MPI.COMM_WORLD
rank, size = world.rank, world.size
sizes = [int(x) for x in sys.argv[1].split(",")]
iters, rounds = int(sys.argv[2]), int(sys.argv[3])
variants = (sys.argv[4].split(",") if len(sys.argv) > 4 else
            ["nezha", "one-bin", "one-star", "two-bin", "two-star", "mpi"])
nz = nezha.Communicator()
p = nz.planner
MODE = {"v": "nezha"}
orig_rails, orig_flat = p._tree_rails, p.flat_tree


def rails(nbytes, root=0):
    v = MODE["v"]
    return 1 if v.startswith("one") else 2 if v.startswith("two") else orig_rails(nbytes, root)


def flat(chan, nbytes, root=0):
    v = MODE["v"]
    return False if v.endswith("bin") else True if v.endswith("star") else orig_flat(chan, nbytes, root)


p._tree_rails, p.flat_tree = rails, flat


LAST = {}


def loop(bc, bar, n, warm=30):
    for _ in range(warm):
        bc()
        LAST["plan"] = repr(nz._st.last_plan)  # the broadcast's, before the barrier's
        bar()
    bar()
    t = np.empty((n, 2))
    clk = time.perf_counter
    for i in range(n):
        t0 = clk(); bc(); t[i] = (t0, clk())
        bar()
    return t


bufs = {(v, s): np.ones(s, np.uint8) for v in variants for s in sizes}
res = {}
plans = {}
for rnd in range(rounds):
    for s in sizes:
        order = variants if rnd % 2 == 0 else variants[::-1]  # A B ... B A
        for v in order:
            buf = bufs[(v, s)]
            if v == "mpi":
                t = loop(lambda: world.Bcast(buf, 0), world.Barrier, iters)
            else:
                MODE["v"] = v
                t = loop(lambda: nz.broadcast(buf, 0), nz.barrier, iters)
                plans[(v, s)] = LAST["plan"]
            allt = world.gather(t, root=0)
            if rank == 0:
                ab = np.array(allt) * 1e6
                a = ab[:, :, 1] - ab[:, :, 0]
                per = np.diff(ab[0, :, 0])
                res.setdefault((v, s), []).append((a.mean(), np.median(a.mean(axis=0)),
                                                   np.median(per)))
MODE["v"] = "nezha"
if rank == 0:
    print("rates B/s", [round(r) for r in p.rail_rates], "alpha us",
          round(p.layout.rail_alpha * 1e6, 1), "hop", p.layout.hop.describe() if p.layout.hop else None)
    for s in sizes:
        rates = sorted(p.rail_rates, reverse=True)
        t1 = p.layout.time("broadcast", "tree", s, 1, 0, rate=rates[0]) * 1e6
        t2 = p.layout.time("broadcast", "tree", s, 1, 0, rate=sum(rates)) * 1e6
        s1 = p.layout.time("broadcast", "star", s, 1, 0, rate=rates[0]) * 1e6
        s2 = p.layout.time("broadcast", "star", s, 1, 0, rate=sum(rates)) * 1e6
        print(f"model {s} B: one-bin {t1:.0f} two-bin {t2:.0f} one-star {s1:.0f} two-star {s2:.0f} us"
              f" (+{0.5 * p.layout.rail_alpha * 1e6:.0f} a rail at TREE_SLICE 0.5)")
        m = np.median([r[0] for r in res[("mpi", s)]]) if ("mpi", s) in res else None
        for v in variants:
            r = np.array(res[(v, s)])
            osu = np.median(r[:, 0])
            print(f"{s:6d} {v:9s} OSU {osu:6.1f} us (rounds {' '.join(f'{x:.1f}' for x in r[:, 0])})"
                  f" iter-p50 {np.median(r[:, 1]):6.1f} period {np.median(r[:, 2]):6.1f}"
                  + (f" mpi/this {m / osu:.2f}" if m else "") + f"  {plans.get((v, s), '')}")
    print("JSON", json.dumps({f"{v} {s}": res[(v, s)] for v, s in res}))
nz.close()
