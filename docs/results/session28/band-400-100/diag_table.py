"""Table of diag.sh's compare runs: per collective and size every system's median (us), the
algorithm(s) nezha's rows ran, each row / nezha-all, and the best Open MPI row / nezha-all.
usage: python diag_table.py /tmp/h39/diag-1 [...]   (several runs: the cells list each run)"""
import json
import sys


def load(path):
    d = json.load(open(f"{path}/compare.json"))
    out = {}
    for c, per in d["summary"].items():
        for s, rows in per.items():
            for r in rows:
                out.setdefault(c, {}).setdefault(r["size"], {})[s] = [r["avg_us"], set()]
    for rec in d["runs"]:
        if rec.get("doc") and rec["system"].startswith("nezha"):
            for r in rec["doc"]["results"]:
                cell = out.get(rec["collective"], {}).get(r["size"], {}).get(rec["system"])
                if cell:
                    cell[1].add(r.get("algorithm") or "?")
    return out


def main(paths):
    runs = [load(p) for p in paths]
    for c in runs[0]:
        systems = sorted({s for sz in runs[0][c].values() for s in sz},
                         key=lambda s: (not s.startswith("nezha-all"), s != "nezha-all", s))
        print(f"\n## {c} (us, median of the run's reps; algorithm; per run)\n")
        print("| size | " + " | ".join(systems) + " | best mpi / nezha-all |")
        print("|---" * (len(systems) + 2) + "|")
        for size in sorted(runs[0][c]):
            cells = []
            for s in systems:
                vals = []
                for r in runs:
                    v = r[c].get(size, {}).get(s)
                    if v:
                        vals.append(f"{v[0]:.0f}" + (f" ({'/'.join(sorted(v[1]))})" if v[1] else ""))
                cells.append(", ".join(vals))
            ratio = []
            for r in runs:
                row = r[c].get(size, {})
                mpi = min((v[0] for s, v in row.items() if s.startswith("mpi")), default=None)
                if mpi and "nezha-all" in row:
                    ratio.append(f"{mpi / row['nezha-all'][0]:.2f}")
            print(f"| {size // 1024} KiB | " + " | ".join(cells) + " | " + ", ".join(ratio) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
