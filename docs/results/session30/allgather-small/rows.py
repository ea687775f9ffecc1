"""Rows from bench compare's json: per size nezha-all avg/period us, best Open MPI avg/period,
ratio best MPI / nezha (period ratio). Usage: rows.py COLL DIR..."""
import gzip, json, sys, os
coll = sys.argv[1]
for d in sys.argv[2:]:
    f = [x for x in os.listdir(d) if x.startswith("compare") and x.endswith((".json", ".json.gz"))][0]
    p = os.path.join(d, f)
    j = json.load(gzip.open(p) if p.endswith(".gz") else open(p))
    s = j["summary"][coll]
    nz = {r["size"]: r for r in s["nezha-all"]}
    out = []
    for z in sorted(nz):
        mp = [r for n in ("mpi-all", "mpi-rail0") for r in s.get(n, []) if r["size"] == z]
        b = min(mp, key=lambda r: r["avg_us"])
        out.append(f"{z}: {nz[z]['avg_us']:.0f}/{nz[z]['period_us']:.0f} mpi {b['avg_us']:.0f}/{b['period_us']:.0f} "
                   f"r={b['avg_us']/nz[z]['avg_us']:.2f}({b['period_us']/nz[z]['period_us']:.2f})")
    print(os.path.basename(d), " | ".join(out))
