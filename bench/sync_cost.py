"""What a cost-model sync adds to the collective it runs in (nezha sim's replay charges it).

    nezha lab run -x NEZHA_SOCKET_IFNAME=rail0,rail1 -- python bench/sync_cost.py [--size 256K]

Each rank wraps its communicator's _sync_model (executor._feed_model calls it inside the
collective, so the bench's timer includes it) and times it. Calls as bench/_common's loop:
barrier, timed allreduce, barrier. At 256 KiB on 400 + 100 Mbit/s with
NEZHA_MIN_RAIL_PIECE=64k the payload goes whole on rail0 and its bucket never leaves COLD
(rail1 is never measured): every call synced until session 21 (costmodel.sync_due counts
striped records only now; run this at a striped size to time a sync).
Prints, over ranks and calls: the call's time, and the sync's share of it (µs).
"""
import argparse
import time

import numpy as np
from mpi4py import MPI

import nezha
from _common import parse_size, report_json  # bench/ is on sys.path when run as a script


def _after(c, s):
    prev = np.zeros_like(s, bool)
    prev[:, 1:] = s[:, :-1] > 0
    pick = prev & (s == 0)
    return float(c[pick].mean()) if pick.any() else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="256K")
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--json")
    a = p.parse_args()
    nbytes = parse_size(a.size)
    world = MPI.COMM_WORLD
    comm = nezha.Communicator()
    syncs = []
    inner = comm._sync_model

    def timed_sync():
        t = time.perf_counter()
        inner()
        syncs.append(time.perf_counter() - t)
    comm._sync_model = timed_sync
    x = np.ones(nbytes // 4, np.float32)
    y = np.empty_like(x)
    for _ in range(a.warmup):
        comm.allreduce(x, y)
        comm.barrier()
    calls, in_call = [], []
    comm.barrier()
    for _ in range(a.calls):
        n0 = len(syncs)
        t0 = time.perf_counter()
        comm.allreduce(x, y)
        calls.append(time.perf_counter() - t0)
        in_call.append(sum(syncs[n0:]))
        comm.barrier()
    got = world.gather((calls, in_call), root=0)
    if world.rank == 0:
        c = np.array([g[0] for g in got]) * 1e6
        s = np.array([g[1] for g in got]) * 1e6
        w = s[s > 0]  # calls that synced
        doc = {"nbytes": nbytes, "ranks": world.size, "rails": list(comm.rails),
               "call_us_mean": float(c.mean()),
               "call_us_mean_synced": float(c[s > 0].mean()) if w.size else None,
               "call_us_mean_not_synced": float(c[s == 0].mean()) if w.size < s.size else None,
               # a call right after a synced one (not syncing itself): the links idled
               # through the sync, so a tbf bucket starts it full
               "call_us_mean_after_sync": _after(c, s),
               "sync_us_mean": float(w.mean()) if w.size else 0.0,
               "sync_us_median": float(np.median(w)) if w.size else 0.0,
               "calls_with_sync": int(w.size),
               "calls": int(s.size), "sync_us_per_rank": s.mean(axis=1).round(1).tolist(),
               "call_us_per_rank": c.mean(axis=1).round(1).tolist(),
               "model": comm.stats()["model"]["buckets"]}
        report_json(doc, a.json)
    comm.close()


if __name__ == "__main__":
    main()
