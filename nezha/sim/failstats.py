"""The failover bench's numbers from its raw rows: which collectives a cut hit, what they
would have taken with no failover cost, and a summary whose spread says whether a 10 %
comparison can resolve anything. bench/failover.py reports with it and `nezha sim failover`
compares against it, so both read a cut the same way.

rows: rank 0's (start, end, rails-up mask) per collective, back to back; 3 = both rails up.
"""
import math
import statistics

BOTH = 3
# two-sided 95 % Student t quantiles by degrees of freedom (1..30); normal beyond
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(dof):
    return _T95[dof - 1] if 1 <= dof <= len(_T95) else 1.96


def hit_span(rows, tf, lazy=False):
    """(i, s, k): the collectives a cut at tf hit, as row indices. k: the first to end after
    the cut with a rail down. Striped collectives end with a vote, so the one hit ends
    degraded: i = s = k. A lazy (small, unvoted) collective can end with both rails up on a
    rank that re-ran it for ranks behind, or was behind itself: the rail is marked dead only
    in the next collective's vote (lab, 1 KiB: 70 ms with both rails up, then 3 ms on one).
    So for lazy sizes i is the first row to end after the cut and s the longest of i..k, the
    stalled one. None if no collective ended on fewer rails after the cut."""
    k = next((j for j, (_, t1, a) in enumerate(rows) if t1 > tf and a != BOTH), None)
    if k is None:
        return None
    if not lazy:
        return k, k, k
    i = next(j for j, (_, t1, _) in enumerate(rows) if t1 > tf)
    s = max(range(i, k + 1), key=lambda j: rows[j][1] - rows[j][0])
    return i, s, k


def run_medians(rows):
    """(two-rail, one-rail) seconds: the medians of the whole run's collectives."""
    dur = [t1 - t0 for t0, t1, _ in rows]
    return (statistics.median(d for (_, _, a), d in zip(rows, dur) if a == BOTH),
            statistics.median(d for (_, _, a), d in zip(rows, dur) if a != BOTH))


def references(rows, i, k, tf, th=None, near=0, medians=None):
    """(two-rail, one-rail) seconds for the cut's ideal. near=0: the medians of the whole
    run (the bench's reference; `medians`: run_medians(rows) when the caller has them, as
    a run's cuts share them). near=K: the medians of the K two-rail collectives just
    before row i and the K one-rail ones just after row k (before the heal th): the run's
    drift (CPU load, page cache) cancels; the noise of single collectives does not."""
    two, one = medians or run_medians(rows)
    if near:
        dur = [t1 - t0 for t0, t1, _ in rows]
        before = [dur[j] for j in range(i - 1, -1, -1) if rows[j][2] == BOTH
                  and rows[j][1] <= tf][:near]
        after = [dur[j] for j in range(k + 1, len(rows)) if rows[j][2] != BOTH
                 and (th is None or rows[j][1] <= th)][:near]
        two = statistics.median(before) if before else two
        one = statistics.median(after) if after else one
    return two, one


def cut_extra(rows, tf, th=None, near=0, lazy=False, medians=None):
    """One cut: dict(i, s, k, at, took, ideal, extra) in seconds, or None. The stalled row s
    is held against two rails until the cut and one after; rows of the span before it
    against two rails, after it against one (time between calls is not counted)."""
    span = hit_span(rows, tf, lazy)
    if span is None:
        return None
    i, s, k = span
    two, one = references(rows, i, k, tf, th, near, medians)
    t0 = rows[s][0]
    before = min(max(tf - t0, 0.0), two)
    ideal = before + (1 - before / two) * one + (s - i) * two + (k - s) * one
    took = sum(rows[j][1] - rows[j][0] for j in range(i, k + 1))
    return dict(i=i, s=s, k=k, at=tf - t0, took=took, ideal=ideal, extra=took - ideal)


def noise(rows):
    """Seconds: robust spread (1.4826 x MAD) of the one-rail collectives' times, the noise
    every single cut's extra carries from its own collective."""
    one = [t1 - t0 for t0, t1, a in rows if a != BOTH]
    if len(one) < 2:
        return 0.0
    m = statistics.median(one)
    return 1.4826 * statistics.median(abs(x - m) for x in one)


def summary(extras, rel=0.10):
    """Mean with a 95 % interval, median, spread, and how many cuts a `rel` resolution of
    the mean needs (same units as extras)."""
    n = len(extras)
    if not n:
        return dict(n=0)
    mean = statistics.fmean(extras)
    sd = statistics.stdev(extras) if n > 1 else float("nan")
    half = t95(n - 1) * sd / math.sqrt(n) if n > 1 else float("inf")
    need = (math.ceil((1.96 * sd / (rel * abs(mean))) ** 2) if n > 1 and mean
            else float("nan"))
    return dict(n=n, mean=mean, ci95=half, median=statistics.median(extras), sd=sd,
                resolves=bool(half <= rel * abs(mean)), cuts_needed=need)


