"""`nezha sim`: simulate collectives on a fabric, compare with the lab, calibrate.

  nezha sim run --fabric leafspine --leaves 16 --spines 16 --hosts-per-leaf 16 \\
      --ranks 256 --algo alltoall,ring --scheme ecmp,spray,ethereal --sizes 1M:256M
  nezha sim run --fabric multirail --hosts 4 --rails 2 --rate 0.4,0.1 --algo nezha
  nezha sim lab docs/results/compare-400mbit-100mbit/compare.json.gz
  nezha sim calibrate FILE... [--json out.json]
  nezha sim failover docs/results/failover-1M-64M.json.gz [--cuts]   (or --sizes/--at)
  nezha sim ina [--nodes 8,...,512] [--sizes 64K,1M,64M] [--agg-gbps G] [--window W]
  nezha sim ethereal [--sizes 1e6,...,256e6] [--plot F.png]
  nezha sim speed
Sizes are bytes per rank (allreduce payload; all-to-all: a rank's whole send buffer).
"""
import argparse
import csv
import json
import sys

import numpy as np

from nezha.planner import ALGO_NAMES
from nezha.sim import calibrate as C
from nezha.sim import fabric as F
from nezha.sim import nezha_sched as N
from nezha.sim import network as NW
from nezha.sim import textbook as TB
from nezha.sim.routing import SCHEMES

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "k": 1 << 10}


def size(text):
    """'64K' -> 65536 (binary units), '1e6' -> 1000000."""
    t = text.strip()
    if t[-1:] in UNITS and t[:-1]:
        return int(float(t[:-1]) * UNITS[t[-1]])
    return int(float(t))


def sizes(text):
    """'64K:64M' doubles from 64K to 64M; 'a,b,c' a list."""
    if ":" in text:
        lo, hi = (size(x) for x in text.split(":"))
        if lo < 1:
            # doubling from 0 or below never reaches hi
            raise ValueError(f"sizes={text!r}: a range starts at 1 byte or more")
        out = []
        while lo <= hi:
            out.append(lo)
            lo *= 2
        return out
    out = [size(x) for x in text.split(",")]
    if min(out) < 0:
        raise ValueError(f"sizes={text!r}: bytes per rank must not be negative")
    return out


def _fabric(a):
    cpu = a.cpu_cost
    if a.fabric == "multirail":
        rates = [float(x) for x in a.rate.split(",")]
        return F.MultiRail(a.hosts, a.rails, rates if len(rates) > 1 else rates[0],
                           a.latency, cpu_cost=cpu)
    if a.fabric == "leafspine":
        return F.LeafSpine(a.leaves, a.spines, a.hosts_per_leaf, float(a.rate), a.latency,
                           a.uplink, cpu_cost=cpu)
    if a.fabric == "fattree":
        return F.FatTree(a.k, a.hosts_per_edge, float(a.rate), a.latency, a.uplink,
                         cpu_cost=cpu)
    raise F.FabricError(f"fabric={a.fabric!r}: choose multirail, leafspine or fattree")


def _failures(a, fab):
    out = []
    for spec in a.fail or []:
        # LINK@TIME[:DELAY]  e.g. leaf0->spine0@1e-6:0.1
        name, _, rest = spec.partition("@")
        at, _, delay = rest.partition(":")
        link = int(name) if name.isdigit() else fab.find_link(name)
        out.append(NW.Failure(float(at or 0), link, float(delay or a.reroute_delay)))
    return out


def run(a):
    """Simulate every (algorithm, scheme, size) and return result rows."""
    fab = _fabric(a)
    ranks = fab.hosts * a.ranks_per_host if a.ranks is None else a.ranks
    host_of = fab.place(ranks, a.ranks_per_host)
    alpha = [float(x) for x in a.alpha.split(",")]
    cal = C.calibrate(a.calibration) if a.calibration else None
    if cal is not None and fab.rails:
        rates = getattr(fab, "rates", [float(a.rate.split(",")[0])] * fab.rails)
        alpha = [C.alpha_of(cal, r * 1e9 / 8) for r in rates]
    rows = []
    for algo in a.algo.split(","):
        for nbytes in sizes(a.sizes):
            if algo == "nezha":
                nchan = fab.rails * a.nconns
                rates = [r * 1e9 / 8 for r in getattr(fab, "rates", [1.0] * fab.rails)]
                over = {k: v for k, v in (("ALGO", a.nezha_algo),
                                          ("HIER_RAILS", a.hier_rails)) if v}
                pl = N.make_planner(ranks, host_of, nchan, rates, a.nconns, over or None)
                wl, plan = N.workload(a.coll, nbytes, pl)
                key, note = None, repr(plan)
            else:
                wl, key, note = TB.build(algo, ranks, nbytes), None, ""
                key = np.arange(wl.ntasks)
            for scheme in a.scheme.split(","):
                if fab.name.startswith("multirail"):
                    scheme = "rail"
                r = NW.simulate(wl, fab, host_of, scheme, a.nconns, alpha, _failures(a, fab),
                                a.tol, a.seed, flow_key=key)
                busiest = int(np.argmax(r.link_bytes))
                rows.append({"fabric": fab.describe(), "ranks": ranks, "algo": algo,
                             "coll": a.coll if algo == "nezha" else algo, "scheme": scheme,
                             "nbytes": nbytes, "time_us": r.time * 1e6,
                             "algbw_gbps": nbytes / r.time * 8e-9 if r.time else 0.0,
                             "tasks": r.tasks, "flows": r.flows, "events": r.events,
                             "wall_s": round(r.wall, 3),
                             "busiest_link": fab.link_name(busiest),
                             "busiest_bytes": float(r.link_bytes[busiest]), "plan": note,
                             "_link_bytes": r.link_bytes})
                if fab.name.startswith("multirail"):
                    break
    return fab, rows


