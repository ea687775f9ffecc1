"""Max-min fair rates (the allocation progressive filling reaches), vectorised.

Progressive filling raises every unfrozen flow's rate alike until a link fills, freezes
the flows on it, and repeats: one round per distinct rate level, too many for thousands
of ECMP flows. We freeze many levels per round instead. A link's fair share (remaining
capacity over its unfrozen flows) never falls as other flows freeze (a flow freezes
below the share of every other link it crosses), so a link whose share is no larger
than the share of any other link its flows cross will fill at exactly that share: all
such links, and the flows on them, are settled in the same round. A flow's own cap acts
as a private link. A flow may use a link with a weight (spraying puts 1/s of a flow on
each of s paths): it then takes weight x rate of that link.
"""
import numpy as np

TOL = 1e-9


def maxmin(nflows, e_flow, e_link, e_w, cap, flow_cap=None):
    """Rates of nflows flows.

    e_flow, e_link, e_w: one entry per (flow, link) use, sorted by flow, every flow at
    least one entry; cap: capacity of every link (indexed by e_link); flow_cap: a cap per
    flow (np.inf for none). A flow crossing a zero-capacity link gets rate 0."""
    x = np.zeros(nflows)
    if nflows == 0:
        return x
    ulinks, e_l = np.unique(e_link, return_inverse=True)
    L = len(ulinks)
    rem = cap[ulinks].astype(np.float64)
    starts = np.flatnonzero(np.concatenate(([True], e_flow[1:] != e_flow[:-1])))
    if len(starts) != nflows:
        raise ValueError("every flow needs at least one link entry, sorted by flow")
    fcap = np.full(nflows, np.inf) if flow_cap is None else np.asarray(flow_cap, np.float64)
    by_link = np.argsort(e_l, kind="stable")
    l_sorted = e_l[by_link]
    l_starts = np.flatnonzero(np.concatenate(([True], l_sorted[1:] != l_sorted[:-1])))
    l_ids = l_sorted[l_starts]
    frozen = np.zeros(nflows, bool)
    e_w = np.asarray(e_w, np.float64)
    while not frozen.all():
        live = ~frozen[e_flow]
        load = np.bincount(e_l, np.where(live, e_w, 0.0), minlength=L)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(load > 0, np.maximum(rem, 0.0) / load, np.inf)
        fmin = np.minimum(np.minimum.reduceat(share[e_l], starts), fcap)
        fmin[frozen] = np.inf
        # per link: the smallest bottleneck among its live flows
        lmin = np.full(L, np.inf)
        lmin[l_ids] = np.minimum.reduceat(fmin[e_flow[by_link]], l_starts)
        bott = (load > 0) & (share <= lmin * (1 + TOL))
        # flows settled now: on a bottleneck link, or held by their own cap
        hit = np.maximum.reduceat((bott[e_l] & live).view(np.int8), starts) > 0
        hit |= ~frozen & (fcap <= fmin * (1 + TOL))
        hit &= ~frozen
        if not hit.any():  # cannot happen for finite shares; guards the loop
            hit = ~frozen & (fmin <= fmin[~frozen].min() * (1 + TOL))
        if not np.isfinite(fmin[hit]).all():  # links without a limit
            x[hit & ~np.isfinite(fmin)] = np.inf
        x[hit] = fmin[hit]
        frozen |= hit
        ent = hit[e_flow]
        used = np.bincount(e_l[ent], e_w[ent] * np.where(np.isfinite(x[e_flow[ent]]),
                                                         x[e_flow[ent]], 0.0), minlength=L)
        rem -= used
    return x


def link_loads(nlinks, e_flow, e_link, e_w, rate):
    """Bytes/s on every link for the given flow rates."""
    return np.bincount(e_link, e_w * rate[e_flow], minlength=nlinks)
