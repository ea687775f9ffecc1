"""A collective as the simulator sees it: transfers and local reductions with dependencies.

A *task* is either a transfer (bytes from one rank to another on one channel) or a local
reduction (CPU only). Dependencies come in three kinds, as in the engine
(include/nezha/nezha_engine.h):
  FULL     the task starts after its dependency has finished;
  STREAM   the task may start once its dependency has started and never gets ahead of it
           (the ring's pipeline: a rank forwards bytes as they arrive and are reduced);
  STARTED  the task may start once its dependency has started.
"""
import numpy as np

FULL, STREAM, STARTED = 0, 1, 2
NET, CPU = 0, 1


class Workload:
    """Tasks (arrays, one entry per task) and their dependencies (CSR by task)."""

    def __init__(self, ranks, kind, nbytes, src, dst, chan, reduce, deps, step=None,
                 label=""):
        self.ranks = ranks
        self.kind = np.asarray(kind, np.int8)
        self.nbytes = np.asarray(nbytes, np.float64)
        self.src = np.asarray(src, np.int64)
        self.dst = np.asarray(dst, np.int64)
        self.chan = np.asarray(chan, np.int64)
        self.reduce = np.asarray(reduce, bool)
        self.ntasks = n = len(self.kind)
        # deps: (task, pred, type) arrays
        t, p, k = (np.asarray(x, np.int64) for x in deps)
        keep = t != p
        t, p, k = t[keep], p[keep], k[keep]
        order = np.lexsort((k, p, t))
        self.dep_task, self.dep_pred, self.dep_kind = t[order], p[order], k[order]
        self.step = None if step is None else np.asarray(step, np.int64)
        self.label = label
        self.rate_cap = None  # B/s per task (np.inf: none), read by network.simulate
        if n and len(self.dep_pred) and (self.dep_pred.max() >= n or self.dep_pred.min() < 0):
            raise ValueError("a dependency names a task that does not exist")

    @property
    def total_bytes(self):
        """Bytes all transfers move."""
        return float(self.nbytes[self.kind == NET].sum())

    def levels(self):
        """Depth of every task in the dependency graph (longest chain of predecessors):
        tasks of one step of a symmetric collective share a level."""
        if self.step is not None:
            return self.step
        n = self.ntasks
        level = np.zeros(n, np.int64)
        indeg = np.bincount(self.dep_task, minlength=n)
        order = np.argsort(self.dep_pred, kind="stable")
        succ_task = self.dep_task[order]
        ptr = np.searchsorted(self.dep_pred[order], np.arange(n + 1))
        frontier = np.flatnonzero(indeg == 0)
        seen = 0
        while len(frontier):
            seen += len(frontier)
            lo, hi = ptr[frontier], ptr[frontier + 1]
            cnt = hi - lo
            if not cnt.sum():
                break
            idx = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(cnt.sum())
            succ = succ_task[idx]
            np.maximum.at(level, succ, np.repeat(level[frontier] + 1, cnt))
            np.subtract.at(indeg, succ, 1)
            frontier = np.unique(succ[indeg[succ] == 0])
        if seen < n:
            raise ValueError("the schedule's dependencies form a cycle")
        self.step = level
        return level


def concat(parts, label=""):
    """One workload running several independent ones at once (e.g. the slices of a plan)."""
    off, deps = 0, ([], [], [])
    for w in parts:
        deps[0].append(w.dep_task + off)
        deps[1].append(w.dep_pred + off)
        deps[2].append(w.dep_kind)
        off += w.ntasks
    cat = np.concatenate
    caps = [w.rate_cap if w.rate_cap is not None else np.full(w.ntasks, np.inf) for w in parts]
    out = Workload(max(w.ranks for w in parts), cat([w.kind for w in parts]),
                   cat([w.nbytes for w in parts]), cat([w.src for w in parts]),
                   cat([w.dst for w in parts]), cat([w.chan for w in parts]),
                   cat([w.reduce for w in parts]), tuple(cat(d) for d in deps), label=label)
    if any(w.rate_cap is not None for w in parts):
        out.rate_cap = cat(caps)
    return out