def table(rows, cols, out=None):
    """Print rows as an aligned table (to sys.stdout as it is at the call: a default bound
    at import kept a stream pytest's capture had closed)."""
    out = out or sys.stdout
    head = [c for c, _ in cols]
    cells = [[fmt.format(r[c]) if not callable(fmt) else fmt(r[c]) for c, fmt in cols]
             for r in rows]
    w = [max(len(h), *(len(x[i]) for x in cells)) if cells else len(h)
         for i, h in enumerate(head)]
    print("  ".join(h.rjust(w[i]) for i, h in enumerate(head)), file=out)
    for x in cells:
        print("  ".join(v.rjust(w[i]) for i, v in enumerate(x)), file=out)


def write(rows, a):
    """--csv and --json outputs (per-link loads stay out of them)."""
    clean = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in clean for k in r)))
            w.writeheader()
            w.writerows(clean)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"command": "nezha sim " + " ".join(sys.argv[2:]), "rows": clean}, f,
                      indent=1)


def cmd_run(a):
    fab, rows = run(a)
    print(f"# {fab.describe()}; {rows[0]['ranks']} ranks" if rows else "# no rows")
    table(rows, [("algo", "{}"), ("scheme", "{}"), ("nbytes", "{}"), ("time_us", "{:.1f}"),
                 ("algbw_gbps", "{:.3f}"), ("flows", "{}"), ("events", "{}"),
                 ("wall_s", "{:.2f}"), ("busiest_link", "{}")])
    write(rows, a)
    if a.plot:
        from nezha.sim import plots
        print(plots.run_plots(fab, rows, a.plot))
    return 0


def cmd_lab(a):
    """Predict a lab compare JSON's nezha runs and print measured vs predicted: at the
    converged split, and (--replay) by replaying the bench's calls with the planner
    learning, without and with the lab's token buckets."""
    from nezha.sim import benchloop as BL
    doc = C._load(a.file)
    lab = doc.get("lab") or {}
    n, rates_bps = int(lab["hosts"]), lab["rates_bps"]
    cal = C.calibrate(a.calibration or [a.file], burst=a.burst_aware)
    cpu = cal["cpu_cost_per_byte"] if a.cpu else 0.0
    rows = []
    for system, rails in (("nezha-all", list(range(len(rates_bps)))), ("nezha-rail0", [0]),
                          ("nezha-rail1", [1])):
        meas = [(nb, t) for nb, t in C.measured(a.file, system) if nb >= size(a.min_size)]
        if not meas:
            continue
        rates = [rates_bps[i] / 1e9 for i in rails]
        fab = F.MultiRail(n, len(rails), rates, 0.0, cpu_cost=cpu)
        host_of = fab.place(n)
        alpha = [C.alpha_of(cal, r * 1e9 / 8) for r in rates]
        pl = BL.planner_then(N.make_planner(n, host_of, len(rails), [r * 1e9 / 8 for r in rates],
                                            1, BL.lab_overrides(doc)), doc)  # what the lab ran
        alpha_r = [C.alpha_of(cal, rates_bps[i] / 8) for i in rails]
        sync_s = BL.SYNC_S if a.sync_ms is None else a.sync_ms * 1e-3
        rep = BL.replays(doc, system, rails, alpha_r, size(a.min_size), probe=a.probe_seed,
                         refill=a.refill, sync_s=sync_s) if a.replay else None
        for nb, t in meas:
            wl, plan = N.workload("allreduce", nb, pl)
            r = NW.simulate(wl, fab, host_of, "rail", 1, alpha, tol=1e-4)
            row = {"system": system, "nbytes": nb, "measured_us": t * 1e6,
                   "predicted_us": r.time * 1e6,
                   "error_pct": 100 * (r.time - t) / t, "plan": repr(plan)}
            if rep:
                _replay_cols(row, doc, system, nb, t, rep, _skew_s(a))
            rows.append(row)
    rows += _lab_ina(a, doc, cal)
    print(f"# {a.file}: {n} hosts, rails {', '.join(f'{x / 1e6:g} Mbit/s' for x in rates_bps)}; "
          f"cpu cost {cpu:.3g} s/B")
    cols = [("system", "{}"), ("nbytes", "{}"), ("measured_us", "{:.1f}"),
            ("predicted_us", "{:.1f}"), ("error_pct", "{:+.1f}")]
    if a.replay:
        cols += [("replay_us", "{:.1f}"), ("replay_pct", "{:+.1f}"),
                 ("replay_tbf_us", "{:.1f}"), ("replay_tbf_pct", "{:+.1f}"),
                 ("slowest_us", "{:.1f}"), ("replay_vs_slowest_pct", "{:+.1f}"),
                 ("replay_tbf_vs_slowest_pct", "{:+.1f}")]
        if any(np.isfinite(r.get("span_us", np.nan)) for r in rows):
            cols += [("span_us", "{:.1f}"), ("replay_tbf_vs_span_pct", "{:+.1f}")]
        cols += [("row_us", "{:.1f}"), ("row_pct", "{:+.1f}")]
    table(rows, cols)
    if a.replay:
        print(f"# replay_tbf: the span (every rank starts at once); row: replay_tbf less the "
              f"ranks' skew, {_skew_s(a) * 1e6:.0f} us (--rank-skew-us), against the "
              f"bench's row")
    write(rows, a)
    return 0


