"""Issue 17's bar tables from `nezha bench compare` outputs (compare.json or .json.gz): per collective
and size band, best Open MPI row / nezha-all or best Gloo row / nezha-all (> 1: nezha faster), cells
below the bar in bold; then per size: nezha-all µs, the best row, the ratio of the summary and of
each interleaved repetition, and allreduce's % of the two-rail limit.
usage: python tables.py compare.json.gz [--family mpi|gloo] [--rerun again.json.gz ...]"""
import argparse
import gzip
import json
import re

NOISE = 0.95         # >= 1.0x Open MPI with 5 % allowed for noise
GLOO_BAR = 2.0       # >= 2x Gloo's best row below 1 MiB
LIMIT_BAR = 80.0     # allreduce >= 80 % of the two-rail limit from 64 KiB
BANDS = {"mpi": [("512 KiB–1 MiB", 512 << 10, 1 << 20), ("2–8 MiB", 2 << 20, 8 << 20),
                 ("16–64 MiB", 16 << 20, 64 << 20)],
         "gloo": [("4 B–1 KiB", 4, 1 << 10), ("2–8 KiB", 2 << 10, 8 << 10),
                  ("16–128 KiB", 16 << 10, 128 << 10), ("256–512 KiB", 256 << 10, 512 << 10)]}


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def fmt(n):
    for unit, s in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << s and n % (1 << s) == 0:
            return f"{n >> s} {unit}"
    return f"{n} B"


def per_rep(doc):
    """{(coll, system, rep): {size: avg_us}} from each run's OSU table."""
    out = {}
    for r in doc["runs"]:
        rows = {}
        for line in (r.get("stdout") or "").splitlines():
            m = re.match(r"^(\d+)\s+([\d.]+)\s", line)
            if m:
                rows[int(m.group(1))] = float(m.group(2))
        out[(r["collective"], r["system"], r["rep"])] = rows
    return out


def ratios(doc, coll, fam):
    """{size: (best/nezha from the summary, best row's name, [per-rep ratios], pct_limit)}"""
    s = doc["summary"][coll]
    nz = {r["size"]: r for r in s.get("nezha-all", [])}
    reps = per_rep(doc)
    nrep = 1 + max([k[2] for k in reps] or [0])
    out = {}
    for size, r in nz.items():
        rows = [(x["avg_us"], n) for n in s if n.startswith(fam) for x in s[n] if x["size"] == size]
        if not rows:
            continue
        best, name = min(rows)
        each = []
        for k in range(nrep):
            t = reps.get((coll, "nezha-all", k), {}).get(size)
            o = [reps[(coll, n, k)][size] for n in s if n.startswith(fam)
                 if size in reps.get((coll, n, k), {})]
            if t and o:
                each.append(min(o) / t)
        out[size] = (best / r["avg_us"], name, each, r.get("pct_limit"), r["avg_us"], best)
    return out


def band_cell(r, lo, hi, bar):
    sel = {s: v for s, v in r.items() if lo <= s <= hi}
    if not sel:
        return "n/a"
    vals = [v[0] for v in sel.values()]
    miss = [fmt(s) for s, v in sorted(sel.items()) if v[0] < bar]
    cell = f"{min(vals):.2f}–{max(vals):.2f}" if len(vals) > 1 else f"{vals[0]:.2f}"
    return f"**{cell}** ({', '.join(miss)})" if miss else cell


def main():
    p = argparse.ArgumentParser()
    p.add_argument("json")
    p.add_argument("--family", default="mpi")
    p.add_argument("--rerun", action="append", default=[])
    a = p.parse_args()
    doc = load(a.json)
    bar = NOISE if a.family == "mpi" else GLOO_BAR
    bands = BANDS[a.family]
    colls = [c for c in doc["options"]["collectives"] if c in doc["summary"]]
    print(f"# {doc['command']}\n# started {doc['started']}, {doc['wall_seconds'] / 60:.1f} min, "
          f"tree {doc.get('tree')}\n")
    print(f"best {a.family} row / nezha-all (bar {bar})\n")
    print("| collective | " + " | ".join(b[0] for b in bands) + " |")
    print("|---|" + "---|" * len(bands))
    allr = {c: ratios(doc, c, a.family) for c in colls}
    for c in colls:
        print(f"| {c} | " + " | ".join(band_cell(allr[c], lo, hi, bar) for _, lo, hi in bands) + " |")
    for c in colls:
        print(f"\n{c}: size, nezha-all µs, best {a.family} row, its µs, ratio, per-rep ratios"
              + (", % of limit" if c == "allreduce" else ""))
        for size, (q, name, each, pct, t, best) in sorted(allr[c].items()):
            row = (f"  {fmt(size):>8} {t:>11.1f}  {name:<15} {best:>11.1f} {q:5.2f}{' <' if q < bar else '  '}"
                   f"  [{' '.join(f'{e:.2f}' for e in each)}]")
            if c == "allreduce" and pct is not None:
                row += f"  {pct:5.1f}" + (" <" if size >= 64 << 10 and pct < LIMIT_BAR else "")
            print(row)
    for path in a.rerun:
        again = load(path)
        print(f"\n# rerun: {again['command']} (started {again['started']})")
        print("collective, size: ratio in the first run [reps], in the rerun [reps]; verdict")
        for c in again["options"]["collectives"]:
            if c not in again["summary"] or c not in allr:
                continue
            r2 = ratios(again, c, a.family)
            for size, v in sorted(r2.items()):
                if size not in allr[c]:
                    continue
                u = allr[c][size]
                verdict = ("miss in both" if u[0] < bar and v[0] < bar else
                           "miss in one" if u[0] < bar or v[0] < bar else "at the bar in both")
                print(f"  {c:<15} {fmt(size):>8}  {u[0]:5.2f} [{' '.join(f'{e:.2f}' for e in u[2])}]"
                      f"  {v[0]:5.2f} [{' '.join(f'{e:.2f}' for e in v[2])}]  {verdict}")


if __name__ == "__main__":
    main()
