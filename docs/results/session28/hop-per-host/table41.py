#!/usr/bin/env python3
"""4 x 1 (run41.sh): per size nezha-all us (algorithm) and Open MPI ring / nezha-all in each
run (A1 B1 B2 A2), B/A = mean B time over mean A time; then whether the model (the run's
agreed samples, offline, PYTHONPATH=<tree>) picks the same in A and B. Usage: table41.py DIR"""
import json
import os
import sys

runs = ["A1", "B1", "B2", "A2"]
got = {}
for n in runs:
    f = os.path.join(sys.argv[1], f"4x1-{n}", "compare.json")
    d = json.load(open(f))
    s = d["summary"]["allreduce"]
    nz = {r["size"]: r["avg_us"] for r in s["nezha-all"]}
    mpi = {r["size"]: r["avg_us"] for r in s["mpi-all-ring"]}
    run = next(r for r in d["runs"] if r["system"] == "nezha-all")
    algo = {x["size"]: x["algorithm"] for x in run["doc"]["results"]}
    got[n] = (nz, mpi, algo, run["doc"]["stats"]["probe"])
print("| size | " + " | ".join(f"{n} us (algo) | {n} mpi/nz" for n in runs) + " | B/A |")
print("|---|" + "---|---|" * len(runs) + "---|")
for size in sorted(got["A1"][0]):
    cells, a, b = [], [], []
    for n in runs:
        nz, mpi, algo, _ = got[n]
        (a if n[0] == "A" else b).append(nz[size])
        cells.append(f"{nz[size]:.0f} ({algo[size]}) | {mpi[size] / nz[size]:.2f}")
    sz = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB" if size >= 1024 else f"{size} B"
    print(f"| {sz} | " + " | ".join(cells) + f" | {sum(b) / len(b) / (sum(a) / len(a)):.2f} |")
for n in runs:
    st = got[n][3]
    print(f"\n{n}: probe {st.get('mbps')}, step {st['step'].get('small_us')} us, hop {st['step'].get('hop', {}).get('ns')}")
