"""The A/B table from ab.sh's runs: per rate pair, collective and size, nezha-all's median of
3 reps in each of the two base (main) and two new (h53) runs, new/base (mean of the two
medians each), and the best Open MPI row (median over the four runs of min(mpi-all,
mpi-rail0)). argv: OUTDIR."""
import gzip
import json
import statistics
import sys

top = sys.argv[1]
for pair, name in (("equal", "400 + 400"), ("unequal", "400 + 100")):
    docs = {}
    for t in ("base", "new"):
        for i in (1, 2):
            try:
                docs[(t, i)] = json.load(gzip.open(f"{top}/ab-{t}-{pair}-{i}/compare.json.gz"))["summary"]
            except FileNotFoundError:
                pass
    if not docs:
        continue
    print(f"\n### {name}\n\nus; base1/base2 and new1/new2: nezha-all, median of 3 reps; mpi: best Open MPI row\n")
    print("| collective | size | base1 | base2 | new1 | new2 | new/base | mpi | new vs mpi |")
    print("|---|---|---|---|---|---|---|---|---|")
    first = next(iter(docs.values()))
    for coll in ("allreduce", "broadcast", "allgather", "reduce_scatter"):
        if coll not in first:
            continue
        for j, row in enumerate(first[coll]["nezha-all"]):
            v = {k: d[coll]["nezha-all"][j]["avg_us"] for k, d in docs.items()}
            mpi = statistics.median(min(d[coll][s][j]["avg_us"] for s in ("mpi-all", "mpi-rail0"))
                                    for d in docs.values())
            b = [v[k] for k in v if k[0] == "base"]
            n = [v[k] for k in v if k[0] == "new"]
            ratio = (sum(n) / len(n)) / (sum(b) / len(b)) if b and n else float("nan")
            cell = lambda k: f"{v[k]:.0f}" if k in v else "-"  # noqa: E731
            print(f"| {coll} | {row['size'] >> 10} KiB | {cell(('base', 1))} | {cell(('base', 2))} | "
                  f"{cell(('new', 1))} | {cell(('new', 2))} | {ratio:.2f} | {mpi:.0f} | "
                  f"{mpi / (sum(n) / len(n)) if n else float('nan'):.2f} |")
