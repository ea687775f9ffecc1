"""Session 29 (h42): A B B A table from compare.json files: per size, each run's nezha-all
latency (the bench's row: mean over ranks of each rank's mean call), the best Open MPI
row's, their ratio (best MPI / nezha, > 1: nezha faster), and the cycle: the median time
from one call's start to the next (the call + the OSU loop's barrier), rank 0, median
over reps. usage: python summary.py LABEL=DIR ..."""
import json
import sys

import numpy as np


def load(path):
    d = json.load(open(path + "/compare.json"))
    out = {}
    for r in d["runs"]:
        if not r.get("doc"):
            continue
        for res in r["doc"]["results"]:
            rc = res.get("rank_calls")
            cyc = float(np.median(np.diff(rc["start_us"][0]))) if rc else float("nan")
            per_rank = [float(np.mean(u)) for u in rc["us"]] if rc else []
            out.setdefault((r["system"], res["size"]), []).append(
                (res["avg_us"], cyc, res["algorithm"], per_rank))
    return out


runs = [(a.split("=")[0], load(a.split("=")[1])) for a in sys.argv[1:]]
sizes = sorted({s for _, d in runs for (_, s) in d})
print("| size | " + " | ".join(f"{l}: nezha us (algo) / best MPI us = ratio; cycle nezha / MPI"
                                for l, _ in runs) + " |")
print("|---|" + "---|" * len(runs))
for s in sizes:
    row = []
    for label, d in runs:
        nz = d.get(("nezha-all", s))
        mp = [(sys_, d[(sys_, s)]) for sys_ in ("mpi-rail0", "mpi-all", "mpi-all-tuned")
              if (sys_, s) in d]
        if not nz or not mp:
            row.append("-")
            continue
        nz_us = float(np.median([x[0] for x in nz]))
        nz_cyc = float(np.median([x[1] for x in nz]))
        best_sys, best = min(((k, float(np.median([x[0] for x in v]))) for k, v in mp),
                             key=lambda t: t[1])
        best_cyc = min(float(np.median([x[1] for x in v])) for _, v in mp)
        row.append(f"{nz_us:.0f} ({nz[0][2]}) / {best:.0f} = **{best / nz_us:.2f}**; "
                   f"{nz_cyc:.0f} / {best_cyc:.0f} = {best_cyc / nz_cyc:.2f}")
    print(f"| {s // 1024} KiB | " + " | ".join(row) + " |")
