"""One line per size of a `nezha bench compare` JSON: per system the % of the limit of each
repetition (in run order), their mean (m) and the mean CPU s/GB (c).
   python pivot.py compare.json [min_size]"""
import json, sys, collections
d = json.load(open(sys.argv[1])); lo = int(sys.argv[2]) if len(sys.argv) > 2 else 0
lim = d["limits"]["busbw_all_gbps"]
t = collections.defaultdict(lambda: collections.defaultdict(list))
for r in d["runs"]:
    for x in (r["doc"] or {}).get("results", []):
        if x["size"] >= lo:
            t[x["size"]][r["system"]].append((100 * x["busbw_gbps"] / lim, x["cpu_s_per_gb"]))
systems = sorted({s for v in t.values() for s in v})
print("size".rjust(9), *[s.rjust(24) for s in systems])
for size in sorted(t):
    cells = []
    for s in systems:
        v = t[size][s]
        p = "/".join(f"{a:.0f}" for a, _ in v)
        cells.append(f"{p} m{sum(a for a,_ in v)/len(v):.1f} c{sum(c for _,c in v)/len(v):.2f}".rjust(24))
    print(f"{size >> 10:>7}K", *cells)
