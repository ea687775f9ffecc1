"""A B B A table from runs/TAG-RUN/compare.json.gz (session 30 h47's, per collective): per size
and run, nezha-all us / best Open MPI row us (best Open MPI / nezha) [loop period ratio: best Open
MPI row's period_us / nezha's], and B/A (mean B time / mean A time).
usage: table.py TAG COLLECTIVE [RUN ...] (e.g. 400mbit broadcast); runs default A1 B1 B2 A2"""
import gzip
import json
import os
import sys

D = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")
tag, coll = sys.argv[1], sys.argv[2]
runs = sys.argv[3:] or ["A1", "B1", "B2", "A2"]
data = {}
for r in runs:
    f = os.path.join(D, f"{tag}-{r}", "compare.json.gz")
    if os.path.exists(f):
        data[r] = json.load(gzip.open(f))["summary"][coll]
sizes = sorted({x["nbytes"] for s in data.values() for x in s["nezha-all"]})
print(f"| size | " + " | ".join(f"{r}: nezha / best MPI (ratio) [period ratio]" for r in data)
      + " | B/A time |")
print("|---:" * (len(data) + 2) + "|")
for z in sizes:
    cells, t = [], {}
    for r, s in data.items():
        nz = {x["nbytes"]: x for x in s["nezha-all"]}.get(z)
        mp = [x for n in ("mpi-all", "mpi-rail0") for x in s.get(n, []) if x["nbytes"] == z]
        if not nz or not mp:
            cells.append("")
            continue
        best = min(mp, key=lambda x: x["avg_us"])
        bp = min((x["period_us"] for x in mp if x.get("period_us")), default=None)
        per = f" [{bp / nz['period_us']:.2f}]" if bp and nz.get("period_us") else ""
        cells.append(f"{nz['avg_us']:.1f} / {best['avg_us']:.1f} (**{best['avg_us'] / nz['avg_us']:.2f}**){per}")
        t.setdefault(r[0], []).append(nz["avg_us"])
    ba = (f"{(sum(t['B']) / len(t['B'])) / (sum(t['A']) / len(t['A'])):.2f}"
          if t.get("A") and t.get("B") else "")
    name = f"{z // 1024} KiB" if z >= 1024 else f"{z} B"
    print(f"| {name} | " + " | ".join(cells) + f" | {ba} |")