def verdict(lab, model, rel=0.10):
    """Paired comparison, one (lab, model) pair per cut: the model's own variation over
    cut times cancels, the lab's noise stays. 'within' if the 95 % interval of the mean
    difference lies inside +-rel of the model's mean, 'outside' if wholly beyond it,
    'unresolved' if the interval straddles the bound (more cuts needed)."""
    d = [a - b for a, b in zip(lab, model)]
    s = summary(d)
    if not s["n"]:
        return dict(s, verdict="none")
    bound = rel * abs(statistics.fmean(model))
    lo, hi = s["mean"] - s["ci95"], s["mean"] + s["ci95"]
    v = ("within" if -bound <= lo and hi <= bound else
         "outside" if hi < -bound or lo > bound else "unresolved")
    return dict(s, verdict=v, bound=bound, error_pct=100 * s["mean"] / statistics.fmean(model)
                if statistics.fmean(model) else float("nan"))


def entry_lags(rank_starts):
    """Per collective: seconds from rank 0 entering it to the last rank entering it (every
    rank's clock is the same machine's), from bench/failover.py's raw.rank_starts (one list
    of call times per rank, files since 2026-11-24), or None. Data cannot move before the
    last rank is in: the part of a collective's start that varies from call to call."""
    if not rank_starts or any(r is None for r in rank_starts):
        return None
    n = min(len(r) for r in rank_starts)
    return [max(r[i] for r in rank_starts) - rank_starts[0][i] for i in range(n)]


def _data_times(rank_traces, j):
    """Call j from every rank's engine trace (bench/failover.py's raw.rank_traces): (data
    start, {chan: last op's finish}, {chan: (ops done, ops) summed over ranks}, {chan: every
    finished op's (time, network bytes or None), hit calls in files since session 30's
    second run}, {chan: (network bytes done, bytes) summed over ranks} or None for files
    before session 31) on the wall clock, or None where a rank kept no trace of it. The
    data start is the last rank's engine start (after its failover snapshot): no ring moves
    before every rank is in."""
    t0s, last, count, fins, nbytes = [], {}, {}, {}, {}
    for rt in rank_traces:
        tr = rt["traces"][j] if rt and j < len(rt["traces"]) else None
        if tr is None:
            return None
        t0 = tr[0] / 1e9 + rt["mono_off"]
        t0s.append(t0)
        for ch, f, *b in (tr[2] if len(tr) > 2 else ()):  # a hit call's op finish times
            fins.setdefault(ch, []).extend(zip((t0 + x / 1e9 for x in f),
                                               b[0] if b else [None] * len(f)))
        for ch, fin, done, total, *b in tr[1]:
            if ch < 0:
                continue
            if done:
                last[ch] = max(last.get(ch, 0.0), t0 + fin / 1e9)
            d, n = count.get(ch, (0, 0))
            count[ch] = (d + done, n + total)
            if nbytes is not None and b:
                bd, bn = nbytes.get(ch, (0, 0))
                nbytes[ch] = (bd + b[0], bn + b[1])
            else:
                nbytes = None  # a file before bytes were traced
    return max(t0s), last, count, fins, nbytes


