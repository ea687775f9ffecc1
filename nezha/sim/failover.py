"""A rail cut during a collective, as nezha's failover handles it (nezha/failover.py), in the
flow model: what the failover bench (bench/failover.py) measures as "extra".

The sequence the model follows, for a cut of one host's rail (both directions) at time `at`
after the collective started (negative: before it started):
1. From the cut the rail's links carry nothing. Flows on them stall; so does everything that
   waits on them (the ring of every slice on that rail). Bytes a sender had written into
   its socket's send buffer but the receiver never got are lost with the rail: in a flow
   model a transfer counts only once delivered, so a slice with such bytes is unfinished.
2. The surviving rail goes on with its own slices (they do not depend on the dead one).
3. Detection: the engine checks for silence only when nothing moves (nz_progress), so a rank
   declares the rail dead at max(cut + NEZHA_RAIL_TIMEOUT, its live work done); a socket
   error (`detect="error"`) makes that max(cut, live work done).
4. A vote (a control round; `vote` seconds, with the silence check's wake-up granularity)
   agrees on the unfinished slices: every slice with an op not complete on some rank.
5. Those slices are cut again over the live channels (planner.resplit) and re-run, whole,
   with nezha's own builders, on the surviving rail.

extra = (re-run end) - ideal, ideal = two-rail time until the cut plus the rest at the
one-rail speed (the bench's definition, from the simulated two- and one-rail times).
"""
import numpy as np

from nezha.planner import Plan
from nezha.sim import fabric as F
from nezha.sim import nezha_sched as N
from nezha.sim import network as NW

# Fixed cost after detection: the vote's control rounds plus the engine's wake-up to look
# for silence (every RAIL_TIMEOUT/4 + 1 ms). Fitted: the 1 KiB bench rows (65.2 / 65.4 ms
# extra, README "Rail failure") minus the 60 ms timeout and the 1 KiB re-run.
VOTE_S = 5.0e-3


def _planner(hosts, rates_Bps, alive=None, piece=1 << 20):
    host_of = np.arange(hosts)
    pl = N.make_planner(hosts, host_of, len(rates_Bps), rates_Bps)
    pl.piece_bytes = piece  # the communicator's with failover on: max(MIN_RAIL_PIECE, 1 MiB)
    if alive is not None:
        pl.alive = list(alive)
        pl.model.set_channels(pl.alive)
    return pl


def _sim(wl, fab, alpha, failures=(), stall_ok=False):
    return NW.simulate(wl, fab, np.arange(fab.hosts), "rail", 1, alpha, failures, tol=1e-4,
                       stall_ok=stall_ok)


def predict(hosts, rates_gbps, nbytes, cut_host, cut_rail, at, timeout=0.06, vote=VOTE_S,
            alpha=0.0, detect="silence", piece=1 << 20):
    """One cut: a dict with the simulated two-rail and one-rail times, when the cut slices
    were detected and re-run, and the extra time over the bench's ideal (seconds)."""
    R = len(rates_gbps)
    F._need(R >= 2, "rails", R, "failover needs a rail to go to")
    F._need(0 <= cut_rail < R, "cut_rail", cut_rail, f"no such rail (0..{R - 1})")
    F._need(0 <= cut_host < hosts, "cut_host", cut_host, f"no such host (0..{hosts - 1})")
    F._need(detect in ("silence", "error"), "detect", detect, "silence or error")
    rates = [g * 1e9 / 8 for g in rates_gbps]
    fab = F.MultiRail(hosts, R, list(rates_gbps), 0.0)
    alive = [c != cut_rail for c in range(R)]
    # the bench's references: two rails, and the surviving rails alone
    wl2, plan = N.workload("allreduce", nbytes, _planner(hosts, rates, piece=piece))
    t2 = _sim(wl2, fab, alpha).time
    wl1, _ = N.workload("allreduce", nbytes, _planner(hosts, rates, alive, piece))
    t1 = _sim(wl1, fab, alpha).time
    # the hit collective: the rail's links fail at the cut and are never rerouted
    cut = max(at, 0.0)
    fails = [NW.Failure(cut, fab.up[cut_rail, cut_host]),
             NW.Failure(cut, fab.down[cut_rail, cut_host])]
    r = _sim(wl2, fab, alpha, fails, stall_ok=True)
    done = ~np.isnan(r.t_end)
    live_done = float(np.nanmax(r.t_end)) if done.any() else 0.0
    unfinished = np.unique(wl2.task_slice[~done])
    detected = max(at + (timeout if detect == "silence" else 0.0), live_done)
    if len(unfinished):
        pl = _planner(hosts, rates, alive, piece)
        failed = [plan.slices[i] for i in unfinished]
        rplan = Plan(pl.resplit(failed, plan.esize), plan.algo, None, plan.esize)
        wlr, _ = N.workload("allreduce", nbytes, pl, plan=rplan)
        rerun = _sim(wlr, fab, alpha).time
        end = detected + vote + rerun
    else:  # every slice finished before the cut was noticed: nothing to re-run
        rerun, end = 0.0, max(r.time, live_done)
    before = min(cut, t2)
    ideal = before + (1 - before / t2) * t1 if t2 else t1
    return {"nbytes": nbytes, "at_ms": at * 1e3, "cut_host": cut_host, "cut_rail": cut_rail,
            "two_rail_ms": t2 * 1e3, "one_rail_ms": t1 * 1e3, "slices": len(plan.slices),
            "unfinished": len(unfinished), "live_done_ms": live_done * 1e3,
            "detected_ms": detected * 1e3, "rerun_ms": rerun * 1e3, "took_ms": end * 1e3,
            "ideal_ms": ideal * 1e3, "extra_ms": (end - ideal) * 1e3}


