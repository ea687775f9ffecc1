"""The A/B table: nezha-all's broadcast median (min-max) per size, base (main) and new (h51),
and the best Open MPI row of each run; from bench compare's json (argv: dir with
ab-{base,new}-{equal,unequal}/compare.json)."""
import gzip
import json
import sys

top = sys.argv[1] if len(sys.argv) > 1 else "."
for pair, name in (("equal", "400 + 400"), ("unequal", "400 + 100")):
    got = {t: json.load(gzip.open(f"{top}/ab-{t}-{pair}/compare.json.gz"))["summary"]["broadcast"]
           for t in ("base", "new")}
    print(f"\n{name} (µs, median of 3 reps, min-max; mpi = best of mpi-all/mpi-rail0 in that run)\n")
    print("| size | base nezha-all | new nezha-all | new/base | base mpi | new mpi | base vs mpi | new vs mpi |")
    print("|---|---|---|---|---|---|---|---|")
    for i, row in enumerate(got["base"]["nezha-all"]):
        b, n = row, got["new"]["nezha-all"][i]
        mb = min(got["base"][s][i]["avg_us"] for s in ("mpi-all", "mpi-rail0"))
        mn = min(got["new"][s][i]["avg_us"] for s in ("mpi-all", "mpi-rail0"))
        print(f"| {b['size'] >> 10} KiB | {b['avg_us']:.0f} ({b['min_avg_us']:.0f}-{b['max_avg_us']:.0f}) "
              f"| {n['avg_us']:.0f} ({n['min_avg_us']:.0f}-{n['max_avg_us']:.0f}) | {n['avg_us'] / b['avg_us']:.2f} "
              f"| {mb:.0f} | {mn:.0f} | {mb / b['avg_us']:.2f} | {mn / n['avg_us']:.2f} |")
