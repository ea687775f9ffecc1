#!/usr/bin/env python3
"""Per layout and size: nezha-all's time (us, the run's median over its repetitions), the
algorithm(s) its ranks picked per repetition, and best Open MPI row / nezha-all (> 1: nezha
faster), for the runs given in order (A1 B1 B2 A2); then B/A = mean nezha time of the B runs
over the A runs. Usage: table.py DIR [LAYOUT ...]"""
import json
import os
import sys


def load(path):
    d = json.load(open(path))
    s = d["summary"]
    nz = {r["size"]: r["avg_us"] for r in s["nezha-all"]}
    mpi = {}
    for name, rows in s.items():
        if name.startswith("mpi"):
            for r in rows:
                mpi[r["size"]] = min(mpi.get(r["size"], float("inf")), r["avg_us"])
    algos = {}
    for r in d["runs"]:
        if r["system"] == "nezha-all":  # the full record, or slim.py's
            for x in r.get("results") or (r.get("doc") or {}).get("results", []):
                algos.setdefault(x["size"], []).append(x["algorithm"])
    return nz, mpi, algos


def size_text(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def main():
    root = sys.argv[1]
    for lay in sys.argv[2:] or ["2x4", "4x2"]:
        runs = ["A1", "B1", "B2", "A2"]
        got = {n: load(os.path.join(root, f"{lay}-{n}.json")) for n in runs
               if os.path.exists(os.path.join(root, f"{lay}-{n}.json"))}
        print(f"\n### {lay}\n")
        print("| size | " + " | ".join(f"{n} us (algo) | {n} mpi/nz" for n in got) + " | B/A |")
        print("|---|" + "---|---|" * len(got) + "---|")
        for size in sorted(next(iter(got.values()))[0]):
            cells, a, b = [], [], []
            for n, (nz, mpi, algos) in got.items():
                t = nz[size]
                (a if n[0] == "A" else b).append(t)
                al = "/".join(dict.fromkeys(algos.get(size, ["?"])))
                cells.append(f"{t:.0f} ({al}) | {mpi[size] / t:.2f}")
            ratio = (sum(b) / len(b)) / (sum(a) / len(a)) if a and b else float("nan")
            print(f"| {size_text(size)} | " + " | ".join(cells) + f" | {ratio:.2f} |")


if __name__ == "__main__":
    main()