def spread(path):
    """Per (size, mode): the lab's one-rail collective times' quartiles (s), the noise
    any single cut's extra carries."""
    import gzip
    import json
    op = gzip.open if str(path).endswith(".gz") else open
    with op(path, "rt") as f:
        data = json.load(f)
    out = {}
    for row in data:
        one = [t1 - t0 for t0, t1, a in row["raw"]["rows"] if a != 3]
        out[(row["size"], row["mode"])] = np.percentile(one, [25, 50, 75]) if one else None
    return out


def compare(path, rates_gbps=(0.4, 0.4), hosts=4, align=True, **kw):
    """Every cut of a bench JSON predicted: rows (one per cut) and a summary per (size,
    mode). align: a cut at wall time t of a lab collective that took T2_lab is placed at
    t * T2_sim / T2_lab (the same share of the work done), since the lab runs slower than
    the flow model."""
    import statistics
    rows, summary = [], []
    sp = spread(path)
    for (size, mode), v in bench_cuts(path).items():
        meas, pred = [], []
        for at, h, rail, ex in v["cuts"]:
            p = predict(hosts, list(rates_gbps), size, h, rail, at, **kw)
            if align and at > 0:
                lab_at = at
                at = at * p["two_rail_ms"] / 1e3 / v["two_rail"]
                p = predict(hosts, list(rates_gbps), size, h, rail, at, **kw)
                p["lab_at_ms"] = lab_at * 1e3
            else:
                p["lab_at_ms"] = at * 1e3
            p.update(mode=mode, measured_ms=ex * 1e3)
            rows.append(p)
            meas.append(ex * 1e3)
            pred.append(p["extra_ms"])
        q = sp.get((size, mode))
        m, pr = statistics.median(meas), statistics.median(pred)
        summary.append({"nbytes": size, "mode": mode, "cuts": len(meas),
                        "measured_ms": m, "predicted_ms": pr,
                        "error_pct": 100 * (pr - m) / m if m else float("nan"),
                        "measured_mean_ms": statistics.mean(meas),
                        "predicted_mean_ms": statistics.mean(pred),
                        "lab_two_rail_ms": v["two_rail"] * 1e3,
                        "sim_two_rail_ms": rows[-1]["two_rail_ms"],
                        "lab_one_rail_iqr_ms": (q[2] - q[0]) * 1e3 if q is not None else 0.0})
    return rows, summary


def bench_cuts(path):
    """The cuts of a bench/failover.py JSON: per (size, mode), [(at seconds, host, rail,
    measured extra seconds)] recomputed as the bench does (analyse()), from its raw rows."""
    import gzip
    import json
    import statistics
    op = gzip.open if str(path).endswith(".gz") else open
    with op(path, "rt") as f:
        data = json.load(f)
    out = {}
    for row in data:
        rows, failures = row["raw"]["rows"], row["raw"]["failures"]
        dur = [t1 - t0 for t0, t1, _ in rows]
        med2 = statistics.median([d for (_, _, a), d in zip(rows, dur) if a == 3])
        med1 = statistics.median([d for (_, _, a), d in zip(rows, dur) if a != 3])
        cuts = []
        for k, (tf, _) in enumerate(failures):
            i = next((i for i, (t0, t1, a) in enumerate(rows) if t1 > tf and a != 3), None)
            if i is None:
                continue
            t0, t1, _ = rows[i]
            before = min(max(tf - t0, 0.0), med2)
            ideal = before + (1 - before / med2) * med1
            # the bench's rotation: host 1 + k % 3; rail 0 for small sizes, else alternating
            rail = 0 if (row["size"] < (1 << 20) or k % 2 == 0) else 1
            cuts.append((tf - t0, 1 + k % 3, rail, (t1 - t0) - ideal))
        out[(row["size"], row["mode"])] = dict(cuts=cuts, two_rail=med2, one_rail=med1)
    return out
