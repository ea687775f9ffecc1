"""Markdown tables of the nezha-ina rows: lab (each run's timed mean, the row = median over
runs) against the model (converged split, and the replay of the run's calls with tbf buckets).
Usage: PYTHONPATH=<worktree> python tables.py DIR/compare.json[.gz] ..."""
import sys

import numpy as np

from nezha.sim import calibrate as C
from nezha.sim import ina_sched as I
from nezha.sim.bucket import LAB_PEAK_BPS


def rows_of(path, system="nezha-ina"):
    doc = C._load(path)
    meas = dict(C.measured(path, system))
    runs = [r for r in doc["runs"] if r["system"] == system and r.get("doc")]
    per_run = [{x["nbytes"]: x["avg_us"] for x in r["doc"]["results"]} for r in runs]
    cal = C.calibrate([path])
    rates = doc["lab"]["rates_bps"]
    tcp = I.lab_rails(runs[0])
    alpha = [C.alpha_of(cal, rates[i] / 8) if cal["rails"] else 0.0 for i in tcp]
    fab, pl, off, prm, _ = I.rail_of(doc, runs[0])
    rail = I.Rail(pl, off, prm, fab, alpha, 0.0, rtt_rate=LAB_PEAK_BPS / 8)
    rep = I.replays(doc, alpha)[True]
    out = []
    for nb in sorted(meas):
        if nb < 64 << 10:
            continue
        conv = float(rail.converged(nb)["t_rank"].mean()) * 1e6
        r = float(np.median([x[nb] for x in rep if nb in x])) * 1e6
        m = meas[nb] * 1e6
        out.append((nb, m, [p.get(nb) for p in per_run], conv, r))
    return doc, out


def size(nb):
    return f"{nb >> 20} MiB" if nb >= 1 << 20 else f"{nb >> 10} KiB"


def main(paths):
    for path in paths:
        doc, rows = rows_of(path)
        print(f"\n{path}: rails {', '.join(f'{b / 1e6:g}' for b in doc['lab']['rates_bps'])} "
              f"Mbit/s, INA on rail{[i for i in range(len(doc['lab']['rates_bps'])) if i not in I.lab_rails([r for r in doc['runs'] if r['system'] == 'nezha-ina'][0])][0]}\n")
        print("| size | lab row (µs) | runs (µs) | converged (µs) | % | replay tbf (µs) | % |")
        print("|---|---|---|---|---|---|---|")
        for nb, m, runs, conv, rep in rows:
            rs = " / ".join(f"{x:.0f}" for x in runs if x is not None)
            print(f"| {size(nb)} | {m:.0f} | {rs} | {conv:.0f} | {100 * (conv - m) / m:+.1f} | "
                  f"{rep:.0f} | {100 * (rep - m) / m:+.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
