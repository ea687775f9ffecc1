import gzip, json, sys, os
for d in sys.argv[1:]:
    f = [x for x in os.listdir(d) if x.startswith("compare") and x.endswith((".json", ".json.gz"))][0]
    p = os.path.join(d, f)
    j = json.load(gzip.open(p) if p.endswith(".gz") else open(p))
    s = j["summary"]["reduce_scatter"]
    nz = {r["size"]: r for r in s["nezha-all"]}
    out = []
    for z in sorted(nz):
        mp = [r for n in ("mpi-all", "mpi-rail0") for r in s.get(n, []) if r["size"] == z]
        b = min(mp, key=lambda r: r["avg_us"])
        out.append(f"{z//1024}K {nz[z]['avg_us']:.0f}/{nz[z]['period_us']:.0f} mpi {b['avg_us']:.0f}/{b['period_us']:.0f} r={b['avg_us']/nz[z]['avg_us']:.2f}({b['period_us']/nz[z]['period_us']:.2f})")
    print(os.path.basename(d), " | ".join(out))
