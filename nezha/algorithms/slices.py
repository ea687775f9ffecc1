"""Which builder (nezha/_core/algorithms/) runs one slice of each collective, per algorithm.

The communicator builds its schedules with these, and so does the simulator
(nezha/sim/nezha_sched.py): it simulates what nezha runs. Arguments are addresses (the
slice's first element), not buffers; es is the element size; AVG is the caller's.
"""
import numpy as np

from nezha._core import engine as _eng
from nezha.planner import ALGO_DIRECT, ALGO_HIER, ALGO_RAB, ALGO_RD, ALGO_TREE
from nezha.types import DType, ReduceOp

HIER_CHUNK = 256 << 10  # default bytes per hierarchical chunk (NEZHA_HIER_CHUNK)


def allreduce(s, algo, chan, out, src, cnt, es, hier, chunk=HIER_CHUNK, owners=None):
    """hier: this rank's (local ranks, cross ranks), Planner.hier_groups; chunk: bytes of
    a hierarchical chunk (one crosses hosts while the next is reduced within the host);
    owners: the local positions that carry chan's slice across hosts (Planner.rail_owners;
    None: all of them). rd with several ranks on each host crosses hosts from one rank per
    host (rd_hosts.pxi)."""
    if algo == ALGO_RD and hier is not None and hier[1] is not None:
        _eng.rd_hosts_allreduce(s, chan, out, src, cnt, *hier)
    elif algo == ALGO_RD:
        _eng.rd_allreduce(s, chan, out, src, cnt)
    elif algo == ALGO_RAB:
        _eng.rab_allreduce(s, chan, out, src, cnt)
    elif algo == ALGO_HIER:
        _eng.hier_allreduce(s, chan, out, src, cnt, *hier, max(chunk // es, 1), owners)
    else:
        _eng.ring_allreduce(s, chan, out, src, cnt)


def reduce(s, algo, chan, root, at_root, out, src, cnt, es, hier, chunk=HIER_CHUNK,
           owners=None):
    """Small or hierarchical: an allreduce whose result the other ranks drop (out: their
    sink). Else the ring reduce (out: 0 except at root; the others keep partial sums in
    scratch)."""
    if algo in (ALGO_RD, ALGO_HIER):
        allreduce(s, algo, chan, out, src, cnt, es, hier, chunk, owners)
    else:
        work = None if at_root else np.empty(cnt * es + 1, np.uint8)
        _eng.ring_reduce(s, chan, root, out if at_root else 0, src, cnt, work)


def broadcast(s, algo, chan, root, out, src, cnt, hosts, owners=None, sync=None,
              flat=False):
    """ALGO_RD: an allreduce that ORs bytes, the root's buffer (src) against the others'
    zeros; hierarchical; else a binomial tree (ALGO_TREE; the root sends src when given:
    a lazy tree's re-run sends the root's kept copy) or a chain.
    sync: (local, cross) of a lazy hierarchical one's first slice: a barrier of headers
    (hosts_barrier) ahead of its ops, so that no rank finishes it before every rank
    entered it (its root and the ranks up a chain would otherwise: failover.lazy_ok)."""
    if algo == ALGO_RD:
        s.reduce_as(int(DType.UINT8), int(ReduceOp.BOR))
        _eng.rd_allreduce(s, chan, out, src, cnt)
    elif algo == ALGO_HIER:  # the root only reads src (or its buffer): a re-run reads it again
        if sync is not None:
            _eng.hosts_barrier(s, chan, *sync)
        _eng.hier_broadcast(s, chan, root, out, cnt, hosts, owners, src)
    else:
        _eng.tree_broadcast(s, chan, root, out, cnt, algo == ALGO_TREE,
                            src if algo == ALGO_TREE else 0, flat and algo == ALGO_TREE)


def allgather(s, algo, chan, out, src, block, off, cnt, hosts, owners=None):
    """Elements [off, off+cnt) of every rank's block (block elements each). owners: as
    allreduce's (hierarchical only)."""
    if algo == ALGO_HIER:
        _eng.hier_allgather(s, chan, out, src, block, off, cnt, hosts, owners)
    elif algo == ALGO_RD:
        _eng.rd_allgather(s, chan, out, src, block, off, cnt)
    elif algo == ALGO_DIRECT:
        _eng.direct_allgather(s, chan, out, src, block, off, cnt)
    else:
        _eng.ring_allgather(s, chan, out, src, block, off, cnt)


def reduce_scatter(s, algo, chan, out, src, block, off, cnt, es, size, hosts, owners=None):
    """Elements [off, off+cnt) of every block; the partial sums go to scratch the schedule
    keeps (within the host then across hosts for the hierarchical one). owners: as
    allreduce's (hierarchical only)."""
    if algo == ALGO_HIER:
        work = np.empty((size + len(hosts)) * cnt * es + 1, np.uint8)
        _eng.hier_reduce_scatter(s, chan, out, src, block, off, cnt, hosts, work, owners)
        return
    work = np.empty(size * cnt * es + 1, np.uint8)
    scatter = _eng.rh_reduce_scatter if algo == ALGO_RD else _eng.ring_reduce_scatter
    scatter(s, chan, out, src, block, off, cnt, work)


def alltoall(s, chan, out, src, block, off, cnt):
    """Pairwise exchange of elements [off, off+cnt) of every block."""
    _eng.direct_alltoall(s, chan, out, src, block, off, cnt)
