"""forced-*.txt (forced.sh's output) as one table per collective: a row per variant, a column
per size (us, rank 0's OSU mean). usage: python forcedtable.py forced-equal.txt"""
import collections
import re
import sys

rows, cur = collections.OrderedDict(), None
for ln in open(sys.argv[1]):
    m = re.match(r"== (\w+) (\w+)$", ln.strip())
    if m and m.group(1) != "model_report":
        cur = m.groups()
        rows.setdefault(cur[0], collections.OrderedDict())[cur[1]] = {}
        continue
    p = ln.split()
    if cur and len(p) == 2 and p[0].isdigit():
        rows[cur[0]][cur[1]][int(p[0])] = float(p[1])
for coll, vs in rows.items():
    sizes = sorted({s for v in vs.values() for s in v})
    print(f"\n{coll} (size{' per rank' if coll == 'allgather' else ''}, us)\n")
    print("| variant | " + " | ".join(f"{s >> 10} KiB" if s >= 1024 else f"{s} B" for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for v, d in vs.items():
        print(f"| {v} | " + " | ".join(f"{d[s]:.0f}" if s in d else "" for s in sizes) + " |")
