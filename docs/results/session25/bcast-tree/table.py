"""Summary of run.sh's four compare runs (A B B A): broadcast nezha-all and mpi-all latency
(us, OSU average: mean over ranks) per size, the ratio mpi/nezha per run, and nezha's time
summed over the runs of the second version over the first's (B/A; run names end in it).
usage: python table.py OUTDIR"""
import re
import sys
from pathlib import Path


def bcast(md):
    """{size: (nezha us, mpi / nezha)} from a compare.md's broadcast table."""
    text = Path(md).read_text()
    sec = text.split("## broadcast", 1)[1].split("\n## ", 1)[0]
    rows = [l for l in sec.splitlines() if l.startswith("| ") and re.match(r"\| \d", l)]
    head = next(l for l in sec.splitlines() if l.startswith("| Size"))
    cols = [c.strip() for c in head.strip("|").split("|")]
    i_n, i_m = cols.index("nezha-all (µs)"), cols.index("/ mpi-all")
    out = {}
    for l in rows:
        c = [x.strip() for x in l.strip("|").split("|")]
        out[c[0]] = (float(c[i_n]), float(c[i_m]))
    return out


d = Path(sys.argv[1])
runs = [(p.name, bcast(p / "compare.md")) for p in sorted(d.iterdir())
        if (p / "compare.md").exists()]
first, second = list(dict.fromkeys(n[-1] for n, _ in runs))[:2]
print("| size | " + " | ".join(f"{n} nezha (mpi/nezha)" for n, _ in runs)
      + f" | {second}/{first} nezha (sum of both) |")
print("|---" * (len(runs) + 2) + "|")
for size in runs[0][1]:
    cells, a, b = [], 0.0, 0.0
    for name, r in runs:
        t, q = r[size]
        cells.append(f"{t:.0f} ({q:.2f})")
        a += t if name.endswith(first) else 0
        b += t if name.endswith(second) else 0
    print(f"| {size} | " + " | ".join(cells) + f" | {b / a:.2f} |")
