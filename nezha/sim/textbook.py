"""Textbook collectives as step DAGs, for the comparisons with Ethereal's paper (its
Astra-Sim runs use these, not nezha's schedules): direct (all-to-all style), halving-
doubling, ring, double binary tree. A rank's step k starts when every transfer of its
step k-1 (sent or received) has finished; ECMP hashes every transfer on its own (a new
queue pair per message, as the artifact does).
"""
import numpy as np

from nezha.sim.workload import FULL, NET, STREAM, Workload

ALGOS = ("direct", "halving_doubling", "ring", "dbtree", "alltoall")


def _steps(ranks, src, dst, step, nbytes, reduce, label):
    """Workload where a rank's step k waits for every transfer of its step k-1."""
    src, dst, step = (np.asarray(x, np.int64) for x in (src, dst, step))
    n = len(src)
    S = int(step.max()) + 1 if n else 1
    t = np.arange(n)
    # every transfer touches two ranks: index them by (rank, step)
    rk = np.r_[src, dst]
    key = rk * S + np.r_[step, step]
    tt = np.r_[t, t]
    order = np.argsort(key, kind="stable")
    key_s, tt_s = key[order], tt[order]
    ptr = np.searchsorted(key_s, np.arange(ranks * S + 1))
    want = np.flatnonzero(step > 0)
    k = src[want] * S + step[want] - 1
    lo, hi = ptr[k], ptr[k + 1]
    cnt = hi - lo
    idx = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()))
    deps = (np.repeat(want, cnt), tt_s[idx], np.full(len(idx), FULL))
    return Workload(ranks, np.full(n, NET), nbytes, src, dst, np.zeros(n), reduce, deps,
                    step=step, label=label)


def ring(ranks, nbytes):
    """Ring allreduce: 2(n-1) steps of nbytes/n to the next rank."""
    n = ranks
    st = np.arange(2 * (n - 1))
    src = np.tile(np.arange(n), len(st))
    step = np.repeat(st, n)
    return _steps(n, src, (src + 1) % n, step, np.full(len(src), nbytes / n),
                  step < n - 1, f"ring allreduce {n} ranks")


def halving_doubling(ranks, nbytes):
    """Rabenseifner's allreduce: recursive halving reduce-scatter, doubling allgather."""
    n = ranks
    if n & (n - 1):
        raise ValueError(f"ranks={n}: halving-doubling needs a power of two")
    lg = n.bit_length() - 1
    r = np.arange(n)
    src, dst, step, nb, red = [], [], [], [], []
    for k in range(lg):  # halving: distance n/2, n/4, ...; half the data each time
        src.append(r); dst.append(r ^ (n >> (k + 1))); step.append(np.full(n, k))
        nb.append(np.full(n, nbytes / 2 ** (k + 1))); red.append(np.ones(n, bool))
    for k in range(lg):  # doubling, in reverse
        src.append(r); dst.append(r ^ (1 << k)); step.append(np.full(n, lg + k))
        nb.append(np.full(n, nbytes / n * 2 ** k)); red.append(np.zeros(n, bool))
    c = np.concatenate
    return _steps(n, c(src), c(dst), c(step), c(nb), c(red), f"halving-doubling {n} ranks")


def direct(ranks, nbytes, allreduce=True):
    """Direct allreduce (reduce-scatter then allgather, every pair at once), or one
    all-to-all step (allreduce=False) of nbytes/n to every other rank."""
    n = ranks
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    off = a != b
    src, dst = a[off], b[off]
    m = len(src)
    if not allreduce:
        return _steps(n, src, dst, np.zeros(m), np.full(m, nbytes / n), np.zeros(m, bool),
                      f"all-to-all {n} ranks")
    return _steps(n, np.r_[src, src], np.r_[dst, dst], np.r_[np.zeros(m), np.ones(m)],
                  np.full(2 * m, nbytes / n), np.r_[np.ones(m, bool), np.zeros(m, bool)],
                  f"direct allreduce {n} ranks")


def _inorder_tree(n):
    """parent[v] of an in-order binary tree on 0..n-1 (the root's parent is -1)."""
    parent = np.full(n, -1)
    stack = [(0, n, -1)]
    while stack:
        lo, hi, p = stack.pop()
        if lo >= hi:
            continue
        mid = (lo + hi) // 2
        parent[mid] = p
        stack += [(lo, mid, mid), (mid + 1, hi, mid)]
    return parent


