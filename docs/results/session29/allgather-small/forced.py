"""Session 29 (h42): one compare run's systems side by side, per size: the bench's row (µs,
median over reps), the cycle (µs) and each rank's mean call (µs, first rep).
usage: python forced.py DIR"""
import json
import sys

import numpy as np

d = json.load(open(sys.argv[1] + "/compare.json"))
rows = {}
for r in d["runs"]:
    for res in (r["doc"] or {}).get("results", []):
        rc = res["rank_calls"]
        rows.setdefault((res["size"], r["system"]), []).append(
            (res["avg_us"], float(np.median(np.diff(rc["start_us"][0]))),
             [round(float(np.mean(u))) for u in rc["us"]], res["algorithm"]))
for (size, sys_), v in sorted(rows.items()):
    print(f"{size // 1024:3d} KiB {sys_:17s} {v[0][3]:16s} row "
          + ", ".join(f"{x[0]:.0f}" for x in v) + "  cycle "
          + ", ".join(f"{x[1]:.0f}" for x in v) + "  per rank " + " ".join(str(x[2]) for x in v))
