"""Markdown tables from `nezha sim lab FILE --json` of the eight stored runs: every nezha-all
row's tbf replay against the bench's row, before (the replay's span as the row) -> after
(the span less the ranks' skew, benchloop.row_of_span), % (bold: misses 10 %), and the span
prediction against the measured span where the run has rank_calls (unchanged).
usage: mdtable.py DIR"""
import json
import math
import sys

runs = ["het-1", "het-2", "het-3", "eq-1", "eq-2", "eq-3", "compare-400mbit",
        "compare-400mbit-100mbit-session13"]
d = sys.argv[1]


def rows(n):
    return {r["nbytes"]: r for r in json.load(open(f"{d}/{n}.json"))["rows"]
            if r["system"] == "nezha-all"}


def cell(x):
    return f"**{x:+.1f}**" if abs(x) > 10 else f"{x:+.1f}"


sizes = sorted(rows(runs[0]))
print("| run | " + " | ".join(f"{nb >> 10} KiB" if nb < 1 << 20 else f"{nb >> 20} MiB"
                               for nb in sizes) + " |")
print("|---" * (len(sizes) + 1) + "|")
miss = {"before": 0, "after": 0}
n = 0
for name in runs:
    r = rows(name)
    print(f"| {name} | " + " | ".join(f"{cell(r[k]['replay_tbf_pct'])} → {cell(r[k]['row_pct'])}"
                                      for k in sizes) + " |")
    for k in sizes:
        n += 1
        miss["before"] += abs(r[k]["replay_tbf_pct"]) > 10
        miss["after"] += abs(r[k]["row_pct"]) > 10
    sp = [r[k].get("replay_tbf_vs_span_pct") for k in sizes]
    if all(x is not None and not math.isnan(x) for x in sp):
        print(f"| {name} vs span | " + " | ".join(cell(x) for x in sp) + " |")
print()
print(f"run-rows missing 10 % of the row: before {miss['before']} of {n}, after {miss['after']} of {n}")
print()
print("One-rail rows of the same runs (nezha-rail0, nezha-rail1), before → after:")
for system in ("nezha-rail0", "nezha-rail1"):
    b, a, n = [], [], 0
    for name in runs:
        for r in json.load(open(f"{d}/{name}.json"))["rows"]:
            if r["system"] == system:
                b.append((r["replay_tbf_pct"], name, r["nbytes"]))
                a.append((r["row_pct"], name, r["nbytes"]))
    if b:
        worst = lambda v: ", ".join(f"{nm} {nb >> 10} KiB {x:+.1f}" for x, nm, nb in v if abs(x) > 10) or "none"
        print(f"- {system}: {len(b)} run-rows; range {min(b)[0]:+.1f} … {max(b)[0]:+.1f} → "
              f"{min(a)[0]:+.1f} … {max(a)[0]:+.1f}; misses before: {worst(b)}; after: {worst(a)}")
