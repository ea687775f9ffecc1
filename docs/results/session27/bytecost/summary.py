"""Issue 17's bar table on one tree from `nezha bench compare` outputs: per rate pair,
collective and size, best Open MPI row / nezha-all (> 1: nezha faster) and, below 1 MiB,
best Gloo row / nezha-all. A size re-run with repetitions (--rerun) takes the rerun's
medians; each repetition's own ratio (best Open MPI row of that repetition / nezha-all of
it) is listed for every cell still below the bar.
usage: python summary.py --run equal=/tmp/h28/equal/compare.json --run unequal=... \
         [--rerun equal=/tmp/h28/equal-small/compare.json ...] [--slim DIR]"""
import argparse
import collections
import json

NOISE, GLOO_BAR = 0.95, 2.0
COLLS = ("allreduce", "broadcast", "allgather", "reduce_scatter")


def fmt(n):
    for unit, s in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << s and n % (1 << s) == 0:
            return f"{n >> s} {unit}"
    return f"{n} B"


def medians(doc):
    """{coll: {system: {size: median avg_us over repetitions}}}"""
    return {c: {s: {r["size"]: r["avg_us"] for r in rows} for s, rows in per.items()}
            for c, per in doc["summary"].items()}


def per_rep(doc):
    """{coll: {rep: {system: {size: avg_us}}}} of the runs that passed their placement check."""
    out = collections.defaultdict(lambda: collections.defaultdict(dict))
    for rec in doc["runs"]:
        if "error" in rec or not rec.get("doc") or not rec["placement"]["ok"]:
            continue
        out[rec["collective"]][rec["rep"]][rec["system"]] = {r["size"]: r["avg_us"]
                                                             for r in rec["doc"]["results"]}
    return out


def best(per, size, fam):
    rows = [(v[size], n) for n, v in per.items() if n.startswith(fam) and size in v]
    return min(rows) if rows else (None, None)


def ratio(per, size, fam):
    t, name = best(per, size, fam)
    me = per.get("nezha-all", {}).get(size)
    return (t / me, name) if t and me else (None, None)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--run", action="append", default=[])
    p.add_argument("--rerun", action="append", default=[])
    p.add_argument("--slim", help="write each document's medians here (<name>.json)")
    a = p.parse_args()
    runs = {k: json.load(open(v)) for k, v in (x.split("=", 1) for x in a.run)}
    reruns = collections.defaultdict(list)
    for x in a.rerun:
        k, v = x.split("=", 1)
        reruns[k].append(json.load(open(v)))
    if a.slim:
        for k, d in list(runs.items()) + [(f"{k}-rerun{i}", d) for k, ds in reruns.items()
                                          for i, d in enumerate(ds)]:
            with open(f"{a.slim}/{k}.json", "w") as f:
                json.dump({"command": d["command"], "started": d["started"],
                           "wall_seconds": round(d["wall_seconds"]),
                           "nezha_defaults": d.get("nezha_defaults"),
                           "avg_us": medians(d)}, f, indent=0)
    for k, d in runs.items():
        print(f"- {k}: `{d['command']}` (started {d['started']}, {d['wall_seconds'] / 60:.1f} min)")
        for r in reruns[k]:
            print(f"  - rerun: `{r['command']}` (started {r['started']}, {r['wall_seconds'] / 60:.1f} min)")
    misses = []
    for k, d in runs.items():
        m = medians(d)
        rm = [(medians(r), per_rep(r)) for r in reruns[k]]
        print(f"\n## {k}: best Open MPI row / nezha-all (Gloo below 1 MiB: best Gloo row / nezha-all)\n")
        print("| size | " + " | ".join(COLLS) + " |")
        print("|---" * (len(COLLS) + 1) + "|")
        sizes = sorted({s for c in COLLS for s in m.get(c, {}).get("nezha-all", {})})
        for size in sizes:
            cells = []
            for c in COLLS:
                src, reps = m.get(c, {}), None
                for med, pr in rm:       # the last rerun that has this size wins
                    if size in med.get(c, {}).get("nezha-all", {}):
                        src, reps = med[c], pr.get(c, {})
                r, name = ratio(src, size, "mpi")
                if r is None:
                    cells.append("n/a")
                    continue
                # Gloo: the full run's rows (the reruns have none); against its nezha-all
                g, _ = ratio(m.get(c, {}), size, "gloo") if size < 1 << 20 else (None, None)
                cell = f"{r:.2f}" + ("*" if reps else "")
                if r < NOISE:
                    cell = f"**{cell}**"
                if g is not None:
                    cell += f" / {'**' if g < GLOO_BAR else ''}{g:.1f}{'**' if g < GLOO_BAR else ''}"
                cells.append(cell)
                if r < NOISE or (g is not None and g < GLOO_BAR):
                    vals = ([f"{ratio(reps[x], size, 'mpi')[0]:.2f}" for x in sorted(reps)
                             if ratio(reps[x], size, 'mpi')[0] is not None] if reps else [])
                    misses.append((k, c, size, r, name, src["nezha-all"][size], g, vals))
            print(f"| {fmt(size)} | " + " | ".join(cells) + " |")
    print("\n## Allreduce, nezha-all % of the two-rail limit from 64 KiB (bar 80 %)\n")
    for k, d in runs.items():
        rows = [r for r in d["summary"]["allreduce"]["nezha-all"] if r["size"] >= 64 << 10]
        print(f"- {k}: " + ", ".join(f"{fmt(r['size'])} {r['pct_limit']:.1f}" for r in rows)
              + f" (min {min(r['pct_limit'] for r in rows):.1f})")
    print("\n## Cells below the bar (Open MPI < 0.95, or Gloo < 2.0 below 1 MiB)\n")
    print("| rails | collective | size | vs Open MPI (best row) | nezha-all µs | vs Gloo | per repetition vs Open MPI |")
    print("|---|---|---|---|---|---|---|")
    for k, c, size, r, name, t, g, vals in misses:
        print(f"| {k} | {c} | {fmt(size)} | {r:.2f} ({name}) | {t:.0f} | "
              f"{'' if g is None else f'{g:.1f}'} | {', '.join(vals) or '(one run)'} |")


if __name__ == "__main__":
    main()
