"""Issue 17's bar tables from `nezha bench compare` outputs: per collective and size band, best
Open MPI row / nezha-all and best Gloo row / nezha-all (> 1: nezha faster), cells below the bar
marked. usage: python tables.py compare.json [--slim out.json] [--rerun rerun.json ...]"""
import argparse
import json

BANDS = [("4 B–1 KiB", 4, 1 << 10), ("2–8 KiB", 2 << 10, 8 << 10), ("16–128 KiB", 16 << 10, 128 << 10),
         ("256 KiB–1 MiB", 256 << 10, 1 << 20), ("2–64 MiB", 2 << 20, 64 << 20)]
NOISE = 0.95         # the bar: >= 1.0x Open MPI with 5 % allowed for noise
GLOO_BAR = 2.0       # >= 2x Gloo below 1 MiB
LIMIT_BAR = 80.0     # allreduce >= 80 % of the two-rail limit from 64 KiB


def fmt(n):
    for unit, s in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << s and n % (1 << s) == 0:
            return f"{n >> s} {unit}"
    return f"{n} B"


def slim(doc):
    """{coll: {system: {size: avg_us}}}: what the tables need, small enough to keep."""
    return {c: {s: {r["size"]: round(r["avg_us"], 2) for r in rows} for s, rows in per.items()}
            for c, per in doc["summary"].items()}


def ratios(per, fam):
    """{size: (best row of the family / nezha-all, best row's name)}."""
    ref = per.get("nezha-all", {})
    out = {}
    for size, t in ref.items():
        rows = [(per[n][size], n) for n in per if n.startswith(fam) and size in per[n]]
        if rows:
            best, name = min(rows)
            out[size] = (best / t, name)
    return out


def band_cell(r, lo, hi, bar):
    sel = {s: v for s, v in r.items() if lo <= s <= hi}
    if not sel:
        return "n/a"
    vals = [v for v, _ in sel.values()]
    miss = [fmt(s) for s, (v, _) in sorted(sel.items()) if v < bar]
    cell = f"{min(vals):.2f}–{max(vals):.2f}" if len(vals) > 1 else f"{vals[0]:.2f}"
    return f"**{cell}** (below: {', '.join(miss)})" if miss else cell


def tables(doc):
    s = slim(doc)
    s = {c: {n: {int(k): v for k, v in rows.items()} for n, rows in per.items()} for c, per in s.items()}
    lines = ["| collective | " + " | ".join(b[0] for b in BANDS) + " | Gloo below 1 MiB |",
             "|---|" + "---|" * (len(BANDS) + 1)]
    detail = []
    for coll, per in s.items():
        mpi, gloo = ratios(per, "mpi"), ratios(per, "gloo")
        cells = [band_cell(mpi, lo, hi, NOISE) for _, lo, hi in BANDS]
        cells.append(band_cell(gloo, 0, (1 << 20) - 1, GLOO_BAR))
        lines.append(f"| {coll} | " + " | ".join(cells) + " |")
        detail += [f"", f"{coll}: size, nezha-all µs, best Open MPI row (µs, ratio), best Gloo (ratio)"
                   + (", nezha-all % of limit" if coll == "allreduce" else ""), ""]
        for size in sorted(per.get("nezha-all", {})):
            m, g = mpi.get(size), gloo.get(size)
            flag = " <" if m and m[0] < NOISE else ""
            row = (f"  {fmt(size):>8} {per['nezha-all'][size]:>11.1f}  "
                   f"{m[1]:<15} {per[m[1]][size]:>11.1f} {m[0]:5.2f}{flag:2}  "
                   f"{g[1] if g else '':<10} {g[0] if g else float('nan'):6.2f}")
            if coll == "allreduce":
                pct = [r["pct_limit"] for r in doc["summary"]["allreduce"]["nezha-all"] if r["size"] == size][0]
                row += f"  {pct:5.1f}" + (" <" if size >= 64 << 10 and pct < LIMIT_BAR else "")
            detail.append(row)
    return lines, detail


def main():
    p = argparse.ArgumentParser()
    p.add_argument("json")
    p.add_argument("--slim", help="write the latencies the tables use here")
    p.add_argument("--rerun", help="a second run of some sizes: both runs' ratios side by side")
    a = p.parse_args()
    with open(a.json) as f:
        doc = json.load(f)
    if a.slim:
        with open(a.slim, "w") as f:
            json.dump({"command": doc["command"], "started": doc["started"],
                       "wall_seconds": round(doc["wall_seconds"]), "avg_us": slim(doc)}, f, indent=0)
    lines, detail = tables(doc)
    print(f"# {doc['command']}  (started {doc['started']}, {doc['wall_seconds'] / 60:.1f} min)")
    print("\n".join(lines))
    print("\n".join(detail))
    if a.rerun:
        with open(a.rerun) as f:
            print("\n".join(both_runs(doc, json.load(f))))


def both_runs(doc, again):
    """Per collective and size in the rerun: best Open MPI row / nezha-all in each run, and
    whether the size misses the bar in both (a miss), one (within the noise) or none."""
    first = {c: {n: {int(k): v for k, v in r.items()} for n, r in per.items()}
             for c, per in slim(doc).items()}
    second = {c: {n: {int(k): v for k, v in r.items()} for n, r in per.items()}
              for c, per in slim(again).items()}
    lines = ["", f"# rerun: {again['command']} (started {again['started']})",
             "collective, size: Open MPI best / nezha-all in the full run, in the rerun; verdict"]
    for coll, per in second.items():
        m1, m2 = ratios(first.get(coll, {}), "mpi"), ratios(per, "mpi")
        for size in sorted(m2):
            if size not in m1:
                continue
            a, b = m1[size][0], m2[size][0]
            v = ("miss in both" if a < NOISE and b < NOISE else
                 "miss in one" if a < NOISE or b < NOISE else "at the bar in both")
            lines.append(f"  {coll:<15} {fmt(size):>8}  {a:5.2f}  {b:5.2f}  {v}")
    return lines


if __name__ == "__main__":
    main()
