"""Constants from the lab: alpha and delivered rate per rail, CPU cost per byte.

Reads `nezha bench compare` JSON (plain or .gz; the suite's summary holds avg_us per
message size per system). A system on one rail running nezha's ring allreduce on n hosts
takes T(S) = 2(n-1) alpha + 2(n-1)/n S / rate + (n-1)/n S cpu: a least-squares line
through T(S) above the small-message threshold gives alpha (intercept / 2(n-1)) and
seconds per byte (slope); the rail's nominal rate (the lab's rates_bps) then leaves the
CPU cost per byte as the rest of the slope (never below 0).

Runs since session 21 also record every rank's call times (`rank_calls`); rank_skew()
reads from them how far the bench's row (the mean over ranks of each rank's own clock) is
below the collective's span (what a simulation that starts every rank at once predicts).
"""
import gzip
import json

import numpy as np

SMALL = 64 << 10  # nezha's default NEZHA_SMALL_MSG_THRESHOLD: below it, recursive doubling


def burst_saving(nbytes, hosts, bps, gap_s, mtu=9000, loss_s=None):
    """Seconds a ring allreduce of nbytes gains on one tbf-shaped link from the tokens the
    link earned in gap_s before the call: a bucket holding B0 = min(burst, rate x gap)
    sends at the peak while it drains at (peak - rate), so B0 x peak / (peak - rate) of the
    link's 2(n-1)/n x nbytes go at the peak instead of the rate. burst: what the ring gets
    of tbf's (bucket.ring_burst_bytes; loss_s=0: tbf's whole burst), as the replay's
    buckets give it."""
    from nezha.lab import shaping
    from nezha.sim.bucket import LAB_BURST_LOSS_S, LAB_PEAK_BPS, ring_burst_bytes
    rate = bps / 8 * shaping.goodput_ceiling(mtu)
    peak = LAB_PEAK_BPS / 8
    if peak <= rate:
        return 0.0
    burst = ring_burst_bytes(bps, LAB_BURST_LOSS_S if loss_s is None else loss_s, mtu)
    b0 = min(burst, rate * max(gap_s, 0.0))
    fast = min(2 * (hosts - 1) / hosts * nbytes, b0 * peak / (peak - rate))
    return fast * (1 / rate - 1 / peak)


def _load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def fit_line(nbytes, seconds):
    """(intercept, slope) of a line fitted in relative error (sizes span 1000x: a plain
    least-squares fit would let the largest decide alone)."""
    t = np.asarray(seconds, float)
    A = np.stack([np.ones(len(nbytes)), np.asarray(nbytes, float)]).T / t[:, None]
    (a, b), *_ = np.linalg.lstsq(A, np.ones(len(t)), rcond=None)
    return float(a), float(b)


def calibrate(paths, coll="allreduce", burst=False):
    """A dict: per rail {alpha_s, rate_Bps (delivered), nominal_Bps, cpu_cost_per_byte},
    the overall cpu_cost_per_byte (median over rails) and where it came from. burst: fit
    the times the rails would have taken without tbf's bucket (module docstring)."""
    rails, sources = {}, []
    for path in paths:
        doc = _load(path)
        lab = doc.get("lab") or {}
        n = int(lab.get("hosts") or 0)
        rates = lab.get("rates_bps") or []
        if n < 2 or not rates:
            raise ValueError(f"{path}: no lab section with hosts and rates_bps (is it "
                             "`nezha bench compare` JSON?)")
        sources.append(path)
        for name, sysdoc in (doc.get("systems") or {}).items():
            rl = sysdoc.get("rails") or []
            if sysdoc.get("backend") != "nezha" or len(rl) != 1:
                continue
            rows = (doc.get("summary") or {}).get(coll, {}).get(name) or []
            pts = [(r["nbytes"], r["avg_us"] * 1e-6) for r in rows if r["nbytes"] >= SMALL]
            if len(pts) < 2:
                continue
            idx = int(rl[0].replace("rail", "")) if rl[0].startswith("rail") else 0
            gap = 0.0
            if burst and idx < len(rates):
                small = [r["avg_us"] * 1e-6 for r in rows if 0 < r["nbytes"] <= 1024]
                gap = float(np.median(small)) if small else 0.0
                mtu = lab.get("mtu") or 9000
                pts = [(nb, t + burst_saving(nb, n, rates[idx], gap, mtu)) for nb, t in pts]
            nb, t = zip(*pts)
            a, b = fit_line(nb, t)
            nominal = rates[idx] / 8.0 if idx < len(rates) else None
            steps, wire = 2 * (n - 1), 2 * (n - 1) / n
            rate = wire / b if b > 0 else None
            cpu = max(0.0, (b - wire / nominal) / ((n - 1) / n)) if nominal else 0.0
            key = f"{rl[0]}@{rates[idx] / 1e6:g}Mbit" if nominal else rl[0]
            rails[key] = {"rail": rl[0], "hosts": n, "alpha_s": max(a / steps, 0.0),
                          "rate_Bps": rate, "nominal_Bps": nominal,
                          "cpu_cost_per_byte": cpu, "points": len(pts), "file": path,
                          "burst_gap_s": gap}
    if not rails:
        raise ValueError("no single-rail nezha allreduce rows found in "
                         + ", ".join(paths))
    cpu = float(np.median([r["cpu_cost_per_byte"] for r in rails.values()]))
    return {"rails": rails, "cpu_cost_per_byte": cpu, "collective": coll, "files": sources,
            "burst_aware": bool(burst), "rank_skew": rank_skew(sources, coll=coll)}


