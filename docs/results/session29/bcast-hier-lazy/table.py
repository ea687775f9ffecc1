"""The A B B A table of run.sh's .md files: nezha us / Open MPI us (ratio MPI/nezha), and picks.
usage: table.py [TAG]"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TAG = sys.argv[1] if len(sys.argv) > 1 else ""


def read(path):
    rows, picks = {}, {}
    for line in open(path):
        m = re.match(r"\| (\d+ \w+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", line)
        if m and m.group(1) not in rows:
            rows[m.group(1)] = (float(m.group(2)), float(m.group(3)), float(m.group(4)))
        if line.startswith("| nezha-all |"):
            picks = dict(p.split(": ") for p in line.rstrip(" |\n").split("| ")[-1].split(", "))
    return rows, picks


print("| layout | size | A1 | B1 | B2 | A2 | picks A / B |")
print("|---|---|---|---|---|---|---|")
for lay in ("2x4", "4x2"):
    runs = {t: read(os.path.join(HERE, f"{lay}-{t}{TAG}.md")) for t in ("A1", "B1", "B2", "A2")
            if os.path.exists(os.path.join(HERE, f"{lay}-{t}{TAG}.md"))}
    if not runs:
        continue
    for size in next(iter(runs.values()))[0]:
        cells = []
        for t in ("A1", "B1", "B2", "A2"):
            r = runs.get(t, ({}, {}))[0].get(size)
            cells.append("-" if r is None else f"{r[0]:.0f} / {r[1]:.0f} ({r[2]:.2f}x)")
        pa = sorted({runs[t][1].get(size, "?") for t in ("A1", "A2") if t in runs})
        pb = sorted({runs[t][1].get(size, "?") for t in ("B1", "B2") if t in runs})
        print(f"| {lay.replace('x', ' x ')} | {size} | " + " | ".join(cells)
              + f" | {','.join(pa)} / {','.join(pb)} |")
