"""Best Open MPI row / nezha-all per collective and size, one column per run (tables.py's
--slim files), > 1: nezha faster; '<' marks a cell below the bar (0.95).
usage: python ratios.py NAME=latencies.json ...   (e.g. main=equal-main/latencies.json)"""
import json
import sys

from tables import NOISE, fmt, ratios

runs = [(a.split("=", 1)[0], json.load(open(a.split("=", 1)[1]))["avg_us"]) for a in sys.argv[1:]]
print("| collective | size | " + " | ".join(n for n, _ in runs) + " |")
print("|---|---|" + "---|" * len(runs))
colls = runs[0][1].keys()
for coll in colls:
    per = [{n: {int(k): v for k, v in r.items()} for n, r in doc[coll].items()} for _, doc in runs]
    rs = [ratios(p, "mpi") for p in per]
    for size in sorted(rs[0]):
        cells = []
        for r, p in zip(rs, per):
            if size in r:
                v, _ = r[size]
                cells.append(f"{v:.2f}{' <' if v < NOISE else ''} ({p['nezha-all'][size]:.0f})")
            else:
                cells.append("")
        print(f"| {coll} | {fmt(size)} | " + " | ".join(cells) + " |")