def _lab_ina(a, doc, cal, system="nezha-ina"):
    """`nezha sim lab` rows of a compare document's nezha-ina runs (TCP rails plus the INA
    rail, nezha/sim/ina_sched.py): the converged split and the replay of every run."""
    from nezha.sim import benchloop as BL
    from nezha.sim import ina_sched as I
    meas = [(nb, t) for nb, t in C.measured(a.file, system) if nb >= size(a.min_size)]
    runs = [r for r in doc.get("runs") or [] if r.get("system") == system
            and r.get("collective") == "allreduce" and r.get("doc")]
    if not meas or not runs:
        return []
    rates_bps = doc["lab"]["rates_bps"]
    tcp = I.lab_rails(runs[0])
    alpha = [C.alpha_of(cal, rates_bps[i] / 8) if cal["rails"] else 0.0 for i in tcp]
    gap = BL.small_latency((doc.get("summary") or {}).get("allreduce", {}).get(system) or [])
    fab, pl, off, prm, _ = I.rail_of(doc, runs[0])
    from nezha.sim.bucket import LAB_PEAK_BPS
    rail = I.Rail(pl, off, prm, fab, alpha, gap, rtt_rate=LAB_PEAK_BPS / 8)
    rep = I.replays(doc, alpha, size(a.min_size), refill=a.refill) if a.replay else None
    rows = []
    for nb, t in meas:
        got = rail.converged(nb)
        p = float(got["t_rank"].mean())
        row = {"system": system, "nbytes": nb, "measured_us": t * 1e6, "predicted_us": p * 1e6,
               "error_pct": 100 * (p - t) / t,
               "plan": f"{got['route']} k={got['k']} ({prm.describe()})"}
        if rep:
            _replay_cols(row, doc, system, nb, t, rep, _skew_s(a))
        rows.append(row)
    return rows


def _skew_s(a):
    """The ranks' skew (s) that `nezha sim lab` takes off the predicted span."""
    from nezha.sim import benchloop as BL
    us = getattr(a, "rank_skew_us", None)
    return BL.RANK_SKEW_S if us is None else us * 1e-6


def _replay_cols(row, doc, system, nb, t, rep, skew_s):
    """The replay columns of a `nezha sim lab` row: each variant's prediction (the median
    over the runs, as the bench's row is) against the row, the slowest rank and the span;
    row_us: the tbf replay's span less the ranks' skew (benchloop.row_of_span), the
    prediction of the bench's row."""
    from nezha.sim import benchloop as BL
    # the slowest rank's mean: the model starts every rank at once, so its time is the
    # collective's span; the bench's row averages ranks whose clocks start at their own
    # barrier exits
    slow = BL.slowest(doc, system, nb)
    row["slowest_us"] = slow * 1e6
    sp = BL.span(doc, system, nb)  # runs with every rank's call times
    row["span_us"] = sp * 1e6
    for tbf, name in ((False, "replay"), (True, "replay_tbf")):
        v = float(np.median([x[nb] for x in rep[tbf] if nb in x])) \
            if any(nb in x for x in rep[tbf]) else float("nan")
        row[f"{name}_us"] = v * 1e6
        row[f"{name}_pct"] = 100 * (v - t) / t
        row[f"{name}_vs_slowest_pct"] = 100 * (v - slow) / slow
        row[f"{name}_vs_span_pct"] = 100 * (v - sp) / sp
    row["row_us"] = BL.row_of_span(row["replay_tbf_us"] * 1e-6, skew_s) * 1e6
    row["row_pct"] = 100 * (row["row_us"] * 1e-6 - t) / t


