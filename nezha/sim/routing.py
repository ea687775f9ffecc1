"""Path choice: every transfer becomes one or more flows (pieces) with the links they use.

Schemes
  ecmp      a hash of the connection (rank pair and channel; textbook workloads: of the
            flow) picks one path, as a switch hashing the 5-tuple does;
  spray     ideal packet spraying: the fluid split of every flow over all its paths;
  ethereal  Ethereal's split-and-assign (seeds §7.3): per source host, destination group
            (leaf/ToR) and step, the n equal flows go whole round-robin over the s paths,
            the last r = n mod s each cut into s/gcd(r, s) pieces, continuing the round;
  rail      the fabric has one path per pair (multi-rail planes): the channel's rail.
A channel c uses rail c // nconns (nezha's rail planner decides which channel carries what).
"""
import math

import numpy as np

from nezha.sim.fabric import FabricError
from nezha.sim.workload import CPU, NET

SCHEMES = ("ecmp", "spray", "ethereal", "rail")


def _hash(*cols, seed=0):
    """A deterministic 64-bit mix of integer columns (splitmix-like)."""
    h = np.full(np.broadcast(*cols).shape, np.uint64(0x9E3779B97F4A7C15 ^ (seed * 7919)),
                np.uint64)
    with np.errstate(over="ignore"):
        for c in cols:
            h ^= np.asarray(c, np.uint64) + np.uint64(0x9E3779B97F4A7C15) + (h << np.uint64(6)) \
                + (h >> np.uint64(2))
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(31)
    return h


class Routing:
    """Flows (pieces of transfers) with their links: flow_task, flow_bytes, and per flow a
    range [start, start+len) of (e_link, e_w)."""

    def __init__(self, wl, fabric, host_of, scheme="ecmp", nconns=1, seed=0, flow_key=None):
        if scheme not in SCHEMES:
            raise FabricError(f"scheme={scheme!r}: choose one of {', '.join(SCHEMES)}")
        self.fabric, self.scheme, self.seed = fabric, scheme, seed
        self.host_of = np.asarray(host_of)
        net = np.flatnonzero((wl.kind == NET) & (wl.nbytes > 0))
        hs, hd = self.host_of[wl.src[net]], self.host_of[wl.dst[net]]
        rail = wl.chan[net] // nconns
        if len(rail) and rail.max() >= fabric.rails:
            raise FabricError(f"rails={fabric.rails}: the plan uses channel "
                              f"{int(wl.chan[net].max())}, rail {int(rail.max())} "
                              f"(nconns={nconns}); the fabric has too few rails")
        self.np_ = fabric.npaths(hs, hd)
        key = flow_key[net] if flow_key is not None else None
        tasks, choice, weight = self._choose(wl, net, hs, hd, key)
        links = fabric.links_of(hs[tasks], hd[tasks], rail[tasks], choice)
        piece = np.arange(len(tasks))
        ftask, fbytes = net[tasks], wl.nbytes[net[tasks]] * weight
        # spraying keeps one flow per transfer over all its paths: merge its pieces
        if scheme == "spray":
            piece = tasks
            fbytes = wl.nbytes[net]
            ftask = net
        hops = links.shape[1]
        e_flow = np.repeat(piece, hops)
        e_link = links.reshape(-1)
        e_w = np.repeat(weight if scheme == "spray" else np.ones(len(tasks)), hops)
        ok = e_link >= 0
        e_flow, e_link, e_w = e_flow[ok], e_link[ok], e_w[ok]
        # reductions cross the receiving host's CPU
        if fabric.cpu is not None:
            red = wl.reduce[ftask] & (wl.kind[ftask] == NET)
            fi = np.flatnonzero(red)
            frac = fbytes[fi] / wl.nbytes[ftask[fi]]
            e_flow = np.r_[e_flow, fi]
            e_link = np.r_[e_link, fabric.cpu[self.host_of[wl.dst[ftask[fi]]]]]
            e_w = np.r_[e_w, np.ones(len(fi)) if scheme != "spray" else frac]
        cpu = np.flatnonzero((wl.kind == CPU) & (wl.nbytes > 0))
        if fabric.cpu is not None and len(cpu):
            base = len(ftask)
            ftask = np.r_[ftask, cpu]
            fbytes = np.r_[fbytes, wl.nbytes[cpu]]
            e_flow = np.r_[e_flow, base + np.arange(len(cpu))]
            e_link = np.r_[e_link, fabric.cpu[self.host_of[wl.src[cpu]]]]
            e_w = np.r_[e_w, np.ones(len(cpu))]
        order = np.argsort(e_flow, kind="stable")
        e_flow, self.e_link, self.e_w = e_flow[order], e_link[order], e_w[order]
        self.flow_task, self.flow_bytes = ftask, fbytes
        nf = len(ftask)
        self.nflows = nf
        self.e_start = np.searchsorted(e_flow, np.arange(nf))
        self.e_len = np.bincount(e_flow, minlength=nf)
        self.flow_choice = np.full(nf, -1)
        if scheme != "spray":
            self.flow_choice[:len(choice)] = choice
        self.flow_rail = np.zeros(nf, np.int64)
        self.flow_rail[:len(tasks) if scheme != "spray" else len(net)] = (
            rail[tasks] if scheme != "spray" else rail)

    # ---- choosing ---------------------------------------------------------------------

    def _choose(self, wl, net, hs, hd, key):
        """(index into net per piece, path choice per piece, share of the transfer)."""
        n = len(net)
        npaths = self.np_
        idx = np.arange(n)
        if self.scheme == "rail" or (npaths <= 1).all():
            return idx, np.zeros(n, np.int64), np.ones(n)
        if self.scheme == "ecmp":
            k = key if key is not None else np.zeros(n, np.int64)
            h = _hash(wl.src[net], wl.dst[net], wl.chan[net], k, seed=self.seed)
            return idx, (h % npaths.astype(np.uint64)).astype(np.int64), np.ones(n)
        if self.scheme == "spray":
            rep = idx.repeat(npaths)
            ch = np.arange(len(rep)) - np.repeat(np.cumsum(npaths) - npaths, npaths)
            return rep, ch, 1.0 / npaths[rep]
        return ethereal_assign(self.fabric, hs, hd, wl.nbytes[net], wl.levels()[net],
                               seed=self.seed)

    # ---- reading ----------------------------------------------------------------------

    def gather(self, flows):
        """(local flow index, link, weight) entries of the given flows, sorted by flow."""
        s, n = self.e_start[flows], self.e_len[flows]
        tot = int(n.sum())
        idx = np.repeat(s - np.cumsum(n) + n, n) + np.arange(tot)
        return np.repeat(np.arange(len(flows)), n), self.e_link[idx], self.e_w[idx]

    def uses(self, flows, link):
        """Mask of flows that cross link."""
        fl, lk, _ = self.gather(flows)
        hit = np.zeros(len(flows), bool)
        hit[fl[lk == link]] = True
        return hit

    # ---- failures ---------------------------------------------------------------------

    def reroute(self, flows, wl, rng):
        """New paths for flows avoiding failed links (ecmp: rehash over the healthy paths;
        spray: spread over them; ethereal: a random other healthy path)."""
        fab, failed = self.fabric, self.fabric.failed
        for f in flows:
            t = self.flow_task[f]
            if wl.kind[t] != NET:
                continue
            hs, hd = self.host_of[wl.src[t]], self.host_of[wl.dst[t]]
            npaths = int(fab.npaths(hs, hd))
            rail = self.flow_rail[f]
            cand = fab.links_of(np.full(npaths, hs), np.full(npaths, hd), rail,
                                np.arange(npaths))
            good = ~np.isin(cand, list(failed)).any(axis=1) & ~(cand < -1).any(axis=1)
            if not good.any():
                raise FabricError(f"fail_link: host {hs} cannot reach host {hd} once "
                                  f"{', '.join(fab.link_name(x) for x in sorted(failed))} "
                                  "failed")
            ok = np.flatnonzero(good)
            if self.scheme == "spray":
                sel, w = ok, np.full(len(ok), 1.0 / len(ok))
            elif self.scheme == "ecmp":
                h = _hash(wl.src[t], wl.dst[t], wl.chan[t], seed=self.seed + 1)
                sel, w = ok[[int(h % np.uint64(len(ok)))]], np.ones(1)
            else:
                sel, w = ok[[rng.integers(len(ok))]], np.ones(1)
            lk = cand[sel]
            ww = np.repeat(w, lk.shape[1])
            lk = lk.reshape(-1)
            keep = lk >= 0
            lk, ww = lk[keep], ww[keep]
            # the CPU entry (reductions) stays
            old = self.e_link[self.e_start[f]:self.e_start[f] + self.e_len[f]]
            oldw = self.e_w[self.e_start[f]:self.e_start[f] + self.e_len[f]]
            cpu = np.isin(old, fab.cpu) if fab.cpu is not None else np.zeros(len(old), bool)
            lk, ww = np.r_[lk, old[cpu]], np.r_[ww, oldw[cpu]]
            self.e_start[f], self.e_len[f] = len(self.e_link), len(lk)
            self.e_link = np.r_[self.e_link, lk]
            self.e_w = np.r_[self.e_w, ww]
            self.flow_choice[f] = sel[0] if len(sel) == 1 else -1


