"""The event-driven flow-level network: tasks start when their dependencies allow, flows
share links max-min fairly, rates are recomputed whenever a flow starts or finishes or a
link fails.

Time of a transfer = its latency (path latency plus the software alpha of its rail) + its
bytes at the rate the network gives it. A STREAM dependant (the ring's pipeline) starts
when its dependency has started and is held to its dependency's rate while that runs.
A task may carry a rate cap of its own (wl.rate_cap, B/s: an INA rank's window of credits
over its round trip, nezha/sim/ina_sched.py). Events are coalesced: at the next finish,
every flow that would finish within tol of its own duration later finishes too, and starts
due within tol of a typical transfer's time happen together. No transfer ends earlier than
it should by more than tol of its own time, so the collective's time is low by at most
about tol; it keeps ECMP's thousands of distinct finishing times, and a desynchronised
512-rank ring, to a few hundred events.
"""
import time

import numpy as np

from nezha.sim.fabric import FabricError
from nezha.sim.maxmin import maxmin
from nezha.sim.routing import Routing
from nezha.sim.workload import FULL, NET, STREAM

WAIT, PENDING, ACTIVE, DONE = 0, 1, 2, 3


class Failure:
    """Link `link` fails at `at` seconds; flows on it are rerouted `delay` seconds later
    (ECMP: routing convergence; Ethereal and spraying: a retransmission timeout). delay
    None: never rerouted (a rail cut: nezha's failover re-runs the work, nezha/sim/failover.py)."""

    def __init__(self, at, link, delay=None):
        self.at, self.link = float(at), int(link)
        self.delay = None if delay is None else float(delay)