def call_skew(calls):
    """Per timed call of one result's rank_calls (bench/_common.rank_calls: every rank's
    call starts and times, µs, on one clock): (row, span, lag, end) in seconds. Rank i's
    clock reads e_i - s_i (its own barrier exit to its return), so the bench's row, the
    mean over ranks, is span - lag - end exactly: span = max e - min s, lag = mean of
    s_i - min s (the barrier-exit skew), end = mean of max e - e_i (bench/rankskew.py)."""
    s = np.asarray(calls["start_us"], float) * 1e-6   # ranks x calls
    d = np.asarray(calls["us"], float) * 1e-6
    e = s + d
    return (d.mean(axis=0), e.max(axis=0) - s.min(axis=0), (s - s.min(axis=0)).mean(axis=0),
            (e.max(axis=0) - e).mean(axis=0))


def skew_points(paths, systems=None, coll="allreduce", min_size=SMALL):
    """[{file, system, rep, nbytes, row_s, span_s, lag_s, end_s}]: one point per result
    with rank_calls (a size of one run; the means over its timed calls) of the compare
    documents' nezha runs (or `systems`), from min_size up."""
    out = []
    for path in paths:
        doc = _load(path)
        for run in doc.get("runs") or []:
            name = run.get("system") or ""
            if run.get("collective") != coll or not run.get("doc"):
                continue
            if systems is not None and name not in systems:
                continue
            if systems is None and not name.startswith("nezha"):
                continue
            for r in run["doc"].get("results") or []:
                if r.get("rank_calls") and r["nbytes"] >= min_size:
                    row, span, lag, end = call_skew(r["rank_calls"])
                    out.append({"file": path, "system": name, "rep": run.get("rep"),
                                "nbytes": r["nbytes"], "row_s": float(row.mean()),
                                "span_s": float(span.mean()), "lag_s": float(lag.mean()),
                                "end_s": float(end.mean())})
    return out


def rank_skew(paths, systems=None, coll="allreduce", min_size=SMALL):
    """The ranks' skew as one constant: the K (s) for which span - K best predicts the
    bench's row in relative error over every point of skew_points (least squares of
    (span - K) / row - 1: K = sum(skew / row^2) / sum(1 / row^2), skew = lag + end =
    span - row), split into its lag and end parts the same way; None without rank_calls.
    Relative error weighs the small sizes, where the skew is 10-20 % of a call; from 2 MiB
    up it is under 2 %."""
    pts = skew_points(paths, systems, coll, min_size)
    if not pts:
        return None
    w = np.array([1 / p["row_s"] ** 2 for p in pts])
    lag = float((w * [p["lag_s"] for p in pts]).sum() / w.sum())
    end = float((w * [p["end_s"] for p in pts]).sum() / w.sum())
    return {"skew_s": lag + end, "lag_s": lag, "end_s": end, "points": len(pts),
            "systems": sorted({p["system"] for p in pts}),
            "files": sorted({p["file"] for p in pts})}


def alpha_of(cal, nominal_Bps):
    """The calibrated alpha of the rail whose nominal rate is closest to nominal_Bps."""
    best = min(cal["rails"].values(), key=lambda r: abs((r["nominal_Bps"] or 0) - nominal_Bps))
    return best["alpha_s"]


def measured(path, system, coll="allreduce"):
    """[(nbytes, seconds)] of one system in a compare JSON."""
    doc = _load(path)
    rows = (doc.get("summary") or {}).get(coll, {}).get(system) or []
    return [(r["nbytes"], r["avg_us"] * 1e-6) for r in rows]


def lab_of(path):
    """The lab section (hosts, rates_bps, ...) of a compare JSON."""
    return _load(path).get("lab") or {}