def cmd_failover(a):
    """A rail cut during an allreduce: measured (bench/failover.py JSON) vs predicted."""
    from nezha.sim import failover as FO
    from nezha.sim import failstats as FS
    rates = [float(x) for x in a.rate.split(",")]
    kw = dict(timeout=a.timeout, vote=a.vote, detect=a.detect, heartbeat=a.heartbeat,
              phase_q=a.phase_q, phase_silence=a.phase_silence, resend=a.resend)
    if a.ranks_per_host != 1:
        kw["rph"] = a.ranks_per_host
    if a.file and a.same_call:
        rows, summ = FO.same_call(a.file, rates, a.hosts, **kw)
        print(f"# {a.file}: each striped cut against its own call (failstats.same_call): "
              "ms from the data start; sim at the same share of the call's two-rail time, "
              "scaled to it")
        if a.cuts:
            table(rows, [("nbytes", "{}"), ("mode", "{}"), ("cut", "{}"), ("rail", "{}"),
                         ("share", "{:.3f}"), ("c_ms", "{:.1f}"), ("lab_T2_ms", "{:.1f}"),
                         ("sim_T2_ms", "{:.1f}"), ("lab_took_ms", "{:.1f}"),
                         ("sim_took_ms", "{:.1f}"), ("lab_extra_ms", "{:.1f}"),
                         ("sim_extra_ms", "{:.1f}"), ("lab_extra_2x_ms", "{:.1f}"),
                         ("sim_extra_2x_ms", "{:.1f}"), ("symmetric", "{}"),
                         ("even", "{}"), ("rail_ops", "{}"),
                         ("lab_dead_bytes_progress", "{:.3f}"), ("sim_share_bytes", "{:.3f}"),
                         ("sim_extra_bytes_ms", "{:.1f}"), ("sim_lost_bytes", "{}"),
                         ("lab_live_progress", "{:.3f}"), ("lab_dead_progress", "{:.3f}"),
                         ("sim_extra_prog_ms", "{:.1f}"), ("sim_lost_prog", "{}"),
                         ("lab_lost", "{}"), ("sim_lost", "{}"),
                         ("lab_first_down_ms", "{:.1f}"), ("sim_detected_ms", "{:.1f}"),
                         ("fail_ms", "{:.1f}")])
            print()
        table(summ, [("nbytes", "{}"), ("mode", "{}"), ("cuts", "{}"),
                     ("lab_mean_ms", "{:.1f}"), ("lab_ci95_ms", "{:.1f}"),
                     ("sim_mean_ms", "{:.1f}"), ("diff_ms", "{:+.1f}"),
                     ("diff_ci95_ms", "{:.1f}"), ("error_pct", "{:+.1f}"), ("verdict", "{}"),
                     ("cuts_paired_10pct", "{}"), ("lost_equal", "{}"),
                     ("took_error_pct", "{:+.2f}"), ("took_verdict", "{}"), ("r21", "{:.4f}"),
                     ("sim_r21", "{:.4f}"), ("symmetric", "{}"), ("even", "{}"),
                     ("plan_unmatched", "{}")])
        print("\n# the same with T1 = 2 T2 on both sides (the surviving rail's own pace for "
              "all the work left; no reference from other calls)")
        table(summ, [("nbytes", "{}"), ("mode", "{}"), ("cuts", "{}"),
                     ("lab_2x_mean_ms", "{:.1f}"), ("sim_2x_mean_ms", "{:.1f}"),
                     ("diff_2x_ms", "{:+.1f}"), ("diff_2x_ci95_ms", "{:.1f}"),
                     ("error_2x_pct", "{:+.1f}"), ("verdict_2x", "{}")])
        print("\n# T1 = 2 T2, the cuts whose hit call had an even split (by its bytes per rail "
              "where the file has them, else its ops; the model replays every hit call's own "
              "plan, rail_ops / rail_bytes; these are the ones it had before)")
        table(summ, [("nbytes", "{}"), ("mode", "{}"), ("sym_cuts", "{}"),
                     ("lab_2x_sym_mean_ms", "{:.1f}"), ("lab_2x_sym_ci95_ms", "{:.1f}"),
                     ("sim_2x_sym_mean_ms", "{:.1f}"), ("diff_2x_sym_ms", "{:+.1f}"),
                     ("diff_2x_sym_ci95_ms", "{:.1f}"), ("error_2x_sym_pct", "{:+.1f}"),
                     ("verdict_2x_sym", "{}"), ("cuts_2x_sym_10pct", "{}"),
                     ("lost_equal_sym", "{}")])
        print("\n# the model's cut placed at the surviving rail's progress at the cut (its "
              "ops done, from the hit call's op times) instead of the time share")
        table(summ, [("nbytes", "{}"), ("mode", "{}"), ("prog_cuts", "{}"),
                     ("lab_mean_ms", "{:.1f}"), ("sim_prog_mean_ms", "{:.1f}"),
                     ("diff_prog_ms", "{:+.1f}"), ("diff_prog_ci95_ms", "{:.1f}"),
                     ("error_prog_pct", "{:+.1f}"), ("verdict_prog", "{}"),
                     ("lost_equal_prog", "{}")])
        print("\n# T1 = 2 T2, the model's cut placed where its cut rail has moved the bytes the "
              "lab's had at the cut (rail_bytes_at_cut; files since session 31)")
        table(summ, [("nbytes", "{}"), ("mode", "{}"), ("bytes_cuts", "{}"),
                     ("diff_bytes_ms", "{:+.1f}"), ("diff_bytes_ci95_ms", "{:.1f}"),
                     ("error_bytes_pct", "{:+.1f}"), ("verdict_bytes", "{}"),
                     ("lost_equal_bytes", "{}")])
        write(rows + summ, a) if (a.csv or a.json) else None
        return 0
    if a.file and a.phases:
        rows = FO.phases(a.file, rates, a.hosts, stamp_delay=a.stamp_delay,
                         align=a.align,
                         snapshot_bps=a.snapshot_rate and a.snapshot_rate * 1e9, **kw)
        print(f"# {a.file}: each cut's phases, lab (rank 0's events; lab_first_down_ms: the "
              "first rank's, in files that keep every rank's) vs model; ms from the hit "
              "collective's start")
        table(rows, [("nbytes", "{}"), ("mode", "{}"), ("at_ms", "{:.1f}"), ("why", "{:.12}"),
                     ("lab_down_ms", "{:.1f}"), ("lab_first_down_ms", "{:.1f}"),
                     ("sim_down_ms", "{:.1f}"),
                     ("lab_rerun_ms", "{:.1f}"), ("sim_rerun_ms", "{:.1f}"),
                     ("unfinished", "{}"), ("lab_slices", "{}"), ("lab_slices_est", "{}")])
        print("\n# per size and mode: each phase, lab vs model over the same cuts (failstats."
              "verdict: the 95 % interval of the mean difference against 10 % of the model's)")
        summ = []
        for key in dict.fromkeys((r["nbytes"], r["mode"]) for r in rows):
            sel = [r for r in rows if (r["nbytes"], r["mode"]) == key]
            for ph in ("down", "rerun"):
                v = FS.verdict([r[f"lab_{ph}_ms"] for r in sel], [r[f"sim_{ph}_ms"] for r in sel])
                summ.append({"nbytes": key[0], "mode": key[1], "phase": ph, "cuts": len(sel),
                             "lab_mean_ms": sum(r[f"lab_{ph}_ms"] for r in sel) / len(sel),
                             "sim_mean_ms": sum(r[f"sim_{ph}_ms"] for r in sel) / len(sel),
                             "diff_ms": v["mean"], "diff_ci95_ms": v["ci95"],
                             "error_pct": v["error_pct"], "verdict": v["verdict"]})
        for key in dict.fromkeys((r["nbytes"], r["mode"]) for r in rows):
            for col, how in (("lab_slices", ""), ("lab_slices_est", " (from re-run time)")):
                sel = [r for r in rows if (r["nbytes"], r["mode"]) == key
                       and r.get(col) is not None]
                if not sel:
                    continue
                # lost work, counted: the check the 64 MiB extra's noise cannot hide
                same = sum(r[col] == r["unfinished"] for r in sel)
                off = sum(r[col] - r["unfinished"] for r in sel) / len(sel)
                print(f"# {key[0]} {key[1]}: lost slices{how} lab = model in {same} of "
                      f"{len(sel)} cuts, lab - model {off:+.2f} on average")
                if col == "lab_slices":
                    break
        table(summ, [("nbytes", "{}"), ("mode", "{}"), ("phase", "{}"), ("cuts", "{}"),
                     ("lab_mean_ms", "{:.1f}"), ("sim_mean_ms", "{:.1f}"), ("diff_ms", "{:+.1f}"),
                     ("diff_ci95_ms", "{:.1f}"), ("error_pct", "{:+.1f}"), ("verdict", "{}")])
        write(rows + summ, a) if (a.csv or a.json) else None
        return 0
    if a.file:
        align = None if a.no_align else a.align
        rows, summ = FO.compare(a.file, rates, a.hosts, align=align,
                                stamp_delay=a.stamp_delay, near=a.near,
                                snapshot_bps=a.snapshot_rate and a.snapshot_rate * 1e9, **kw)
        print(f"# {a.file}: {a.hosts} hosts, rails {a.rate} Gb/s; timeout {a.timeout * 1e3:g} ms, "
              f"vote {a.vote * 1e3:g} ms, cut times {align or 'raw'}")
        if a.cuts:
            table(rows, [("nbytes", "{}"), ("mode", "{}"), ("lab_at_ms", "{:.1f}"),
                         ("at_ms", "{:.1f}"), ("cut_host", "{}"), ("cut_rail", "{}"),
                         ("unfinished", "{}"), ("measured_ms", "{:.1f}"),
                         ("extra_ms", "{:.1f}"), ("measured_took_ms", "{:.1f}"),
                         ("took_ms", "{:.1f}")])
            print()
        table(summ, [("nbytes", "{}"), ("mode", "{}"), ("cuts", "{}"),
                     ("measured_ms", "{:.1f}"), ("predicted_ms", "{:.1f}"),
                     ("error_pct", "{:+.1f}"), ("measured_mean_ms", "{:.1f}"),
                     ("predicted_mean_ms", "{:.1f}"), ("lab_two_rail_ms", "{:.1f}"),
                     ("sim_two_rail_ms", "{:.1f}"), ("start_ms", "{:.1f}"),
                     ("end_ms", "{:.1f}"), ("lab_one_rail_iqr_ms", "{:.1f}")])
        print("\n# the means over the same cuts: the lab's mean extra with its 95 % interval, "
              "the mean of lab - model with its interval, and whether that interval lies "
              "within 10 % of the model's mean (failstats.verdict)")
        table(summ, [("nbytes", "{}"), ("mode", "{}"), ("cuts", "{}"),
                     ("measured_mean_ms", "{:.1f}"), ("measured_ci95_ms", "{:.1f}"),
                     ("predicted_mean_ms", "{:.1f}"), ("mean_error_pct", "{:+.1f}"),
                     ("diff_ms", "{:+.1f}"), ("diff_ci95_ms", "{:.1f}"), ("verdict", "{}"),
                     ("lab_noise_ms", "{:.1f}"), ("cuts_for_10pct", "{}"),
                     ("cuts_paired_10pct", "{}")])
        print("\n# the hit collective's own time (rank 0's clock), lab vs model, paired; and the "
              "model's extra against its own references instead of the bench's medians")
        table(summ, [("nbytes", "{}"), ("mode", "{}"), ("cuts", "{}"),
                     ("took_lab_mean_ms", "{:.1f}"), ("took_sim_mean_ms", "{:.1f}"),
                     ("took_diff_ms", "{:+.1f}"), ("took_diff_ci95_ms", "{:.1f}"),
                     ("took_error_pct", "{:+.2f}"), ("took_verdict", "{}"),
                     ("predicted_sim_ideal_mean_ms", "{:.1f}")])
        write(summ + rows, a) if (a.csv or a.json) else None
        return 0
    rows = []
    for nb in sizes(a.sizes):
        for frac in (float(x) for x in a.at.split(",")):
            t2 = FO.predict(a.hosts, rates, nb, 1, 0, 0.0, **kw)["two_rail_ms"] / 1e3
            rows.append(FO.predict(a.hosts, rates, nb, a.cut_host, a.cut_rail, frac * t2, **kw))
    table(rows, [("nbytes", "{}"), ("at_ms", "{:.2f}"), ("two_rail_ms", "{:.2f}"),
                 ("one_rail_ms", "{:.2f}"), ("unfinished", "{}"), ("detected_ms", "{:.2f}"),
                 ("rerun_ms", "{:.2f}"), ("took_ms", "{:.2f}"), ("ideal_ms", "{:.2f}"),
                 ("extra_ms", "{:.2f}")])
    write(rows, a) if (a.csv or a.json) else None
    return 0


