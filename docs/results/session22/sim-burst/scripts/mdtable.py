"""Markdown table: every nezha-all row's tbf replay vs the bench's row (%), before / after,
and after vs the span where the run has rank_calls. usage: mdtable.py BEFORE_DIR AFTER_DIR"""
import json
import math
import sys

runs = ["het-1", "het-2", "het-3", "eq-1", "eq-2", "eq-3", "compare-400mbit",
        "compare-400mbit-100mbit-session13"]
b, a = sys.argv[1:3]


def rows(d, n):
    return {r["nbytes"]: r for r in json.load(open(f"{d}/{n}.json"))["rows"]
            if r["system"] == "nezha-all"}


def cell(x):
    return f"**{x:+.1f}**" if abs(x) > 10 else f"{x:+.1f}"


print("| run | " + " | ".join(f"{nb >> 10} KiB" if nb < 1 << 20 else f"{nb >> 20} MiB"
                               for nb in sorted(rows(a, runs[0]))) + " |")
print("|---" * 12 + "|")
for n in runs:
    rb, ra = rows(b, n), rows(a, n)
    print(f"| {n} | " + " | ".join(f"{cell(rb[k]['replay_tbf_pct'])} → {cell(ra[k]['replay_tbf_pct'])}"
                                   for k in sorted(ra)) + " |")
    sp = [ra[k].get("replay_tbf_vs_span_pct") for k in sorted(ra)]
    if all(x is not None and not math.isnan(x) for x in sp):
        spb = [rb[k]["replay_tbf_vs_span_pct"] for k in sorted(rb)]
        print(f"| {n} vs span | " + " | ".join(f"{cell(x)} → {cell(y)}" for x, y in zip(spb, sp)) + " |")
