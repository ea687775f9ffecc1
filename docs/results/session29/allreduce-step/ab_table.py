"""A B B A table from compare runs: per size, nezha-all's OSU avg (us; median over the run's
repetitions, as compare.md), best Open MPI row / nezha-all per run, and B/A (mean of the B
runs over mean of the A runs). usage: python ab_table.py A1 B1 B2 A2 (compare --out dirs)"""
import json, sys

dirs = sys.argv[1:]
docs = [json.load(open(f"{d}/compare.json")) for d in dirs]
tags = [d.rstrip("/").split("/")[-1] for d in dirs]


def rows(doc, name):
    return {r["size"]: r for r in doc["summary"]["allreduce"].get(name, [])}


def size_txt(s):
    return f"{s} B" if s < 1024 else f"{s >> 10} KiB"


sizes = sorted(rows(docs[0], "nezha-all"))
print("| size | " + " | ".join(f"nezha-all {t}" for t in tags) + " | " +
      " | ".join(f"best MPI / nezha-all {t}" for t in tags) + " | nezha-rail0 " +
      "/".join(tags) + " | B/A |")
print("|" + "---|" * (2 * len(tags) + 3))
for s in sizes:
    nz = [rows(d, "nezha-all")[s]["avg_us"] for d in docs]
    n0 = [rows(d, "nezha-rail0").get(s, {}).get("avg_us", float("nan")) for d in docs]
    mpi = [min(rows(d, m)[s]["avg_us"] for m in ("mpi-all", "mpi-rail0") if s in rows(d, m))
           for d in docs]
    a = [v for v, t in zip(nz, tags) if "A" in t.split("-")[-1]]
    b = [v for v, t in zip(nz, tags) if "B" in t.split("-")[-1]]
    ba = (sum(b) / len(b)) / (sum(a) / len(a)) if a and b else float("nan")
    print(f"| {size_txt(s)} | " + " | ".join(f"{v:.1f}" for v in nz) + " | " +
          " | ".join(f"{m / v:.2f}" for m, v in zip(mpi, nz)) + " | " +
          "/".join(f"{v:.0f}" for v in n0) + f" | {ba:.2f} |")