def ethereal_assign(fabric, hs, hd, nbytes, level, seed=0):
    """Ethereal's split-and-assign (seeds §7.3) for transfers from hosts hs to hosts hd.

    Groups: (source host, destination group, level, size). Returns (transfer index per
    piece, path choice per piece, share of its transfer per piece)."""
    n = len(hs)
    npaths = fabric.npaths(hs, hd).astype(np.int64)
    gd = fabric.group_of(hd)
    key = np.stack([hs, gd, level, nbytes.view(np.int64) if nbytes.dtype == np.float64
                    else nbytes]).T
    order = np.lexsort(key.T[::-1])
    ks = key[order]
    new = np.r_[True, (ks[1:] != ks[:-1]).any(axis=1)]
    gid = np.cumsum(new) - 1
    gstart = np.flatnonzero(new)
    gsize = np.diff(np.r_[gstart, n])
    pos = np.arange(n) - gstart[gid]
    s = npaths[order]
    cnt = gsize[gid]
    r = cnt % s
    g = np.gcd(r, s)
    whole = (pos < cnt - r) | (s <= 1)
    m = np.where(whole, 1, s // np.maximum(g, 1))
    rep = np.repeat(np.arange(n), m)
    i = np.arange(len(rep)) - np.repeat(np.cumsum(m) - m, m)
    p, ss, cc, rr = pos[rep], s[rep], cnt[rep], r[rep]
    slot = np.where(m[rep] == 1, p, (cc - rr) + (p - (cc - rr)) * m[rep] + i)
    # a per-host rotation of the round-robin start keeps hosts of one leaf from all
    # starting on path 0 (the artifact shuffles path order); loads per path stay equal
    rot = (_hash(hs[order][rep], seed=seed) % np.maximum(ss, 1).astype(np.uint64)).astype(
        np.int64)
    choice = (slot + rot) % np.maximum(ss, 1)
    return order[rep], choice, 1.0 / m[rep]
