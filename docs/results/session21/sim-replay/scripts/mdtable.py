"""Markdown table for docs/sim.md: per size, the tbf replay's error against the bench's row
for each run (after / before), and against the span where the run has rank_calls.
usage: mdtable.py DIR RUN... (DIR holds RUN.after.json and RUN.before.json)"""
import json
import os
import sys

d, runs = sys.argv[1], sys.argv[2:]
load = lambda n, v: {r["nbytes"]: r for r in json.load(open(os.path.join(d, f"{n}.{v}.json")))["rows"]
                     if r["system"] == "nezha-all"}
after = {n: load(n, "after") for n in runs}
before = {n: load(n, "before") for n in runs}
span = [n for n in runs if any((r.get("span_us") or 0) > 0 for r in after[n].values())]
head = ["size", "lab row (µs)"] + [f"{n} after / before" for n in runs] + [f"{n} vs span" for n in span]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
fmt = lambda x: f"**{x:+.1f}**" if abs(x) > 10 else f"{x:+.1f}"
for nb in sorted(after[runs[0]]):
    size = f"{nb >> 10} KiB" if nb < 1 << 20 else f"{nb >> 20} MiB"
    cells = [size, " / ".join(f"{after[n][nb]['measured_us']:.0f}" for n in runs)]
    cells += [f"{fmt(after[n][nb]['replay_tbf_pct'])} / {fmt(before[n][nb]['replay_tbf_pct'])}" for n in runs]
    cells += [fmt(after[n][nb]["replay_tbf_vs_span_pct"]) for n in span]
    print("| " + " | ".join(cells) + " |")
