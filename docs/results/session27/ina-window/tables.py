"""A B B A table of nezha-ina allreduce: per size the avg time (us) of each compare (median
over its repetitions of the bench's avg, read from the runs themselves: a run the compare's
placement check rejects, e.g. rail1 under 5 % of the bytes because 2 MiB ran on TCP alone,
still counts here), and B/A = (B1+B2)/(A1+A2). usage: python tables.py PREFIX (equal, slow,
slow64), from any directory."""
import json
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
pre = sys.argv[1]
runs = ["A1", "B1", "B2", "A2"]
t = {}
for r in runs:
    d = json.load(open(os.path.join(here, f"{pre}-{r}", "compare.json")))
    per = {}
    for run in d["runs"]:
        if run["system"] != "nezha-ina" or not run.get("doc"):
            continue
        for row in run["doc"]["results"]:
            per.setdefault(row["nbytes"], []).append(row["avg_us"])
    for nb, v in per.items():
        t.setdefault(nb, {})[r] = statistics.median(v)
print("| size | A1 main | B1 h33 | B2 h33 | A2 main | B/A |")
print("|---|---|---|---|---|---|")
for nb in sorted(t):
    x = t[nb]
    if len(x) < 4:
        continue
    name = (f"{nb >> 20} MiB" if nb >= 1 << 20 else f"{nb >> 10} KiB" if nb >= 1024 else f"{nb} B")
    ratio = (x["B1"] + x["B2"]) / (x["A1"] + x["A2"])
    print(f"| {name} | " + " | ".join(f"{x[r]:,.0f}" if x[r] >= 100 else f"{x[r]:.1f}"
                                       for r in runs) + f" | {ratio:.3f} |")
