"""Max-min fair rates by progressive filling, vectorised.

Every unfrozen flow's rate grows by the same amount until a link fills (or a flow reaches
its own cap); the flows on filled links freeze; repeat. A flow may use a link with a
weight (spraying puts 1/s of a flow on each of s paths): it then takes weight x rate of
that link. The result is the max-min fair allocation: no flow can get more without
taking from one that has no more.
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
    c0 = cap[ulinks].astype(np.float64)
    rem = c0.copy()
    starts = np.flatnonzero(np.r_[True, e_flow[1:] != e_flow[:-1]])
    if len(starts) != nflows:
        raise ValueError("every flow needs at least one link entry, sorted by flow")
    fcap = np.full(nflows, np.inf) if flow_cap is None else np.asarray(flow_cap, np.float64)
    frozen = fcap <= 0
    L = len(ulinks)
    while not frozen.all():
        live = ~frozen[e_flow]
        load = np.bincount(e_l[live], e_w[live], minlength=L)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(load > 0, rem / load, np.inf)
        fshare = np.minimum.reduceat(share[e_l], starts)
        head = np.minimum(fshare, fcap - x)
        delta = head[~frozen].min()
        if not np.isfinite(delta):  # flows on links with no capacity limit
            x[~frozen] = np.inf
            break
        delta = max(delta, 0.0)
        x[~frozen] += delta
        rem -= delta * load
        sat = rem <= TOL * c0 + 1e-12
        rem[sat] = 0.0
        on_sat = np.maximum.reduceat(sat[e_l].view(np.int8), starts) > 0
        frozen |= on_sat | (x >= fcap * (1 - TOL))
    return x


def link_loads(nlinks, e_flow, e_link, e_w, rate):
    """Bytes/s on every link for the given flow rates."""
    return np.bincount(e_link, e_w * rate[e_flow], minlength=nlinks)
