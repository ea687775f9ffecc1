"""Per kind, collective and size: nezha-all µs of every new and base run (compare.json or
ranks_per_host JSON), their medians and new/base. usage: table.py OUT_DIR KIND"""
import glob, json, os, statistics as st, sys
out, kind = sys.argv[1], sys.argv[2]
rows = {}
for f in sorted(glob.glob(f"{out}/{kind}-*")):
    name = os.path.basename(f)
    if kind == "rph" and f.endswith(".json"):
        tree = name[:-5].rsplit("-", 1)[1]
        d = json.load(open(f))
        for x in d["summary"]["nezha-all"]:  # each run: the median of its --reps
            rows.setdefault(("allreduce", x["size"]), {}).setdefault(tree, []).append(x["avg_us"])
    elif kind != "rph" and os.path.isdir(f):
        tree = name.rsplit("-", 1)[1]
        d = json.load(open(f"{f}/compare.json"))
        for coll, systems in d["summary"].items():
            for x in systems.get("nezha-all", []):
                rows.setdefault((coll, x["size"]), {}).setdefault(tree, []).append(x["avg_us"])
print(f"| collective | size | new runs (µs) | base runs (µs) | new median | base median | new/base |")
print("|---|---:|---|---|---:|---:|---:|")
for (coll, size), t in sorted(rows.items()):
    n, b = t.get("new", []), t.get("base", [])
    mn, mb = (st.median(n) if n else float("nan")), (st.median(b) if b else float("nan"))
    print(f"| {coll} | {size >> 10} KiB | {' '.join(f'{v:.0f}' for v in n)} | "
          f"{' '.join(f'{v:.0f}' for v in b)} | {mn:.0f} | {mb:.0f} | {mn / mb:.2f} |")
