"""The INA client alone, model vs the lab's credit sweep (docs/results/ina/
credit_sweep_lab_400mbit*.json: 4 hosts x 1 rank, one 400 Mbit/s rail with tbf on both ends,
the service in the switch, InaClient.allreduce of the whole buffer at windows 1..128).

The model: nezha/sim/ina_sched.ina_part with the sweep's chunk (from the MTU, or the file's
chunk_bytes) and window, on the lab's buckets (bucket.lab_buckets), calls back to back as
bench/ina_credit_sweep.py makes them (between two calls a rank refills its buffer: two numpy
passes over it, at failover.SNAPSHOT_BPS). The window's round trip is taken at the link's
rate ("rate") and, as a variant, at the bucket's peak ("peak": tbf passes a datagram at the
peak while it holds tokens). Usage: PYTHONPATH=. python credit_sweep.py FILE.json
"""
import json
import sys

import numpy as np

from nezha.lab import shaping
from nezha.sim import bucket as B
from nezha.sim import fabric as F
from nezha.sim import ina_sched as I
from nezha.sim import network as NW
from nezha.sim import nezha_sched as N


def predict(rows, n=4, bps=400e6, chunk=0, iters_cap=6):
    fab = F.MultiRail(n, 1, bps / 1e9, 0.0, aggregator_gbps=float("inf"))
    host_of = np.r_[fab.place(n), fab.agg_host]
    pl = N.make_planner(n, fab.place(n), 1)
    hop = I.ina_alpha(pl.layout.rail_alpha)  # INA_HOP_FACTOR x the planner's TCP step
    out = []
    for r in rows:
        prm = I.InaParams(chunk_bytes=chunk, window=r["window"])
        got = {}
        for how, rate in (("rate", bps / 8), ("peak", B.LAB_PEAK_BPS / 8)):
            bk = B.lab_buckets(fab, [bps])
            rt = I.rtt(prm, rate, 0.0, hop)
            wl = I.ina_part(n, r["bytes"] // 4, 4, prm, 0, rt)
            times = []
            for it in range(min(r["iters"], iters_cap) + 1):
                res = NW.simulate(wl, fab, host_of, "rail", 1, hop, tol=1e-4, buckets=bk)
                if it:
                    times.append(res.time)
                bk.idle(I.copy_s(2 * r["bytes"]))
            got[how] = float(np.mean(times))
        out.append({**r, "rate_us": got["rate"] * 1e6, "peak_us": got["peak"] * 1e6,
                    "rate_pct": 100 * (got["rate"] * 1e6 - r["time_us"]) / r["time_us"],
                    "peak_pct": 100 * (got["peak"] * 1e6 - r["time_us"]) / r["time_us"],
                    "hop_us": hop * 1e6, "chunk": prm.chunk_bytes})
    return out


def main(path):
    doc = json.load(open(path))
    chunk = int((doc.get("client") or {}).get("chunk_bytes") or 0)
    rows = predict(doc["rows"], chunk=chunk if chunk != 8192 else 0)
    print(f"# {path}: chunk {rows[0]['chunk']} B, INA hop {rows[0]['hop_us']:.1f} us "
          f"(INA_HOP_FACTOR x the planner's step); times in us, error vs the lab in %")
    print(f"{'window':>6} {'bytes':>9} {'lab':>10} {'model@rate':>11} {'%':>7} "
          f"{'model@peak':>11} {'%':>7}")
    for r in rows:
        print(f"{r['window']:>6} {r['bytes']:>9} {r['time_us']:>10.1f} {r['rate_us']:>11.1f} "
              f"{r['rate_pct']:>+7.1f} {r['peak_us']:>11.1f} {r['peak_pct']:>+7.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