def dbtree(ranks, nbytes, chunks=8):
    """Double binary tree allreduce (NCCL): two in-order trees, the second shifted by one
    rank so that a leaf of one is inside the other; each reduces then broadcasts half the
    data, pipelined in chunks."""
    n = ranks
    kind, src, dst, nb, red, deps = [], [], [], [], [], ([], [], [])
    tid = 0
    size = nbytes / 2 / chunks
    for shift in (0, 1):
        par = _inorder_tree(n)
        rank = (np.arange(n) + shift) % n  # tree position v is rank rank[v]
        up = {}    # (v, c) -> task v->parent
        down = {}  # (v, c) -> task parent->v
        kids = [[] for _ in range(n)]
        for v in range(n):
            if par[v] >= 0:
                kids[par[v]].append(v)
        order = []  # leaves first: a node's up-send needs its children's
        seen = np.zeros(n, bool)

        def post(v):
            stack = [(v, 0)]
            while stack:
                x, i = stack.pop()
                if i < len(kids[x]):
                    stack += [(x, i + 1), (kids[x][i], 0)]
                else:
                    order.append(x)
        post(int(np.flatnonzero(par < 0)[0]))
        for c in range(chunks):
            for v in order:
                if par[v] < 0:
                    continue
                up[v, c] = tid
                src.append(rank[v]); dst.append(rank[par[v]]); nb.append(size); red.append(True)
                for ch in kids[v]:
                    deps[0].append(tid); deps[1].append(up[ch, c]); deps[2].append(FULL)
                if c:
                    deps[0].append(tid); deps[1].append(up[v, c - 1]); deps[2].append(FULL)
                tid += 1
            for v in reversed(order):
                if par[v] < 0:
                    continue
                p = par[v]
                down[v, c] = tid
                src.append(rank[p]); dst.append(rank[v]); nb.append(size); red.append(False)
                need = [up[ch, c] for ch in kids[p]] if par[p] < 0 else [down[p, c]]
                if c:
                    need.append(down[v, c - 1])
                for d in need:
                    deps[0].append(tid); deps[1].append(d); deps[2].append(FULL)
                tid += 1
        del seen
    m = len(src)
    return Workload(n, np.full(m, NET), nb, src, dst, np.zeros(m), red,
                    tuple(np.array(d, np.int64) for d in deps), label=f"double binary tree {n}")


def ina(ranks, nbytes):
    """In-network aggregation allreduce (NetReduce, SwitchML): every rank streams its nbytes
    to the switch's aggregator (rank `ranks`, the fabric's agg_host) and gets the sum back
    as it forms: one hop up, one hop down. A rank's result streams behind every rank's
    upload (STREAM: it cannot get ahead of the slowest contributor), which is the
    aggregator's slot pipeline at fluid level (the fill, one packet, is left out)."""
    n = ranks
    up = np.arange(n)
    down = n + np.arange(n)
    dep_t = np.repeat(down, n)
    dep_p = np.tile(up, n)
    return Workload(n + 1, np.full(2 * n, NET), np.full(2 * n, float(nbytes)),
                    np.r_[np.arange(n), np.full(n, n)], np.r_[np.full(n, n), np.arange(n)],
                    np.zeros(2 * n), np.r_[np.ones(n, bool), np.zeros(n, bool)],
                    (dep_t, dep_p, np.full(len(dep_t), STREAM)),
                    step=np.r_[np.zeros(n), np.ones(n)], label=f"in-network allreduce {n}")


def build(algo, ranks, nbytes):
    """A textbook workload by name."""
    if algo == "ring":
        return ring(ranks, nbytes)
    if algo == "halving_doubling":
        return halving_doubling(ranks, nbytes)
    if algo == "direct":
        return direct(ranks, nbytes)
    if algo == "alltoall":
        return direct(ranks, nbytes, allreduce=False)
    if algo == "dbtree":
        return dbtree(ranks, nbytes)
    raise ValueError(f"algo={algo!r}: choose one of {', '.join(ALGOS)}")
