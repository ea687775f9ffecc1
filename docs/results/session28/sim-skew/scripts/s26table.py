"""Session 26's runs: every nezha-ina / nezha-rail0 row against the bench's row, main's
replay (ring from 64 KiB, the span as the row) -> this tree's (the recorded algorithm, the
span less RANK_SKEW_S). usage: s26table.py MAIN_DIR TREE_DIR"""
import json
import sys

b, a = sys.argv[1:3]
runs = ["compare-400mbit", "compare-400mbit-100mbit", "compare-100mbit-400mbit"]


def cell(x):
    return f"**{x:+.1f}**" if abs(x) > 10 else f"{x:+.1f}"


for system in ("nezha-ina", "nezha-rail0"):
    print(f"\n{system}:\n")
    rb = {n: {r["nbytes"]: r for r in json.load(open(f"{b}/{n}.json"))["rows"] if r["system"] == system} for n in runs}
    ra = {n: {r["nbytes"]: r for r in json.load(open(f"{a}/{n}.json"))["rows"] if r["system"] == system} for n in runs}
    sizes = sorted(rb[runs[0]])
    print("| run | " + " | ".join(f"{nb >> 10} KiB" if nb < 1 << 20 else f"{nb >> 20} MiB" for nb in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    mb = ma = 0
    for n in runs:
        print(f"| {n} | " + " | ".join(f"{cell(rb[n][k]['replay_tbf_pct'])} → {cell(ra[n][k]['row_pct'])}" for k in sizes) + " |")
        mb += sum(abs(rb[n][k]["replay_tbf_pct"]) > 10 for k in sizes)
        ma += sum(abs(ra[n][k]["row_pct"]) > 10 for k in sizes)
    print(f"\nmisses: {mb} → {ma} of {len(runs) * len(sizes)}")
