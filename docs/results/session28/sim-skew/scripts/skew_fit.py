"""The ranks' skew from stored runs with every rank's call times (rank_calls): its
distribution, the one-constant fit (calibrate.rank_skew) on each set of runs, and how well
span - K reproduces the bench's row on the others (measured spans: the skew model alone,
no simulation). usage (from the tree): PYTHONPATH=. python skew_fit.py"""
import glob
import os

import numpy as np

from nezha.sim import benchloop as BL
from nezha.sim import calibrate as C

R = "docs/results/"
S21 = [R + f"session21/sim-replay/{n}/compare.json.gz" for n in ("het-3", "eq-2", "eq-3")]
S26 = sorted(glob.glob(R + "session26/ina-sim/compare-*/compare.json.gz")
             + glob.glob(R + "session26/ina-sim/first/compare-*/compare.json.gz"))
S27 = sorted(glob.glob(R + "session27/ina-window/*/compare.json.gz"))
SETS = {
    "s26 rail0+ina (FIT)": (S26, None),
    "s21 nezha-all": (S21, {"nezha-all"}),
    "s21 rail0/rail1": (S21, {"nezha-rail0", "nezha-rail1"}),
    "s27 ina-window": (S27, None),
}


def errs(pts, K):
    return np.array([100 * ((p["span_s"] - K) / p["row_s"] - 1) for p in pts])


def line(name, pts, K):
    e = errs(pts, K)
    small = np.array([p["nbytes"] <= 256 << 10 for p in pts])
    big = ~small
    out = f"  {name:22} n={len(e):3d} >10%: {(abs(e) > 10).sum():2d}  all {e.min():+5.1f}..{e.max():+5.1f}"
    if small.any():
        out += f" | 64-256K mean {e[small].mean():+5.1f} {e[small].min():+5.1f}..{e[small].max():+5.1f}"
    if big.any():
        out += f" | 512K+ {e[big].min():+5.1f}..{e[big].max():+5.1f}"
    return out


pts = {k: C.skew_points(f, s) for k, (f, s) in SETS.items()}
print("# points: one per (run, size), means over its timed calls; skew = lag + end = span - row (us)")
for k, p in pts.items():
    print(f"## {k}: {len(p)} points from {len({q['file'] for q in p})} files, systems "
          f"{sorted({q['system'] for q in p})}")
    for lo, hi in ((64, 128), (256, 256), (512, 1024), (2048, 65536)):
        sel = [q for q in p if lo << 10 <= q["nbytes"] <= hi << 10]
        if not sel:
            continue
        sk = np.array([q["lag_s"] + q["end_s"] for q in sel]) * 1e6
        lg = np.array([q["lag_s"] for q in sel]) * 1e6
        en = np.array([q["end_s"] for q in sel]) * 1e6
        pc = np.array([(q["span_s"] / q["row_s"] - 1) * 100 for q in sel])
        print(f"   {lo:>5}-{hi:<5}K n={len(sel):3d} skew median {np.median(sk):5.0f} "
              f"p10..p90 {np.percentile(sk, 10):4.0f}..{np.percentile(sk, 90):5.0f}  lag median "
              f"{np.median(lg):4.0f}  end median {np.median(en):4.0f}  span/row-1 median {np.median(pc):+5.1f} %")
print()
print("# fit K on one set (rows), check span - K against the row on every set (columns: % error)")
print(f"# benchloop.RANK_SKEW_S = {BL.RANK_SKEW_S * 1e6:.0f} us")
print("  K=0 (the span as the row):")
for k, p in pts.items():
    print(line(k, p, 0.0))
for k, (f, s) in SETS.items():
    sk = C.rank_skew(f, s)
    print(f"fit on {k}: K = {sk['skew_s'] * 1e6:.1f} us (lag {sk['lag_s'] * 1e6:.1f} + end "
          f"{sk['end_s'] * 1e6:.1f}), {sk['points']} points")
    for k2, p in pts.items():
        print(line(k2 + (" (in-sample)" if k2 == k else ""), p, sk["skew_s"]))

print()
print("# per call, the ranks in order of start (end): mean offset after the first start "
      "(before the last end), µs, over every timed call 64-256 KiB and 512 KiB-64 MiB")
import json  # noqa: E402
for k, (files, systems) in SETS.items():
    for lo, hi in ((64, 256), (512, 65536)):
        st, en = [], []
        for path in files:
            doc = C._load(path)
            for run in doc.get("runs") or []:
                nm = run.get("system") or ""
                if not run.get("doc") or (systems and nm not in systems) or \
                        (not systems and not nm.startswith("nezha")):
                    continue
                for r in run["doc"]["results"]:
                    if r.get("rank_calls") and lo << 10 <= r["nbytes"] <= hi << 10:
                        s = np.asarray(r["rank_calls"]["start_us"], float)
                        e = s + np.asarray(r["rank_calls"]["us"], float)
                        st.append(np.sort(s - s.min(axis=0), axis=0).T)
                        en.append(np.sort(e.max(axis=0) - e, axis=0).T)
        st, en = np.concatenate(st), np.concatenate(en)
        q = lambda a: " ".join(f"{x:4.0f}" for x in a.mean(axis=0))
        print(f"  {k:22} {lo}-{hi}K calls={len(st):5d}  start offsets {q(st)} (mean {st.mean():4.0f}, "
              f"p90 of the last {np.percentile(st[:, -1], 90):4.0f})  end offsets {q(en)} (mean {en.mean():4.0f}, "
              f"p90 of the last {np.percentile(en[:, -1], 90):4.0f})")
