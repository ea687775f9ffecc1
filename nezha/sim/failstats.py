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
