"""best Open MPI row / nezha-all per collective and size (> 1: nezha faster), from compare.json.gz"""
import gzip, json, sys
for f in sys.argv[1:]:
    d = json.load(gzip.open(f))
    print(f"\n{f}: best Open MPI row / nezha-all (and the loop period's ratio where recorded)\n")
    colls = [c for c in d["options"]["collectives"] if c in d["summary"]]
    sizes = sorted({r["size"] for c in colls for r in d["summary"][c]["nezha-all"]})
    print("| size | " + " | ".join(colls) + " |"); print("|---:" * (len(colls) + 1) + "|")
    for z in sizes:
        cells = []
        for c in colls:
            s = d["summary"][c]
            nz = {r["size"]: r for r in s["nezha-all"]}.get(z)
            mp = [r for n in ("mpi-all", "mpi-rail0") for r in s.get(n, []) if r["size"] == z]
            if not nz or not mp:
                cells.append("")
                continue
            best = min(mp, key=lambda r: r["avg_us"])
            txt = f"{best['avg_us'] / nz['avg_us']:.2f}"
            txt = f"**{txt}**" if best["avg_us"] / nz["avg_us"] < 0.95 else txt
            if nz.get("period_us") and best.get("period_us"):
                txt += f" ({best['period_us'] / nz['period_us']:.2f})"
            cells.append(txt)
        print(f"| {z} | " + " | ".join(cells) + " |")
