#!/usr/bin/env python
"""Per-repetition ratios from variants.py's json: mpi / system in each repetition (> 1: system faster)."""
import gzip
import json
import sys

doc = json.load((gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rt"))
runs = doc["runs"]
ref = sys.argv[2] if len(sys.argv) > 2 else "mpi"
sizes = sorted({r["size"] for d in runs[ref] for r in d["results"]})
for size in sizes:
    print(f"size {size}")
    refv = [next(r["avg_us"] for r in d["results"] if r["size"] == size) for d in runs[ref]]
    print(f"  {ref:16s} " + " ".join(f"{v:7.0f}" for v in refv))
    for b, docs in runs.items():
        if b == ref:
            continue
        vals = [next(r["avg_us"] for r in d["results"] if r["size"] == size) for d in docs]
        ratios = [a / v for a, v in zip(refv, vals)]
        print(f"  {b:16s} " + " ".join(f"{v:7.0f}" for v in vals)
              + "   mpi/x: " + " ".join(f"{x:.2f}" for x in ratios))