class Result:
    """What a simulation measured."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def summary(self):
        """A dict of the scalar results."""
        return {k: v for k, v in self.__dict__.items() if np.isscalar(v) or v is None}


def _csr(keys, vals, n):
    order = np.argsort(keys, kind="stable")
    return np.searchsorted(keys[order], np.arange(n + 1)), [v[order] for v in vals]


def _gather(ptr, items, sel):
    lo, hi = ptr[sel], ptr[sel + 1]
    cnt = hi - lo
    idx = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()))
    return np.repeat(np.arange(len(sel)), cnt), [it[idx] for it in items]


def _resplit_unstarted(rt, hit, state, tf_ptr, tf_flow, rem, frac):
    """Ethereal after a path failed: a transfer not started yet belongs to a later batch,
    which the artifact splits over the good paths only. A transfer cut into pieces over all
    s paths is cut over the s-1 others instead: the dead path's piece gives its bytes to
    its siblings equally (each then carries 1/(s-1), what the split over s-1 paths gives).
    Returns the flows still to move (started transfers and whole flows: one random path)."""
    fresh = (state[rt.flow_task[hit]] < ACTIVE)
    keep = np.ones(len(hit), bool)
    dead = set(hit.tolist())
    for i in np.flatnonzero(fresh):
        f = hit[i]
        t = rt.flow_task[f]
        sib = tf_flow[tf_ptr[t]:tf_ptr[t + 1]]
        sib = np.array([x for x in sib if x not in dead and x != f], np.int64)
        if not len(sib):
            continue
        rem[sib] += rem[f] / len(sib)
        frac[sib] += frac[f] / len(sib)
        rem[f] = 0.0
        frac[f] = 0.0
        keep[i] = False
    return hit[keep]


def _check_knobs(alpha, tol, nconns):
    """A negative alpha or tol puts events before now and the loop never ends: refuse them,
    naming the parameter, as the fabric refuses its own."""
    a = np.asarray(alpha, np.float64)
    if not (np.isfinite(a).all() and (a >= 0).all()):
        raise FabricError(f"alpha={alpha!r}: must be finite and not negative (s per transfer)")
    if not (np.isfinite(tol) and tol >= 0):
        raise FabricError(f"tol={tol!r}: must be finite and not negative")
    if nconns < 1:
        raise FabricError(f"nconns={nconns!r}: needs at least one channel per rail")


def simulate(wl, fabric, host_of, scheme="ecmp", nconns=1, alpha=0.0, failures=(), tol=1e-2,
             seed=0, flow_key=None, routing=None, max_events=10_000_000, stall_ok=False,
             buckets=None):
    """Run workload wl on fabric; returns a Result (time = when the last task finished).

    alpha: software latency per transfer (s), one number or one per rail. stall_ok: when
    nothing can move any more (flows on a failed link that is never rerouted, and what
    waits on them), stop and return what finished (Result.stalled, t_end NaN for the rest)
    instead of raising. buckets: token buckets on links (bucket.Buckets, the lab's tbf);
    their tokens move with the run and are left as the run ends them (the next run goes on
    from there)."""
    wall0 = time.perf_counter()
    _check_knobs(alpha, tol, nconns)
    failed0 = set(fabric.failed)
    rt = routing or Routing(wl, fabric, host_of, scheme, nconns, seed, flow_key)
    T, F = wl.ntasks, rt.nflows
    cap = fabric.cap.astype(np.float64).copy()
    for link in fabric.failed:
        cap[link] = 0.0
    # latency per task: its slowest piece's path, plus the rail's software alpha
    fl, lk, w = rt.gather(np.arange(F))
    flow_lat = np.bincount(fl, fabric.lat[lk] * w, minlength=F)
    lat = np.zeros(T)
    np.maximum.at(lat, rt.flow_task, flow_lat)
    alpha = np.broadcast_to(np.asarray(alpha, np.float64), (max(fabric.rails, 1),))
    net = (wl.kind == NET) & (wl.nbytes > 0)
    lat[net] += alpha[np.minimum(wl.chan[net] // nconns, len(alpha) - 1)]
    lat[wl.nbytes <= 0] = 0.0
    # successors of every task, stream predecessors of every task, flows of every task
    s_ptr, (s_task, s_kind) = _csr(wl.dep_pred, [wl.dep_task, wl.dep_kind], T)
    st = wl.dep_kind == STREAM
    st_ptr, (st_pred,) = _csr(wl.dep_task[st], [wl.dep_pred[st]], T)
    tf_ptr, (tf_flow,) = _csr(rt.flow_task, [np.arange(F)], T)
    need = np.bincount(wl.dep_task, minlength=T)
    flows_left = np.bincount(rt.flow_task, minlength=T)
    state = np.zeros(T, np.int8)
    t_start = np.full(T, np.nan)
    t_end = np.full(T, np.nan)
    rem = rt.flow_bytes.astype(np.float64).copy()
    frac = rt.flow_bytes / np.maximum(wl.nbytes[rt.flow_task], 1e-300)
    task_cap = wl.rate_cap  # B/s per task (np.inf: none), or None
    if task_cap is not None:
        task_cap = np.asarray(task_cap, np.float64)
        if task_cap.shape != (T,) or (task_cap <= 0).any() or np.isnan(task_cap).any():
            raise FabricError(f"rate_cap: one positive rate (B/s) or inf per task ({T} tasks)")
    link_bytes = np.zeros(fabric.nlinks)
    # time quantum: tol of a typical transfer
    typical = np.median(wl.nbytes[net] / np.median(fabric.cap) + lat[net]) if net.any() else 0.0
    q = tol * typical

    act = np.zeros(0, np.int64)      # active flows
    pend = np.zeros(0, np.int64)     # tasks waiting for their latency
    pend_t = np.zeros(0)
    fails = sorted(failures, key=lambda f: f.at)
    timers = [(f.at, "fail", f) for f in fails] + [(f.at + f.delay, "reroute", f) for f in fails
                                                     if f.delay is not None]
    timers.sort(key=lambda x: x[0])
    rng = np.random.default_rng(seed)
    now, events, nrates = 0.0, 0, 0
    stalled = False

    def release(tasks, kinds):
        nonlocal pend, pend_t
        if not len(tasks):
            return
        _, (succ, k) = _gather(s_ptr, [s_task, s_kind], tasks)
        keep = k == kinds[0]
        for kind in kinds[1:]:  # one or two kinds: np.isin's sort costs more
            keep |= k == kind
        succ = succ[keep]
        if not len(succ):
            return
        np.subtract.at(need, succ, 1)
        ready = np.unique(succ[(need[succ] == 0) & (state[succ] == WAIT)])
        state[ready] = PENDING
        # np.concatenate: np.r_ costs ~10x more per call, and this runs per event
        pend = np.concatenate((pend, ready))
        pend_t = np.concatenate((pend_t, now + lat[ready]))

    def finish(tasks):
        state[tasks] = DONE
        t_end[tasks] = now
        release(tasks, (FULL,))

    def start(tasks):
        nonlocal act
        state[tasks] = ACTIVE
        t_start[tasks] = now
        _, (fs,) = _gather(tf_ptr, [tf_flow], tasks)
        act = np.concatenate((act, fs))
        release(tasks, (STREAM, 2))
        empty = tasks[flows_left[tasks] == 0]
        if len(empty):
            finish(empty)

    state[need == 0] = PENDING
    pend = np.flatnonzero(need == 0)
    pend_t = lat[pend].copy()
    while True:
        # everything due now (cascades: zero-latency tasks start at once)
        while len(pend):
            due = pend_t <= now + q
            if not due.any():
                break
            tasks = pend[due]
            pend, pend_t = pend[~due], pend_t[~due]
            start(tasks)
        while timers and timers[0][0] <= now + q:
            _, what, f = timers.pop(0)
            if what == "fail":
                fabric.failed.add(f.link)
                cap[f.link] = 0.0
            else:
                fl, lk, _ = rt.gather(np.arange(F))
                hit = np.unique(fl[lk == f.link])
                hit = hit[state[rt.flow_task[hit]] != DONE]
                if rt.scheme == "ethereal":
                    hit = _resplit_unstarted(rt, hit, state, tf_ptr, tf_flow, rem, frac)
                rt.reroute(hit, wl, rng)
        if not len(act) and not len(pend) and not timers:
            break
        events += 1
        if events > max_events:
            raise RuntimeError(f"more than {max_events} events; raise tol")
        # rates of the active flows, stream dependants held to their dependency's rate
        rate = np.zeros(len(act))
        ceff = buckets.caps(cap) if buckets is not None else cap
        if len(act):
            fl, lk, w = rt.gather(act)
            atask = rt.flow_task[act]
            # a task's own rate cap (an INA rank's window of credits), shared by its pieces
            base = None if task_cap is None else task_cap[atask] * frac[act]
            rate = maxmin(len(act), fl, lk, w, ceff, base)
            nrates += 1
            owner, (pred,) = _gather(st_ptr, [st_pred], atask)
            live = state[pred] == ACTIVE
            if live.any():
                owner, pred = owner[live], pred[live]
                for _ in range(2):
                    trate = np.zeros(T)
                    np.add.at(trate, atask, rate)
                    fcap = np.full(len(act), np.inf) if base is None else base.copy()
                    np.minimum.at(fcap, owner, trate[pred] * frac[act[owner]])
                    if (rate <= fcap * (1 + 1e-9)).all():
                        break
                    rate = maxmin(len(act), fl, lk, w, ceff, fcap)
                    nrates += 1
        # next event
        with np.errstate(divide="ignore", invalid="ignore"):
            t_fin = np.where(rem[act] <= 0, 0.0, np.where(rate > 0, rem[act] / rate, np.inf))
        dt = t_fin.min() if len(act) else np.inf
        if len(pend):
            dt = min(dt, pend_t.min() - now)
        if timers:
            dt = min(dt, timers[0][0] - now)
        if buckets is not None:
            use = (np.bincount(lk, w * rate[fl], minlength=fabric.nlinks) if len(act)
                   else np.zeros(fabric.nlinks))
            dt = min(dt, buckets.until_empty(use))
        if not np.isfinite(dt) and stall_ok:
            stalled = True
            break
        if not np.isfinite(dt):
            stuck = rt.flow_task[act[:5]]
            raise RuntimeError(f"the simulation stalls at t={now:.6g}s: tasks {stuck.tolist()} "
                               "have no capacity (a failed link with no reroute?)")
        dt = max(dt, 0.0)
        if buckets is not None:
            buckets.advance(use, dt)
        moved = np.minimum(rate * dt, rem[act])
        fl, lk, w = rt.gather(act)
        link_bytes += np.bincount(lk, w * moved[fl], minlength=fabric.nlinks)
        rem[act] -= moved
        now += dt
        # a flow due within tol of its own duration goes now too (at most tol early)
        late = t_fin - dt
        done = np.isfinite(late) & (late <= tol * (now - t_start[rt.flow_task[act]] + late) + q)
        if done.any():
            fin = act[done]
            rest = rem[fin]
            if rest.any():  # finished early by at most q: count their last bytes too
                fl2, lk2, w2 = rt.gather(fin)
                link_bytes += np.bincount(lk2, w2 * rest[fl2], minlength=fabric.nlinks)
            rem[fin] = 0.0
            act = act[~done]
            ft = rt.flow_task[fin]
            np.subtract.at(flows_left, ft, 1)
            tasks = np.unique(ft[flows_left[ft] == 0])
            if len(tasks):
                finish(tasks)
    fabric.failed = failed0
    if not stall_ok and (state != DONE).any():
        left = np.flatnonzero(state != DONE)
        raise RuntimeError(f"{len(left)} tasks never ran (a dependency cycle or a send "
                           f"without a receive), e.g. task {int(left[0])}")
    return Result(time=float(np.nanmax(t_end)) if T and not np.isnan(t_end).all() else 0.0,
                  stalled=stalled or bool((state != DONE).any()), events=events, rate_solves=nrates,
                  tasks=T, flows=F, wall=time.perf_counter() - wall0, t_start=t_start,
                  t_end=t_end, link_bytes=link_bytes, routing=rt, scheme=scheme)
