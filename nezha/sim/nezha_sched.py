"""Workloads from nezha's own planner and schedule builders: what the engine would run.

For every rank we build the engine's Schedule with the same calls the communicator makes
(planner.allreduce -> slices -> nezha/algorithms/slices.py -> the builders), read its ops
(ops.py) and pair every send with the receive it meets on the peer: ops on one endpoint
run in post order, so the k-th send of rank a to rank b on channel c meets the k-th
receive of b from a on c. Each pair is one transfer; local reductions are CPU tasks;
the ops' dependencies become the tasks' dependencies, and post order on an endpoint
becomes a FULL dependency on the endpoint's previous transfer.
"""
import numpy as np

from nezha._core import engine as _eng
from nezha.algorithms import slices
from nezha.config import Config
from nezha.planner import ALGO_TREE, Planner
from nezha.sim import ops as O
from nezha.sim.fabric import FabricError
from nezha.sim.workload import FULL, STARTED, STREAM, Workload
from nezha.types import DType, ReduceOp

_OUT, _IN = 1 << 44, 2 << 44  # addresses the builders record but the simulator never reads
COLLS = ("allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall", "reduce")


def make_planner(ranks, host_of, nchan, rail_rates=None, nconns=1, overrides=None):
    """nezha's Planner for this layout, in the state it converges to: split by the rails'
    rates (the cost model's prior once every channel has been measured)."""
    if nconns < 1 or nchan < 1:
        # the Planner indexes channel 0 and would fail with an IndexError
        raise FabricError(f"nconns={nconns!r}: needs at least one channel per rail "
                          f"({nchan} channels)")
    cfg = Config._read(dict(overrides or {}), {})
    pl = Planner(nchan, cfg, [f"chan{c}" for c in range(nchan)], ranks)
    pl.set_hosts(list(host_of))
    if rail_rates is not None and cfg["SPLIT"] != "equal":
        rates = [float(rail_rates[c // nconns]) / nconns for c in range(nchan)]
        pl.model.rho = rates  # what apply() would have learned from these rails
    return pl


def plan_of(planner, coll, nbytes, esize=4, root=0):
    """The Plan nezha makes for nbytes of coll (allgather etc.: nbytes of every block)."""
    count = max(int(nbytes) // esize, 1)
    if coll == "allreduce":
        return planner.allreduce(count, esize)
    if coll == "broadcast":
        return planner.broadcast(count, esize, ALGO_TREE, root)
    if coll == "reduce":
        return planner.reduce(count, esize)
    if coll in ("allgather", "reduce_scatter"):
        algo = planner.algorithm(coll, count * esize * planner.ranks)
        return planner.blocks(coll, count, esize, algo)
    if coll == "alltoall":
        return planner.blocks(coll, count, esize, planner.algorithm(coll, count * esize))
    raise ValueError(f"collective={coll!r}: choose one of {', '.join(COLLS)}")


def _build(s, coll, plan, rank, planner, count, es, root):
    """The communicator's build(), for one rank, with fake buffer addresses: the same
    per-slice choice of builder (nezha/algorithms/slices.py)."""
    hier = planner.hier_groups(rank)
    hosts = planner.hier_hosts()
    algo = plan.algo
    starts = []
    for chan, off, cnt in plan.slices:
        starts.append(s.nops)
        o, p = _OUT + off * es, _IN + off * es
        own = planner.rail_owners(chan, coll)  # rail-aligned hierarchical slices (NEZHA_HIER_RAILS)
        if coll == "allreduce":
            slices.allreduce(s, algo, chan, o, p, cnt, es, hier, owners=own)
        elif coll == "reduce":
            slices.reduce(s, algo, chan, root, rank == root, o, p, cnt, es, hier, owners=own)
        elif coll == "broadcast":
            slices.broadcast(s, algo, chan, root, o, p, cnt, hosts, own,
                             planner.flat_tree(chan, cnt * es, root))
        elif coll == "allgather":
            slices.allgather(s, algo, chan, _OUT, _IN, count, off, cnt, hosts, own)
        elif coll == "reduce_scatter":
            slices.reduce_scatter(s, algo, chan, _OUT, _IN, count, off, cnt, es,
                                  planner.ranks, hosts, own)
        elif coll == "alltoall":
            slices.alltoall(s, chan, _OUT, _IN, count, off, cnt)
    return starts


_COLL_ID = {"allreduce": _eng.COLL_ALLREDUCE, "broadcast": _eng.COLL_BROADCAST,
            "reduce": _eng.COLL_REDUCE, "allgather": _eng.COLL_ALLGATHER,
            "reduce_scatter": _eng.COLL_REDUCE_SCATTER, "alltoall": _eng.COLL_ALLTOALL}


def schedules(coll, nbytes, planner, esize=4, root=0, plan=None, with_slices=False):
    """(plan, [ops record array per rank], [header-send mask per rank]) and, with_slices,
    [slice index of every op per rank] (the plan's slices: what a failover vote counts).
    plan: run this plan instead of the planner's (a failover re-run)."""
    plan = plan if plan is not None else plan_of(planner, coll, nbytes, esize, root)
    count = max(int(nbytes) // esize, 1)
    dtype = DType.FLOAT32 if esize == 4 else DType.UINT8
    out, hdr, sl = [], [], []
    for r in range(planner.ranks):
        s = _eng.Schedule(r, planner.ranks, planner.nchan, _COLL_ID[coll], 0, int(dtype),
                          int(ReduceOp.SUM), count, root if coll in ("broadcast", "reduce")
                          else -1, plan.algo, plan.hash)
        starts = _build(s, coll, plan, r, planner, count, esize, root)
        ops = O.read_ops(s)
        sl.append(np.maximum(np.searchsorted(starts, np.arange(len(ops)), "right") - 1, 0))
        # a header send points at the header the Schedule keeps
        hdr.append((ops["kind"] == O.SEND) & (ops["ptr"] == s.header_address()))
        out.append(ops)
        del s
    return (plan, out, hdr, sl) if with_slices else (plan, out, hdr)


def workload(coll, nbytes, planner, esize=4, root=0, plan=None):
    """The Workload nezha would run for nbytes of coll on planner's layout (or `plan`);
    wl.task_slice gives the plan slice of every task."""
    plan, per_rank, hdr, sl = schedules(coll, nbytes, planner, esize, root, plan, True)
    return to_workload(per_rank, hdr, planner.ranks, planner.nchan,
                       label=f"nezha {coll} {plan!r}", slice_of=sl), plan


def to_workload(per_rank, hdr, size, nchan, label="", slice_of=None):
    """Pair sends with receives and turn the ops of every rank into one Workload
    (slice_of: the slice index of every op per rank, kept as wl.task_slice)."""
    lens = np.array([len(o) for o in per_rank])
    off = np.concatenate([[0], np.cumsum(lens)])
    ops = np.concatenate(per_rank) if len(per_rank) else np.zeros(0, O.OP_DTYPE)
    is_hdr = np.concatenate(hdr) if len(hdr) else np.zeros(0, bool)
    rank = np.repeat(np.arange(size), lens)
    g = np.arange(len(ops))
    kind = ops["kind"].astype(np.int64)
    ep = ops["ep"].astype(np.int64)
    peer, chan = ep % size, ep // size
    is_send = kind == O.SEND
    is_recv = (kind == O.RECV) | (kind == O.RECV_REDUCE) | (kind == O.RECV_HDR)
    s_idx, r_idx = g[is_send], g[is_recv]
    s_key = (rank[s_idx] * size + peer[s_idx]) * nchan + chan[s_idx]
    r_key = (peer[r_idx] * size + rank[r_idx]) * nchan + chan[r_idx]
    s_idx = s_idx[np.lexsort((s_idx, s_key))]
    r_idx = r_idx[np.lexsort((r_idx, r_key))]
    s_key = (rank[s_idx] * size + peer[s_idx]) * nchan + chan[s_idx]
    r_key = (peer[r_idx] * size + rank[r_idx]) * nchan + chan[r_idx]
    if len(s_idx) != len(r_idx) or not np.array_equal(s_key, r_key):
        raise ValueError("schedules do not match: some send has no receive on its peer")
    nb = ops["nbytes"].astype(np.float64)
    if not np.array_equal(nb[s_idx], nb[r_idx]):
        raise ValueError("schedules do not match: a send and its receive differ in length")
    M = len(s_idx)
    loc = g[kind == O.LOCAL_REDUCE]
    op2task = np.full(len(ops), -1, np.int64)
    op2task[s_idx] = np.arange(M)
    op2task[r_idx] = np.arange(M)
    op2task[loc] = M + np.arange(len(loc))
    t_kind = np.concatenate([np.zeros(M, np.int8), np.ones(len(loc), np.int8)])
    # headers leave with their data's first segment: they cost nothing of their own
    t_bytes = np.concatenate([np.where(is_hdr[s_idx], 0.0, nb[s_idx]), nb[loc]])
    t_src = np.concatenate([rank[s_idx], rank[loc]])
    t_dst = np.concatenate([peer[s_idx], rank[loc]])
    t_chan = np.concatenate([chan[s_idx], ops["chan"][loc].astype(np.int64)])
    t_reduce = np.concatenate([kind[r_idx] == O.RECV_REDUCE, np.ones(len(loc), bool)])
    # the ops' own dependencies
    dt, dp, dk = [], [], []
    for field in ("dep0", "dep1"):
        d = ops[field].astype(np.int64)
        has = d >= 0
        gi = g[has]
        pred = off[rank[gi]] + d[has]
        fl = ops["flags"][gi]
        same = nb[pred] == nb[gi]
        k = np.where(fl & O.DEP_FULL, FULL, np.where(fl & O.DEP_STARTED, STARTED,
                                                      np.where(same, STREAM, FULL)))
        dt.append(op2task[gi]); dp.append(op2task[pred]); dk.append(k)
    # post order on an endpoint
    fifo = np.flatnonzero(s_key[1:] == s_key[:-1]) + 1
    dt.append(fifo); dp.append(fifo - 1); dk.append(np.full(len(fifo), FULL))
    deps = tuple(np.concatenate(x) for x in (dt, dp, dk))
    wl = Workload(size, t_kind, t_bytes, t_src, t_dst, t_chan, t_reduce, deps, label=label)
    if slice_of is not None:
        so = np.concatenate(slice_of) if len(slice_of) else np.zeros(0, np.int64)
        wl.task_slice = np.concatenate([so[s_idx], so[loc]]).astype(np.int64)
    return wl
