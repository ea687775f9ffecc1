"""Best Open MPI row / nezha-all per size for each run (A1 B1 B2 A2), and B / A time.
usage: table.py PREFIX [TAG...] (PREFIX unequal or equal; TAGS default A1 B1 B2 A2, A* are
main, B* this branch); reads /tmp/h44/PREFIX-TAG/compare.json
and keeps a summary (summary.json: each run's rows and nezha's algorithm) under runs/."""
import json, os, sys

D = os.path.dirname(os.path.abspath(__file__))
pre = sys.argv[1]
tags = sys.argv[2:] or ["A1", "B1", "B2", "A2"]
runs = {}
for t in tags:
    p = f"/tmp/h44/{pre}-{t}/compare.json"
    if not os.path.exists(p):
        continue
    d = json.load(open(p))
    d["floor"] = d["limits"]["latency_floor_us"]
    runs[t] = d
    os.makedirs(f"{D}/runs/{pre}-{t}", exist_ok=True)
    keep = {"summary": d["summary"], "nezha_algorithms": d.get("nezha_algorithms")}
    json.dump(keep, open(f"{D}/runs/{pre}-{t}/summary.json", "w"), indent=0)


def rows(d):
    s = d["summary"]["broadcast"]
    nz = {r["size"]: r["avg_us"] for r in s["nezha-all"]}
    mpi = {}
    for name, rs in s.items():
        if name.startswith("mpi"):
            for r in rs:
                mpi[r["size"]] = min(mpi.get(r["size"], 1e18), r["avg_us"])
    return nz, mpi


sizes = sorted(rows(next(iter(runs.values())))[0])
print(f"| size | " + " | ".join(f"{t} (floor {d['floor']:.1f} us): nezha / best MPI (ratio)"
                             for t, d in runs.items()) + " | B/A time |")
print("|---:|" + "---:|" * (len(runs) + 1))
for n in sizes:
    cells, nzt = [], {}
    for t, d in runs.items():
        nz, mpi = rows(d)
        nzt[t] = nz[n]
        cells.append(f"{nz[n]:.1f} / {mpi[n]:.1f} (**{mpi[n] / nz[n]:.2f}**)")
    a = [v for t, v in nzt.items() if t[0] == "A"]
    b = [v for t, v in nzt.items() if t[0] == "B"]
    ba = f"{(sum(b) / len(b)) / (sum(a) / len(a)):.2f}" if a and b else ""
    lab = f"{n} B" if n < 1024 else f"{n >> 10} KiB"
    print(f"| {lab} | " + " | ".join(cells) + f" | {ba} |")
