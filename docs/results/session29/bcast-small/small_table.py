"""Medians of the 7 repetitions of small.sh's runs: usage small_table.py equal|unequal."""
import json
import sys

import numpy as np

pre = sys.argv[1]
out = {}
for tag in (f"small-{pre}-B", f"small-{pre}-A"):
    d = json.load(open(f"/tmp/h44/{tag}/compare.json"))
    print(f"{tag}: latency floor {d['limits']['latency_floor_us']:.1f} us, started {d['started']}")
    per = {}
    for r in d["runs"]:
        for x in r.get("doc", {}).get("results", []):
            per.setdefault(r["system"], {}).setdefault(x["size"], []).append(x["avg_us"])
    out[tag] = per
B, A = out[f"small-{pre}-B"], out[f"small-{pre}-A"]
print()
print("| size | B nezha median (min-max of 7) | A nezha median (min-max) | B / A | best Open MPI "
      "median, B run / A run | best Open MPI / nezha, B | A |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for n in sorted(B["nezha-all"]):
    b, a = B["nezha-all"][n], A["nezha-all"][n]
    mb = min(np.median(v[n]) for s, v in B.items() if s.startswith("mpi"))
    ma = min(np.median(v[n]) for s, v in A.items() if s.startswith("mpi"))
    lab = f"{n} B" if n < 1024 else f"{n >> 10} KiB"
    print(f"| {lab} | {np.median(b):.1f} ({min(b):.1f}-{max(b):.1f}) | {np.median(a):.1f} "
          f"({min(a):.1f}-{max(a):.1f}) | {np.median(b) / np.median(a):.2f} | {mb:.1f} / {ma:.1f} "
          f"| **{mb / np.median(b):.2f}** | {ma / np.median(a):.2f} |")