def cmd_ina(a):
    """In-network aggregation vs ring allreduce on one switch, by node count and size: the
    textbook ring and nezha's own TCP allreduce on one rail, nezha's INA client with the
    whole buffer (its chunk and window, nezha/sim/ina_sched.py), and nezha's split of one
    allreduce over a TCP rail and an INA rail; the textbook fluid INA for reference."""
    from nezha._core import ina as _ina
    from nezha.sim import ina_sched as I
    rate = float(a.rate)
    B = rate * 1e9 / 8
    prm = I.InaParams(a.mtu, a.chunk, a.window, frames=False)
    rows = []
    for n in (int(x) for x in a.nodes.split(",")):
        if n < 2:
            raise F.FabricError(f"nodes={n}: INA vs ring needs at least 2 nodes")
        # rail0 TCP, rail1 INA (its switch holds the aggregator)
        fab = F.MultiRail(n, 2, rate, a.latency, aggregator_gbps=a.agg_gbps)
        host_of = np.r_[fab.place(n), fab.agg_host]
        pl = N.make_planner(n, host_of[:n], 1, None, 1)
        rail = I.Rail(pl, I.offload(pl), prm, fab, [a.alpha], latency=a.latency,
                      copy_rate=a.copy_gbps * 1e9 / 8 if a.copy_gbps else float("inf"))
        prm = rail.prm  # its window from the INA link's rate x round trip (or --window)
        cap = prm.window * (prm.chunk_bytes + prm.overhead) / rail.rtt_s
        for nb in sizes(a.sizes):
            rr = NW.simulate(TB.ring(n, nb), fab, host_of[:n], "rail", 1, a.alpha, tol=a.tol)
            wt, plan = N.workload("allreduce", nb, pl)
            rt = NW.simulate(wt, fab, host_of[:n], "rail", 1, a.alpha, tol=a.tol)
            wi = I.ina_part(n, max(nb // 4, 1), 4, prm, 1, rail.rtt_s)
            ri = NW.simulate(wi, fab, host_of, "rail", 1, rail.alpha, tol=a.tol)
            rf = NW.simulate(TB.ina(n, nb), fab, host_of, "rail", 1, a.alpha, tol=a.tol)
            sp = rail.converged(nb, calls=3)
            ts = float(sp["t_rank"].max())
            rows.append({"nodes": n, "nbytes": nb, "ring_us": rr.time * 1e6,
                         "nezha_tcp_us": rt.time * 1e6,
                         "nezha_tcp_algo": ALGO_NAMES.get(plan.algo, plan.algo),
                         "ina_us": ri.time * 1e6, "ina_fluid_us": rf.time * 1e6,
                         "split_us": ts * 1e6, "split_route": sp["route"],
                         "split_ina_share": 1 - sp["k"] / max(nb // 4, 1),
                         "ring_over_ina": rr.time / ri.time,
                         "tcp_over_split": rt.time / ts,
                         "window_cap_gbps": cap * 8e-9,
                         "window_bound": bool(cap < B),
                         "over_service_limit": bool(n > _ina.MAX_RANKS),
                         "ring_latency_share": 2 * (n - 1) * (a.alpha + a.latency) / rr.time,
                         "ring_bw_term_us": 2 * (n - 1) / n * nb / B * 1e6,
                         "ring_flows": rr.flows,
                         "wall_s": round(rr.wall + rt.wall + ri.wall + rf.wall, 3)})
    agg = "line rate on every port" if a.agg_gbps == float("inf") else f"{a.agg_gbps:g} Gb/s"
    print(f"# one switch, {a.rate} Gb/s links, {a.latency * 1e6:g} us per path, alpha "
          f"{a.alpha * 1e6:g} us per TCP transfer, {I.ina_alpha(a.alpha) * 1e6:g} us per INA hop; "
          f"aggregator: {agg}; nezha's INA client: {prm.describe()}, round trip "
          f"{rail.rtt_s * 1e6:.1f} us, so at most {cap * 8e-9:.1f} Gb/s per rank; the service "
          f"takes at most {_ina.MAX_RANKS} ranks per job (over_service_limit)")
    table(rows, [("nodes", "{}"), ("nbytes", "{}"), ("ring_us", "{:.1f}"),
                 ("nezha_tcp_us", "{:.1f}"), ("nezha_tcp_algo", "{}"), ("ina_us", "{:.1f}"),
                 ("ina_fluid_us", "{:.1f}"), ("split_us", "{:.1f}"),
                 ("split_ina_share", "{:.2f}"), ("ring_over_ina", "{:.2f}"),
                 ("tcp_over_split", "{:.2f}"), ("ring_latency_share", "{:.0%}"),
                 ("wall_s", "{:.2f}")])
    write(rows, a) if (a.csv or a.json) else None
    return 0


def cmd_calibrate(a):
    cal = C.calibrate(a.files, burst=a.burst_aware)
    rows = [{"rail": k, "alpha_us": v["alpha_s"] * 1e6, "rate_mbit": v["rate_Bps"] * 8e-6,
             "nominal_mbit": (v["nominal_Bps"] or 0) * 8e-6,
             "cpu_ns_per_byte": v["cpu_cost_per_byte"] * 1e9, "points": v["points"]}
            for k, v in cal["rails"].items()]
    table(rows, [("rail", "{}"), ("alpha_us", "{:.2f}"), ("rate_mbit", "{:.1f}"),
                 ("nominal_mbit", "{:.1f}"), ("cpu_ns_per_byte", "{:.3f}"), ("points", "{}")])
    print(f"# cpu cost per byte (median): {cal['cpu_cost_per_byte'] * 1e9:.3f} ns")
    sk = cal.get("rank_skew")
    if sk:
        print(f"# rank skew (the bench's row = span - skew; benchloop.RANK_SKEW_S): "
              f"{sk['skew_s'] * 1e6:.1f} us = lag {sk['lag_s'] * 1e6:.1f} + end "
              f"{sk['end_s'] * 1e6:.1f}, {sk['points']} points of {', '.join(sk['systems'])}")
    else:
        print("# rank skew: no run with every rank's call times (rank_calls)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(cal, f, indent=1)
    return 0


def parser():
    """The argparse parser of `nezha sim`."""
    p = argparse.ArgumentParser(prog="nezha sim", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd")
    r = sub.add_parser("run", help="simulate collectives on a fabric")
    r.add_argument("--fabric", default="multirail", help="multirail, leafspine, fattree")
    r.add_argument("--hosts", type=int, default=4, help="multirail: hosts")
    r.add_argument("--rails", type=int, default=2, help="multirail: rail planes")
    r.add_argument("--leaves", type=int, default=16)
    r.add_argument("--spines", type=int, default=16)
    r.add_argument("--hosts-per-leaf", type=int, default=16)
    r.add_argument("-k", type=int, default=8, help="fat-tree: k")
    r.add_argument("--hosts-per-edge", type=int, default=None)
    r.add_argument("--rate", default="400", help="Gb/s (multirail: one per rail, a,b)")
    r.add_argument("--uplink", type=float, default=None, help="Gb/s of switch links")
    r.add_argument("--latency", type=float, default=0.5e-6, help="s per link")
    r.add_argument("--alpha", default="0", help="software s per transfer (per rail a,b)")
    r.add_argument("--cpu-cost", type=float, default=0.0, help="s per reduced byte")
    r.add_argument("--calibration", nargs="*", help="compare JSON files for alpha per rail")
    r.add_argument("--ranks", type=int, default=None, help="default: every host")
    r.add_argument("--ranks-per-host", type=int, default=1)
    r.add_argument("--nconns", type=int, default=1, help="channels per rail")
    r.add_argument("--algo", default="nezha",
                   help="nezha (its planner and builders) or " + ", ".join(TB.ALGOS))
    r.add_argument("--coll", default="allreduce", help="nezha: " + ", ".join(N.COLLS))
    r.add_argument("--nezha-algo", default=None, help="NEZHA_ALGO for the planner")
    r.add_argument("--hier-rails", default=None, choices=("auto", "aligned", "striped"),
                   help="NEZHA_HIER_RAILS for the planner")
    r.add_argument("--scheme", default="ecmp", help=", ".join(SCHEMES))
    r.add_argument("--sizes", default="1M", help="bytes per rank: 64K:64M or a,b,c")
    r.add_argument("--fail", action="append",
                   help="LINK@TIME[:DELAY], LINK a name (leaf0->spine0) or id")
    r.add_argument("--reroute-delay", type=float, default=100e-3)
    r.add_argument("--tol", type=float, default=1e-2, help="event coalescing tolerance")
    r.add_argument("--seed", type=int, default=0)
    for q in (r,):
        q.add_argument("--csv")
        q.add_argument("--json")
        q.add_argument("--plot", help="directory for PNG plots (needs matplotlib)")
    lb = sub.add_parser("lab", help="predict a lab compare JSON's nezha allreduce runs")
    lb.add_argument("file")
    lb.add_argument("--calibration", nargs="*")
    lb.add_argument("--burst-aware", action="store_true",
                    help="alpha from the burst-aware calibration (calibrate --burst-aware)")
    lb.add_argument("--cpu", action="store_true", help="include the calibrated CPU cost")
    lb.add_argument("--min-size", default="64K")
    lb.add_argument("--replay", action="store_true", default=True,
                    help="replay every run's calls with the planner learning, without and "
                         "with the lab's token buckets (sim/benchloop.py; the default)")
    lb.add_argument("--no-replay", dest="replay", action="store_false",
                    help="only the converged split (no replay)")
    lb.add_argument("--no-probe-seed", dest="probe_seed", action="store_false",
                    help="replay: ignore the run's start-up rate probe (start from equal)")
    lb.add_argument("--no-refill", dest="refill", action="store_false",
                    help="replay: buckets refill only in the barrier gaps, not between sizes")
    lb.add_argument("--sync-ms", type=float, default=None,
                    help="replay: what a cost-model sync adds to its call (default: "
                         "benchloop.SYNC_S, measured by bench/sync_cost.py; 0: the model "
                         "before session 21)")
    lb.add_argument("--rank-skew-us", type=float, default=None,
                    help="replay: the ranks' mean start lag plus mean end lag taken off the "
                         "span to predict the bench's row (default: benchloop.RANK_SKEW_S; "
                         "`nezha sim calibrate` fits it from runs with rank_calls)")
    lb.add_argument("--csv")
    lb.add_argument("--json")
    fo = sub.add_parser("failover", help="a rail cut during an allreduce: the failover's "
                        "extra time (vs a bench/failover.py JSON)")
    fo.add_argument("file", nargs="?", help="bench/failover.py JSON (per-cut comparison)")
    fo.add_argument("--hosts", type=int, default=4)
    fo.add_argument("--rate", default="0.4,0.4", help="Gb/s per rail")
    fo.add_argument("--sizes", default="1K,1M,64M")
    fo.add_argument("--at", default="0,0.25,0.5,0.75",
                    help="without FILE: cut times as shares of the two-rail time")
    fo.add_argument("--cut-host", type=int, default=1)
    fo.add_argument("--cut-rail", type=int, default=0)
    fo.add_argument("--timeout", type=float, default=0.06, help="NEZHA_RAIL_TIMEOUT (s)")
    fo.add_argument("--vote", type=float, default=5e-3,
                    help="s from detection to the re-run (vote, wake-up)")
    fo.add_argument("--detect", default="silence", help="silence or error (a socket error)")
    fo.add_argument("--heartbeat", type=float, default=0.01,
                    help="NEZHA_HEARTBEAT (s): lazy collectives wait for a heartbeat's phase")
    fo.add_argument("--phase-q", type=float, default=None,
                    help="lazy collectives: this quantile of the heartbeat-phase wait "
                         "instead of its mean (0.1 and 0.9 give the model's band)")
    fo.add_argument("--no-phase-silence", dest="phase_silence", action="store_false",
                    help="striped collectives: detection at cut + timeout alone (the model "
                         "before the heartbeat phase and the spin were added)")
    fo.add_argument("--no-resend", dest="resend", action="store_false",
                    help="no vote resend for a cut of rail 0 (runs before the one-copy vote, "
                         "07ae496: 2026-11-24's session 14 on)")
    fo.add_argument("--near", type=int, default=0,
                    help="the bench's ideal from the K collectives around each cut instead "
                         "of the run's medians")
    fo.add_argument("--no-align", action="store_true",
                    help="use the lab's cut times as they are (no scaling to the sim's speed)")
    fo.add_argument("--align", default="snapshot", choices=("snapshot", "start", "share"),
                    help="place the lab's cuts after the failover layer's input snapshot, "
                         "at --snapshot-rate (snapshot, the default: nothing read from the "
                         "run), after the start cost the run's medians show (start), or by "
                         "share of the two-rail work (share, the model before 2026-11-24)")
    fo.add_argument("--snapshot-rate", type=float, default=None,
                    help="GB/s a rank copies its in-place input at before a voting "
                         "collective runs (default: 1.76 with 4 ranks on this 2-core VM, "
                         "memcpy_limit.txt; the same aggregate shared by more ranks)")
    fo.add_argument("--ranks-per-host", type=int, default=1,
                    help="ranks per host of the bench run (striped sizes; the lazy model "
                         "has one rank per host, so small sizes are left out above 1)")
    fo.add_argument("--cuts", action="store_true", help="print every cut")
    fo.add_argument("--stamp-delay", type=float, default=0.0,
                    help="s from a cut's stamp to the cut, for files stamped before lab.fail "
                         "(no fail_called); newer files stamp it after")
    fo.add_argument("--same-call", action="store_true",
                    help="striped cuts against their own call (files with the engine's "
                    "traces, bench/failover.py since session 30): the extra at the hit "
                    "call's own pace from its data start, lab vs model, paired; the model "
                    "runs each hit call's own plan, read from its ops per rail)")
    fo.add_argument("--phases", action="store_true",
                    help="every cut's detection and re-run, lab (its events) vs model")
    fo.add_argument("--csv")
    fo.add_argument("--json")
    ia = sub.add_parser("ina", help="in-network aggregation vs ring allreduce, 8..512 nodes")
    ia.add_argument("--nodes", default="8,16,32,64,128,256,512")
    ia.add_argument("--sizes", default="64K,1M,64M")
    ia.add_argument("--rate", default="100", help="Gb/s of every link")
    ia.add_argument("--latency", type=float, default=1e-6, help="s per host-switch-host path")
    ia.add_argument("--alpha", type=float, default=5e-6, help="software s per transfer")
    ia.add_argument("--agg-gbps", type=float, default=float("inf"),
                    help="the aggregator's input rate over all ports (default: line rate)")
    ia.add_argument("--mtu", type=int, default=9000,
                    help="route MTU: the INA client's datagram (NEZHA_INA_CHUNK=0) follows it")
    ia.add_argument("--chunk", type=int, default=0, help="NEZHA_INA_CHUNK (0: from --mtu)")
    ia.add_argument("--window", type=int, default=0,
                    help="NEZHA_INA_WINDOW, slots in flight per rank (0: the client's default)")
    ia.add_argument("--copy-gbps", type=float, default=0.0,
                    help="split: the copy of the INA share before it runs, Gb/s per rank "
                         "(0: free; the lab's VM copies at 14)")
    ia.add_argument("--tol", type=float, default=1e-3)
    ia.add_argument("--csv")
    ia.add_argument("--json")
    et = sub.add_parser("ethereal", help="Ethereal vs ECMP vs spraying on the 16x16 "
                        "leaf-spine, with and without a failed link")
    from nezha.sim import sweep
    sweep.add_args(et)
    sp = sub.add_parser("speed", help="wall time against hosts and flows")
    sp.add_argument("--cases", default="ring,alltoall")
    sp.add_argument("--csv")
    sp.add_argument("--json")
    c = sub.add_parser("calibrate", help="alpha/rate per rail, CPU cost per byte")
    c.add_argument("files", nargs="+")
    c.add_argument("--json")
    c.add_argument("--burst-aware", action="store_true",
                   help="fit what the rails take without tbf's bucket: the tokens earned in "
                        "the barrier between calls (the system's <= 1 KiB latency) added "
                        "back to every point (calibrate.burst_saving)")
    t = sub.add_parser("train", help="training step: nezha on R rails vs Gloo on one")
    from nezha.sim import training
    training.add_args(t)
    return p


def main(argv=None):
    """Entry point of `nezha sim`."""
    p = parser()
    a = p.parse_args(argv)
    if a.cmd is None:
        p.print_help()
        return 2
    try:
        if a.cmd == "run":
            return cmd_run(a)
        if a.cmd == "lab":
            return cmd_lab(a)
        if a.cmd == "calibrate":
            return cmd_calibrate(a)
        if a.cmd == "ethereal":
            from nezha.sim import sweep
            return sweep.main(a, table, write)
        if a.cmd == "speed":
            from nezha.sim import sweep
            rows = sweep.speed(a.cases.split(","))
            table(rows, [("case", "{}"), ("hosts", "{}"), ("tasks", "{}"), ("flows", "{}"),
                         ("events", "{}"), ("rate_solves", "{}"), ("build_s", "{:.2f}"),
                         ("sim_s", "{:.2f}"), ("wall_s", "{:.2f}")])
            write(rows, a) if (a.csv or a.json) else None
            return 0
        if a.cmd == "ina":
            return cmd_ina(a)
        if a.cmd == "failover":
            return cmd_failover(a)
        from nezha.sim import training
        return training.main(a)
    except (F.FabricError, ValueError) as e:
        print(f"nezha sim: {e}", file=sys.stderr)
        return 2
