"""Per-step finish times of nezha's traced calls (loop.py LOOP_TRACE, Engine.op_times): for
each data op (send S / receive R, channel, bytes) the median over ranks and traced calls of
its finish time (us after the run's start). usage: python steps.py OUTDIR RUN [RUN ...]"""
import glob, json, sys
import numpy as np

d = sys.argv[1]
for run in sys.argv[2:]:
    recs = [json.load(open(p)) for p in sorted(glob.glob(f"{d}/{run}.rank*.json"))]
    calls = [t["ops"] for r in recs for t in r.get("trace", [])]
    if not calls:
        continue
    n = min(len(c) for c in calls)
    cells = []
    for i in range(n):
        k, peer, chan, nb = calls[0][i][:4]
        if k == 3 or nb <= 32:
            continue
        t = [c[i][6] / 1e3 for c in calls if c[i][6] >= 0]
        cells.append(f"{chan}:{'S' if k == 0 else 'R'}{nb} {np.median(t):.0f}")
    ends = [max(o[6] for o in c) / 1e3 for c in calls]
    print(f"{run}: {len(calls)} calls, end median {np.median(ends):.0f} us | " + ", ".join(cells))