def same_call(row, rails=2):
    """The bench's extra of each cut against its own call (rows of a bench/failover.py JSON
    row with raw.rank_traces, files since session 30), or [] without traces. Rank 0's call
    time carries the snapshot copy, the entry lag of 4 ranks on 2 cores and the pace of
    that call's rails, each varying by tens of ms from call to call (the 15-37 ms `noise`
    at 64 MiB); the bench's ideal is built from medians, so its extra carries all of it.
    Here the clock starts when the data can move (the last rank's engine start), the
    two-rail time is the hit call's own: the surviving rail's last op in its main run (L,
    its 32 slices at this call's pace; times the median ratio of a two-rail call's data time
    to that rail's in the unhit calls), and the one-rail time is that times the run's median
    ratio of one-rail to two-rail data times. The end is the last rank's re-run done
    (its `down` event's rerun_done_s). So extra = end - (c + (1 - c / T2) T1) with c the cut
    from the data start, the bench's definition at this call's own pace.
    Per cut: dict(j, rail, c, share (c / T2), L, T2, T1, took (end - start), ideal, extra,
    lost (the ranks' rerun_slices, max), first_down (first rank's, from the data start),
    rail_ops (the hit call's ops per rail over every rank: its plan, failover.plan_for_ops),
    rail_bytes and rail_bytes_at_cut (its network bytes per rail over every rank, planned
    and moved by the cut; None in files before session 31)), seconds; and ratios (r21: T1 / T2 medians, n1 / n2 calls) in the first row."""
    rt = row["raw"].get("rank_traces")
    if not rt or any(x is None for x in rt):
        return []
    rows = row["raw"]["rows"]
    per_rail = rt[0].get("nconns", 1)  # channel c rides rail c // nconns
    data = [_data_times(rt, j) for j in range(len(rows))]
    two, one, adj = [], [], {r: [] for r in range(rails)}
    for j, d in enumerate(data):
        if d is None or not d[1]:
            continue
        start, last, count = d[:3]
        if any(dn < n for dn, n in count.values()):
            continue  # a hit call's main run
        t = max(last.values()) - start
        if rows[j][2] == BOTH:
            two.append(t)
            for r in range(rails):
                lr = [v for ch, v in last.items() if ch // per_rail == r]
                if lr:
                    adj[r].append(t / (max(lr) - start))
        else:
            one.append(t)
    if not two or not one:
        return []
    r21 = statistics.median(one) / statistics.median(two)
    adj = {r: statistics.median(v) if v else 1.0 for r, v in adj.items()}
    evs = [e for rk in row.get("ranks") or [] for e in rk.get("events") or []
           if e.get("event") == "down"]
    called = row["raw"].get("fail_called") or [tf for tf, _ in row["raw"]["failures"]]
    out = []
    for n, ((tf, th), tc) in enumerate(zip(row["raw"]["failures"], called)):
        span = hit_span(rows, tf)
        if span is None or data[span[0]] is None:
            continue
        j = span[0]
        start, last, count, fins, nbytes = data[j]  # fins: the hit call's finished ops
        if len({ch // per_rail for ch in count}) < rails:
            continue  # a re-run's trace (the main run's was not kept)
        rail = 0 if (row["size"] < (1 << 20) or n % 2 == 0) else 1  # the bench's rotation
        live = [v for ch, v in last.items() if ch // per_rail != rail]
        mine = [e for e in evs if tc - 1e-3 <= e["time"] <= th]
        ends = [e["rerun_done_s"] for e in mine if e.get("rerun_done_s")]
        if not live:
            continue
        L = max(live) - start
        T2 = L * adj[1 - rail if rails == 2 else 0]
        T1 = T2 * r21
        end = max(ends) if ends else max(last.values())
        c = tf - start
        before = min(max(c, 0.0), T2)
        ideal = before + (1 - before / T2) * T1
        # the same with the surviving rail's own pace for all the work left (T1 = 2 T2):
        # no reference from other calls at all, only the rails' symmetry
        ideal2 = before + (1 - before / T2) * 2 * T2
        ops = {r: sum(n for ch, (_, n) in count.items() if ch // per_rail == r)
               for r in range(rails)}
        # each rail's progress at the cut, read from its ops (share of its ops finished by
        # then, over every rank): the surviving rail's is the share of the call's work done,
        # whatever its pace
        prog = {}
        for r in range(rails):
            tot = sum(nn for ch, (_, nn) in count.items() if ch // per_rail == r)
            f = [x for ch, v in fins.items() if ch // per_rail == r for x, _ in v]
            prog[r] = sum(x <= tf for x in f) / tot if f and tot else float("nan")
        # the bytes each rail had moved at the cut (its finished ops' network bytes, every
        # rank's sends and receives) and its planned bytes: files since session 31
        rbytes, at_cut = None, None
        if nbytes is not None:
            rbytes = [sum(bn for ch, (_, bn) in nbytes.items() if ch // per_rail == r)
                      for r in range(rails)]
            if fins and all(b is not None for v in fins.values() for _, b in v):
                at_cut = [sum(b for ch, v in fins.items() if ch // per_rail == r
                              for x, b in v if x <= tf) for r in range(rails)]
        out.append(dict(live_progress=prog.get(1 - rail, float("nan")),
                        dead_progress=prog.get(rail, float("nan")),
                        j=j, k=n, rail=rail, c=c, share=before / T2, L=L, T2=T2, T1=T1,
                        took=end - start, ideal=ideal, extra=end - start - ideal,
                        extra_2x=end - start - ideal2,
                        symmetric=len(set(ops.values())) == 1,
                        rail_ops=[ops[r] for r in range(rails)],
                        rail_bytes=rbytes, rail_bytes_at_cut=at_cut,
                        lost=max((e.get("rerun_slices") or 0 for e in mine), default=0),
                        first_down=min((e["time"] for e in mine), default=float("nan"))
                        - start, fail_s=tf - tc, r21=r21, n1=len(one), n2=len(two)))
    return out
