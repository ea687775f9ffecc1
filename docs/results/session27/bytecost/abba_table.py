"""A B B A table from run.sh's compare outputs (/tmp/h28/<step>-<tag>/compare.json): per rate
set, collective and size: nezha-all's median (us) and algorithm in each run, best Open MPI
row / nezha-all per run, and B / A (mean of the B runs' nezha times over the A runs').
usage: python abba_table.py A1 B1 B2 A2   (tags; A = the first and last, B = the middle two)"""
import json
import sys

COLLS = ("broadcast", "allgather", "allreduce", "reduce_scatter")


def load(step, tag):
    d = json.load(open(f"/tmp/h28/{step}-{tag}/compare.json"))
    out = {}
    for c, per in d["summary"].items():
        nz = {r["size"]: r["avg_us"] for r in per.get("nezha-all", [])}
        mpi = {}
        for s, rows in per.items():
            if s.startswith("mpi"):
                for r in rows:
                    mpi[r["size"]] = min(mpi.get(r["size"], 1e99), r["avg_us"])
        algo = {}
        for rec in d["runs"]:
            if rec["collective"] == c and rec["system"] == "nezha-all" and rec.get("doc"):
                for r in rec["doc"]["results"]:
                    algo.setdefault(r["size"], set()).add(r.get("algorithm") or "?")
        out[c] = (nz, mpi, algo)
    return out


def main(tags):
    for step in ("equal", "unequal"):
        runs = {t: load(step, t) for t in tags}
        print(f"\n## {step} ({', '.join(tags)}; A = the first and last, B = the middle two)\n")
        print("| collective | size | " + " | ".join(f"{t} us (algo)" for t in tags)
              + " | " + " | ".join(f"{t} mpi/nz" for t in tags) + " | B/A time |")
        print("|---" * (3 + 2 * len(tags)) + "|")
        for c in [c for c in COLLS if c in runs[tags[0]]]:
            sizes = sorted(runs[tags[0]][c][0])
            for s in sizes:
                cells, ratios, a, b = [], [], [], []
                for t in tags:
                    nz, mpi, algo = runs[t][c]
                    v = nz.get(s)
                    cells.append(f"{v:.0f} ({'/'.join(sorted(algo.get(s, [])))})" if v else "-")
                    ratios.append(f"{mpi[s] / v:.2f}" if v and s in mpi else "-")
                    (a if t in (tags[0], tags[-1]) else b).append(v)
                ba = (sum(b) / len(b)) / (sum(a) / len(a)) if all(a + b) and a and b else None
                print(f"| {c} | {s >> 10} KiB | " + " | ".join(cells) + " | "
                      + " | ".join(ratios) + f" | {'-' if ba is None else f'{ba:.2f}'} |")


main(sys.argv[1:] or ["A1", "B1", "B2", "A2"])
