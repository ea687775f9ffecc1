"""A rail cut during a collective, as nezha's failover handles it (nezha/failover.py), in the
flow model: what the failover bench (bench/failover.py) measures as "extra".

The sequence the model follows, for a cut of one host's rail (both directions) at time `at`
after the collective started (negative: before it started):
1. From the cut the rail's links carry nothing. Flows on them stall; so does everything that
   waits on them (the ring of every slice on that rail). Bytes a sender had written into
   its socket's send buffer but the receiver never got are lost with the rail: in a flow
   model a transfer counts only once delivered, so a slice with such bytes is unfinished.
2. The surviving rail goes on with its own slices (they do not depend on the dead one).
3. Detection: the engine checks for silence only when nothing moves (nz_progress), so a rank
   declares the rail dead at max(cut + NEZHA_RAIL_TIMEOUT, its live work done); a socket
   error (`detect="error"`) makes that max(cut, live work done).
4. A vote (a control round; `vote` seconds, with the silence check's wake-up granularity)
   agrees on the unfinished slices: every slice with an op not complete on some rank.
5. Those slices are cut again over the live channels (planner.resplit) and re-run, whole,
   with nezha's own builders, on the surviving rail.

extra = (re-run end) - ideal, ideal = two-rail time until the cut plus the rest at the
one-rail speed (the bench's definition, from the simulated two- and one-rail times).

What is re-sent, by the engine's rules (nezha/failover.py, Failover.agree): every rank
votes the slices with an op of its own not complete (a send counts once written into its
socket, a receive once every byte is in); the ranks OR the votes (_unfinished_at), so a
slice is re-run, whole, when some transfer of it was not delivered. Ops on an endpoint run
in post order (nezha_engine.h), so past the slice in flight a sender can only have written
the next slice's first bytes into its socket: never finished, so never an extra slice
beyond those not delivered at the cut. The re-run is planner.resplit of those slices over
the live channels (1 MiB pieces: the same offsets, on the surviving rail) through the
communicator's engine, once every rank has finished its live slices and voted again
(a rank still moving votes VOTE_RUNNING and all resume first). vote_table() builds each
rank's vote from the flow model and the failover code reads it.

When the data starts (start=): the bench times comm.allreduce on rank 0, and before a
striped collective with failover moves a byte every rank copies its in-place input for
the re-run (executor._execute: np.copyto(snap, src)). So a cut at t on the bench's clock
lands t - start into the data, and the hit collective and the bench's references all carry
start (snapshot_s: nbytes at the copy rate of 4 ranks on this machine's 2 cores).

A small collective placed whole on one channel is lazy (nezha/failover.py, lazy_ok): no vote
closes it, so nothing but silence tells a rank the rail is gone (predict_lazy):
1. The collective the cut lands in, or the next one, stalls: its ops on the dead rail wait.
2. A rank's engine looks for silence once it has spun SPIN_US with nothing moving
   (nz_progress). Its sends of the stalled collective went into socket buffers, so the first
   look stamps the peer as heard (data_heard) then: silence counts from stall + spin.
3. A peer counts as silent on the rail only once a heartbeat from it on another rail is more
   than RAIL_TIMEOUT newer (nz_rail_silent: a cut is silence on one rail while the peer talks
   on another). Heartbeats come every HEARTBEAT from each peer's health thread, at a phase
   of its own, so detection is at stall + spin + RAIL_TIMEOUT + the first phase to come up
   among the silent peers: the cut host's peers in the schedule (the host watches them) and
   the host itself (they watch it). With k of them, the wait is the minimum of k uniforms
   over [0, HEARTBEAT): mean HEARTBEAT/(k+1).
4. Then the vote and the re-run on the surviving rail, as for a striped collective.
"""
import functools
import gzip
import json
import os

import numpy as np

from nezha.failover import LAZY_MAX_BYTES, _bits, _voted_slices
from nezha.planner import Plan
from nezha.sim import fabric as F
from nezha.sim import failstats as FS
from nezha.sim import nezha_sched as N
from nezha.sim import network as NW
from nezha.sim.workload import NET

# Fixed cost after detection: the vote's control rounds plus the engine's wake-up to look
# for silence (every RAIL_TIMEOUT/4 + 1 ms). Fitted: the 1 KiB bench rows (65.2 / 65.4 ms
# extra, README "Rail failure") minus the 60 ms timeout and the 1 KiB re-run. The lab's
# events put detection -> rail marked dead at 2.7 ms and -> re-run done at 1-5 ms more
# (docs/sim.md, "lazy collectives"): Python and 4 ranks on 2 cores, not in the flow model.
VOTE_S = 5.0e-3
HEARTBEAT_S = 0.01   # NEZHA_HEARTBEAT's default
SPIN_S = 200e-6      # NEZHA_SPIN_US's default
# The vote sends one STATUS per peer on the first rail the planner still has (nz_vote_wait),
# and the first vote after a cut is taken before the rail is marked dead: when the cut rail
# is that first one, the copies to and from the cut host are lost and go again on every
# rail after NZ_VOTE_RESEND_NS (include/nezha/nezha_engine.h). Since 07ae496 (session 14's
# "cheaper vote"); before it every rail carried a copy (resend=False).
VOTE_RESEND_S = 2e-3
# The failover snapshot of an in-place input (executor._execute: np.copyto into a spare
# buffer, every rank at once): per-process copy rate with 4 processes on this 2-core VM,
# 64 MiB (docs/results/session15/memcpy_limit.txt: 1.76 GB/s; 1 process: 7.22). 38 ms
# for 64 MiB, before the data moves.
SNAPSHOT_BPS = 1.76e9


def snapshot_s(nbytes, rate=None, procs=4):
    """Seconds every rank copies its in-place input before a voting collective runs: at
    `rate` B/s, or SNAPSHOT_BPS shared by `procs` processes as 4 share it (memcpy_limit:
    the aggregate stays ~7 GB/s from 1 to 4 processes; 8 are extrapolated)."""
    rate = rate if rate else SNAPSHOT_BPS * 4 / procs
    return nbytes / rate if nbytes > LAZY_MAX_BYTES else 0.0


def vote_table(wl, done, ranks, coll=0):
    """Every rank's vote after a cut, as Failover.agree makes it: (collective, mask of the
    slices with an op of its own not complete, flags). A rank's ops are its sends, its
    receives and its reductions (the transfers it is src or dst of); a task not done (the
    flow model: not delivered) leaves the op incomplete on the receiver, so the OR over
    ranks is every slice with an undelivered transfer."""
    bad = ~done
    masks = []
    for r in range(ranks):
        mine = bad & ((wl.src == r) | (wl.dst == r))
        m = 0
        for i in np.unique(wl.task_slice[mine]).tolist():
            m |= 1 << int(i)
        masks.append((coll, m, 0))
    return masks


def _planner(hosts, rates_Bps, alive=None, piece=1 << 20, rph=1):
    host_of = np.repeat(np.arange(hosts), rph)
    pl = N.make_planner(hosts * rph, host_of, len(rates_Bps), rates_Bps)
    pl.piece_bytes = piece  # the communicator's with failover on: max(MIN_RAIL_PIECE, 1 MiB)
    if alive is not None:
        pl.alive = list(alive)
        pl.model.set_channels(pl.alive)
    return pl


def _sim(wl, fab, alpha, failures=(), stall_ok=False, rph=1):
    return NW.simulate(wl, fab, np.repeat(np.arange(fab.hosts), rph), "rail", 1, alpha,
                       failures, tol=1e-4,
                       stall_ok=stall_ok)


@functools.lru_cache(maxsize=256)
def _references(hosts, rates_gbps, nbytes, cut_rail, alpha, piece, rph=1):
    """(two-rail, one-rail) simulated times of an allreduce without a cut, the rails left
    after cut_rail's for the second: the same for every cut of a size, and most of
    compare()'s time when simulated per cut (the flow model is deterministic)."""
    rates = [g * 1e9 / 8 for g in rates_gbps]
    fab = F.MultiRail(hosts, len(rates), list(rates_gbps), 0.0)
    alive = [c != cut_rail for c in range(len(rates))]
    out = []
    for a in (None, alive):
        wl, _ = N.workload("allreduce", nbytes, _planner(hosts, rates, a, piece, rph))
        out.append(_sim(wl, fab, alpha, rph=rph).time)
    return tuple(out)


def phase_wait(k, heartbeat=HEARTBEAT_S, q=None):
    """Seconds from the silence running out to the first heartbeat on another rail among k
    silent peers (independent phases, uniform over a heartbeat): the mean, or quantile q."""
    if k <= 0:
        return 0.0
    return heartbeat / (k + 1) if q is None else heartbeat * (1 - (1 - q) ** (1 / k))


def predict(hosts, rates_gbps, nbytes, cut_host, cut_rail, at, timeout=0.06, vote=VOTE_S,
            alpha=0.0, detect="silence", piece=1 << 20, heartbeat=HEARTBEAT_S, spin=SPIN_S,
            phase_q=None, phase_silence=True, resend=True, start=0.0, ref_start=None, rph=1,
            plan_rates=None):
    """One cut: a dict with the simulated two-rail and one-rail times, when the cut slices
    were detected and re-run, and the extra time over the bench's ideal (seconds). A lazy
    plan of one slice (small) goes to the lazy model (a small striped one, lazy too since
    session 20, keeps the striped model: silence, a vote, its unfinished slices re-run):
    heartbeat, spin and phase_q (None: the mean phase wait; q: that quantile) are its
    parameters; striped plans ignore them.
    resend: the vote waits VOTE_RESEND_S more when the cut rail is rail 0 (the code since
    the one-copy vote; False for runs before it). start: seconds from the bench's clock
    start to the data moving (snapshot_s; striped plans): `at` is on the bench's clock,
    the cut lands at - start into the data, and took, detected and the ideal's two- and
    one-rail times all carry start (ref_start, when given, for the ideal's: the bench's
    references are medians over calls whose start varies). rph: ranks per host (striped
    plans; the lazy model has one). plan_rates (Gbit/s per rail, striped plans): the hit
    call's plan is the planner's for these rates instead of the fabric's (a call right after
    a re-admission, planned unevenly: plan_for_ops); the fabric, the references and the
    re-run keep rates_gbps."""
    if resend and cut_rail == 0:
        vote += VOTE_RESEND_S
    R = len(rates_gbps)
    F._need(R >= 2, "rails", R, "failover needs a rail to go to")
    F._need(0 <= cut_rail < R, "cut_rail", cut_rail, f"no such rail (0..{R - 1})")
    F._need(0 <= cut_host < hosts, "cut_host", cut_host, f"no such host (0..{hosts - 1})")
    F._need(detect in ("silence", "error"), "detect", detect, "silence or error")
    F._need(start >= 0, "start", start, "seconds before the data moves, >= 0")
    F._need(rph >= 1, "ranks_per_host", rph, "at least 1")
    rates = [g * 1e9 / 8 for g in rates_gbps]
    fab = F.MultiRail(hosts, R, list(rates_gbps), 0.0)
    alive = [c != cut_rail for c in range(R)]
    # the bench's references: two rails, and the surviving rails alone
    prates = rates if plan_rates is None else [g * 1e9 / 8 for g in plan_rates]
    wl2, plan = N.workload("allreduce", nbytes, _planner(hosts, prates, piece=piece, rph=rph))
    if len(plan.slices) == 1 and nbytes <= LAZY_MAX_BYTES:
        F._need(rph == 1, "ranks_per_host", rph, "the lazy model has one rank per host")
        return _predict_lazy(hosts, rates, fab, wl2, plan, nbytes, cut_host, cut_rail, at,
                             timeout, vote, alpha, detect, piece, heartbeat, spin, phase_q)
    host_of = np.repeat(np.arange(hosts), rph)
    t2, t1 = _references(hosts, tuple(rates_gbps), nbytes, cut_rail, alpha, piece, rph)
    # the hit collective: the rail's links fail at the cut (on the data's clock) and are
    # never rerouted
    at_data = at - start
    cut = max(at_data, 0.0)
    fails = [NW.Failure(cut, fab.up[cut_rail, cut_host]),
             NW.Failure(cut, fab.down[cut_rail, cut_host])]
    r = _sim(wl2, fab, alpha, fails, stall_ok=True, rph=rph)
    done = ~np.isnan(r.t_end)
    live_done = float(np.nanmax(r.t_end)) if done.any() else 0.0
    # what the ranks vote unfinished, read by the failover code's own rule
    table = vote_table(wl2, done, hosts * rph)
    unfinished = list(_bits(_voted_slices(table, 0, len(plan.slices), 0, "the hit allreduce")))
    # silence: the same rule as a lazy collective's (nz_rail_silent), from the cut; the
    # first heartbeat phase among the cut host's peers on that rail, and the spin before a
    # rank looks (phase_silence=False: the timeout alone, as the model had it before)
    wait = 0.0
    if detect == "silence" and phase_silence:
        net = wl2.kind == NET
        on = (host_of[wl2.src] == cut_host) | (host_of[wl2.dst] == cut_host)
        mine = net & (wl2.chan == cut_rail) & on
        k = len(set(wl2.src[mine].tolist()) | set(wl2.dst[mine].tolist()))
        wait = spin + phase_wait(k, heartbeat, phase_q)
    detected = max(at_data + (timeout + wait if detect == "silence" else 0.0), live_done)
    rerun_slices = []
    if len(unfinished):
        pl = _planner(hosts, rates, alive, piece, rph)
        failed = [plan.slices[i] for i in unfinished]
        rerun_slices = pl.resplit(failed, plan.esize)
        rplan = Plan(rerun_slices, plan.algo, None, plan.esize)
        wlr, _ = N.workload("allreduce", nbytes, pl, plan=rplan)
        rerun = _sim(wlr, fab, alpha, rph=rph).time
        end = detected + vote + rerun
    else:  # every slice finished before the cut was noticed: nothing to re-run
        rerun, end = 0.0, max(r.time, live_done)
    # on the bench's clock: every collective starts `start` before its data moves
    ref = start if ref_start is None else ref_start
    T2, T1 = ref + t2, ref + t1
    before = min(max(at, 0.0), T2)
    ideal = before + (1 - before / T2) * T1 if T2 else T1
    return {"nbytes": nbytes, "at_ms": at * 1e3, "cut_host": cut_host, "cut_rail": cut_rail,
            "two_rail_ms": t2 * 1e3, "one_rail_ms": t1 * 1e3, "slices": len(plan.slices),
            "unfinished": len(unfinished), "live_done_ms": (start + live_done) * 1e3,
            "detected_ms": (start + detected) * 1e3, "rerun_ms": rerun * 1e3,
            "took_ms": (start + end) * 1e3, "ideal_ms": ideal * 1e3,
            "extra_ms": (start + end - ideal) * 1e3, "start_ms": start * 1e3,
            "rerun_slices": rerun_slices,
            "rerun_bytes": sum(c for _, _, c in rerun_slices) * plan.esize}


@functools.lru_cache(maxsize=256)
def _plan_ops(hosts, nbytes, plan_rates, piece=1 << 20, rph=1):
    """The planner's plan for plan_rates (Gbit/s per rail): the ops on each rail as the
    engine traces count them (a send on one rank and its receive on another: twice the
    model's network transfers), the slices on each rail, and the network bytes on each
    rail counted the same way (twice the transfers' bytes)."""
    rates = [g * 1e9 / 8 for g in plan_rates]
    wl, plan = N.workload("allreduce", nbytes, _planner(hosts, rates, piece=piece, rph=rph))
    net = wl.kind == NET
    ops = tuple(2 * int(np.count_nonzero(net & (wl.chan == c))) for c in range(len(rates)))
    slices = tuple(sum(1 for s in plan.slices if s[0] == c) for c in range(len(rates)))
    nb = tuple(2 * int(wl.nbytes[net & (wl.chan == c)].sum()) for c in range(len(rates)))
    return ops, slices, nb


# the lab's byte share of a rail may differ from the plan's by the headers the engine sends
# (2 x 32 B per channel and rank): far under this (about 80 KB of a 64 MiB call's 800 MB)
BYTES_TOL = 2e-4


def plan_for_ops(hosts, nbytes, rail_ops, rates_gbps=(0.4, 0.4), piece=1 << 20, rph=1,
                 step=0.0025, rail_bytes=None):
    """The hit call's plan, read back from its trace: the ops each rail had (summed over
    the ranks, failstats.same_call's rail_ops). None if the planner's plan for rates_gbps
    has those counts (the even split on equal rails). Else planner rates (Gbit/s) whose
    plan has them: the lighter rail's rate scaled by the middle of the range of shares that
    give them (the planner splits the bytes in the rates' ratio; the ops alone do not say
    where inside that range, a few % of a slice). rail_bytes (the network bytes per rail,
    same_call's rail_bytes, files since session 31): the share whose plan moves those bytes
    on each rail (to BYTES_TOL of the total), found by bisection, so the split is exact; an
    even op count with uneven bytes (a share of 0.94: 32 + 32 slices, 48.5 % of the bytes)
    is then read as the uneven plan it was. Raises ValueError when no share gives the
    counts (two rails)."""
    rail_ops = tuple(int(x) for x in rail_ops)
    rates_gbps = tuple(rates_gbps)
    even_ops, _, even_b = _plan_ops(hosts, nbytes, rates_gbps, piece, rph)
    if rail_bytes is not None:
        tot = float(sum(rail_bytes))
        F._need(tot > 0, "rail_bytes", rail_bytes, "bytes per rail, not all 0")
        if even_ops == rail_ops and all(abs(b / tot - e / sum(even_b)) <= BYTES_TOL
                                        for b, e in zip(rail_bytes, even_b)):
            return None
        F._need(len(rates_gbps) == 2, "rails", len(rates_gbps), "an uneven plan on two rails")
        light = int(np.argmin(rail_bytes))
        want = rail_bytes[light] / tot

        def frac(share):
            pr = list(rates_gbps)
            pr[light] = rates_gbps[light] * share
            b = _plan_ops(hosts, nbytes, tuple(pr), piece, rph)[2]
            return b[light] / sum(b), tuple(pr)
        lo, hi = 0.3, 1.0  # the light rail's byte share grows with its rate
        for _ in range(30):
            mid = (lo + hi) / 2
            if frac(mid)[0] < want:
                lo = mid
            else:
                hi = mid
        best = min((frac(lo), frac(hi)), key=lambda x: abs(x[0] - want))
        if (abs(best[0] - want) > BYTES_TOL
                or _plan_ops(hosts, nbytes, best[1], piece, rph)[0] != rail_ops):
            raise ValueError(f"no plan of {nbytes} B has {rail_ops} ops and "
                             f"{list(rail_bytes)} bytes per rail")
        return best[1]
    if even_ops == rail_ops:
        return None
    F._need(len(rates_gbps) == 2, "rails", len(rates_gbps), "an uneven plan on two rails")
    light = int(np.argmin(rail_ops))
    hits = []
    for i in range(1, int(0.7 / step)):
        share = 1.0 - i * step
        pr = list(rates_gbps)
        pr[light] = rates_gbps[light] * share
        if _plan_ops(hosts, nbytes, tuple(pr), piece, rph)[0] == rail_ops:
            hits.append(share)
        elif hits:
            break
    if not hits:
        raise ValueError(f"no plan of {nbytes} B has {rail_ops} ops per rail")
    pr = list(rates_gbps)
    pr[light] = rates_gbps[light] * (hits[0] + hits[-1]) / 2
    return tuple(pr)


@functools.lru_cache(maxsize=256)
def _rail_last(hosts, rates_gbps, plan_rates, nbytes, rail, alpha, piece, rph=1):
    """Seconds to `rail`'s last network transfer in an uncut call with the planner's plan
    for plan_rates on the fabric of rates_gbps: the model's L (failstats.same_call's T2)."""
    rates = [g * 1e9 / 8 for g in plan_rates]
    fab = F.MultiRail(hosts, len(rates_gbps), list(rates_gbps), 0.0)
    wl, _ = N.workload("allreduce", nbytes, _planner(hosts, rates, piece=piece, rph=rph))
    r = _sim(wl, fab, alpha, rph=rph)
    return float(np.nanmax(r.t_end[(wl.kind == NET) & (wl.chan == rail)]))


@functools.lru_cache(maxsize=256)
def _rail_finishes(hosts, rates_gbps, plan_rates, nbytes, rail, alpha, piece, rph=1):
    """An uncut call with the planner's plan for plan_rates (None: rates_gbps) on the
    fabric of rates_gbps: `rail`'s network transfers' finish times, sorted, and the share of
    the rail's bytes done at each."""
    rates = [g * 1e9 / 8 for g in (plan_rates or rates_gbps)]
    fab = F.MultiRail(hosts, len(rates_gbps), list(rates_gbps), 0.0)
    wl, _ = N.workload("allreduce", nbytes, _planner(hosts, rates, piece=piece, rph=rph))
    r = _sim(wl, fab, alpha, rph=rph)
    mine = (wl.kind == NET) & (wl.chan == rail)
    order = np.argsort(r.t_end[mine], kind="stable")
    t = r.t_end[mine][order]
    b = np.cumsum(wl.nbytes[mine][order])
    return t, b / b[-1]


def time_at_bytes(hosts, rates_gbps, plan_rates, nbytes, rail, done, alpha=0.0,
                  piece=1 << 20, rph=1):
    """Seconds into the model's uncut call (plan_rates as in predict) at which `rail` has
    moved the share `done` of its bytes, and no more: between the finish of the last
    transfer that share covers and the next one's (the middle). The lab's rail moved that
    share by the cut (failstats.same_call's rail_bytes_at_cut over rail_bytes), so a cut
    here loses the same work on it."""
    t, cum = _rail_finishes(hosts, tuple(rates_gbps), plan_rates, nbytes, rail, alpha,
                            piece, rph)
    m = int(np.searchsorted(cum, done + 1e-9, side="right"))  # transfers wholly done
    if m == 0:
        return float(t[0]) / 2
    if m >= len(t):
        return float(t[-1])
    return float(t[m - 1] + t[m]) / 2


def _predict_lazy(hosts, rates, fab, wl, plan, nbytes, cut_host, cut_rail, at, timeout,
                  vote, alpha, detect, piece, heartbeat, spin, phase_q):
    """A lazy collective (module docstring, "lazy"): the cut stalls it from max(at, 0), at
    the latest from its end (the lab's small collectives take microseconds against
    milliseconds of failover, so the cut lands between two or in one: either way the one
    running from then stalls whole). One rank per host: the workload's ranks are hosts."""
    t2, t1 = _references(hosts, tuple(fab.rates), nbytes, cut_rail, alpha, piece)
    # no later than the collective's end: the bench's row did stall, so a cut stamped after
    # it ends (the stamp lags lab.fail) landed before
    stall = min(max(at, 0.0), t2)
    # the collective rides one rail (the sim's channels are its rails): a cut of the other
    # stalls nothing (a later collective's vote finds it; the bench cuts the rail small
    # ones ride on)
    net = wl.kind == NET
    hit_rail = int(plan.slices[0][0])
    if hit_rail != cut_rail:
        return {"nbytes": nbytes, "at_ms": at * 1e3, "cut_host": cut_host, "cut_rail": cut_rail,
                "two_rail_ms": t2 * 1e3, "one_rail_ms": t1 * 1e3, "slices": 1, "unfinished": 0,
                "lazy": True, "phases": 0, "phase_ms": 0.0, "live_done_ms": t2 * 1e3,
                "detected_ms": float("nan"), "rerun_ms": 0.0, "took_ms": t2 * 1e3,
                "ideal_ms": t2 * 1e3, "extra_ms": 0.0}
    # silent peers: the cut host watches every peer it exchanges with on this channel, and
    # they watch it (each one's heartbeats have their own phase)
    mine = net & ((wl.src == cut_host) | (wl.dst == cut_host))
    peers = set(wl.src[mine].tolist()) | set(wl.dst[mine].tolist())
    k = len(peers) if detect == "silence" else 0  # the host itself is in peers
    wait = phase_wait(k, heartbeat, phase_q)
    detected = stall + (spin + timeout + wait if detect == "silence" else 0.0)
    rerun = t1  # the slice re-run whole on the surviving rail
    end = detected + vote + rerun
    before = min(stall, t2)
    ideal = before + (1 - before / t2) * t1 if t2 else t1
    return {"nbytes": nbytes, "at_ms": at * 1e3, "cut_host": cut_host, "cut_rail": cut_rail,
            "two_rail_ms": t2 * 1e3, "one_rail_ms": t1 * 1e3, "slices": 1, "unfinished": 1,
            "lazy": True, "phases": k, "phase_ms": wait * 1e3, "live_done_ms": 0.0,
            "detected_ms": detected * 1e3, "rerun_ms": rerun * 1e3, "took_ms": end * 1e3,
            "ideal_ms": ideal * 1e3, "extra_ms": (end - ideal) * 1e3}


@functools.lru_cache(maxsize=4)
def _bench_json_at(path, mtime_ns, size):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        return json.load(f)


def bench_json(path):
    """A bench/failover.py JSON, parsed once per file version: compare, spread, bench_cuts
    and phases each read the same file (a 64 MiB run's is ~1 s to parse). Shared: do not
    modify what it returns."""
    st = os.stat(path)
    return _bench_json_at(str(path), st.st_mtime_ns, st.st_size)


def spread(path):
    """Per (size, mode): the lab's one-rail collective times' quartiles (s), the noise
    any single cut's extra carries."""
    data = bench_json(path)
    out = {}
    for row in data:
        one = [t1 - t0 for t0, t1, a in row["raw"]["rows"] if a != 3]
        out[(row["size"], row["mode"])] = np.percentile(one, [25, 50, 75]) if one else None
    return out


def start_offset(hosts, rates_gbps, size, one_rail_lab, two_rail_lab, **kw):
    """(start, end) costs (s) of the bench's collectives that no wire carries, from its own
    reference rows (never from the cuts). bench/failover.py times back-to-back allreduces
    and, between them, every rank refills and checks its buffer (64 MiB: two numpy passes,
    4 ranks on 2 cores). Rank 0's clock starts while other ranks are still at it, so the
    data starts moving `start` later: the lab's one-rail median minus the model's one-rail
    time. What the two-rail median has beyond start + the model's two-rail time is `end`
    (the closing vote, the return to Python)."""
    p = predict(hosts, list(rates_gbps), size, 1, 0, 10.0, **kw)  # a cut after the end
    start = max(one_rail_lab - p["one_rail_ms"] / 1e3, 0.0)
    return start, max(two_rail_lab - start - p["two_rail_ms"] / 1e3, 0.0)


def compare(path, rates_gbps=(0.4, 0.4), hosts=4, align="snapshot", stamp_delay=0.0, near=0,
            snapshot_bps=None, **kw):
    """Every cut of a bench JSON predicted: rows (one per cut) and a summary per (size,
    mode), extra on the bench's clock. align: how a cut at time t of rank 0's clock is
    placed in the model:
      "snapshot": at t - start into the data, start = snapshot_s(size) (the failover
               layer's copy of the in-place input comes first) plus, in files with every
               rank's call times, the hit collective's entry lag (the last rank in); the
               hit collective's time is the model's plus start plus `end` (what the run's
               two-rail median has beyond the snapshot, the median lag and the model's
               time), and its extra is taken against the bench's own ideal: what is
               predicted is the hit collective, from the code's order, the machine's copy
               rate and the run's unhit collectives, never from the cuts;
      "start": at t - start (start_offset: the data moves `start` after rank 0's clock
               starts); the hit collective then ends at start + the model's end (took_ms,
               detected_ms and live_done_ms carry start, on the bench's clock as the lab's
               took is);
      "share": at t * T2_sim / T2_lab, the same share of the two-rail work (the row's
               times on the model's clock);
      None:    at t.
    stamp_delay: seconds from the file's cut stamps to the cut (bench_cuts). near: the
    bench's ideal from the K collectives around each cut (bench_cuts).
    The summary's paired columns (failstats.verdict) compare the means over the same cuts,
    with the lab's 95 % interval: 'within' / 'outside' 10 % only when the interval says so,
    'unresolved' when the lab's noise leaves both open."""
    import statistics
    rows, summary = [], []
    sp = spread(path)
    for (size, mode), v in bench_cuts(path, stamp_delay, near).items():
        meas, pred = [], []
        start, end = (start_offset(hosts, rates_gbps, size, v["one_rail"], v["two_rail"], **kw)
                      if align == "start" else (0.0, 0.0))
        if kw.get("rph", 1) > 1 and size <= LAZY_MAX_BYTES:
            continue  # the lazy model has one rank per host
        for (at, h, rail, ex), lag, took in zip(v["cuts"], v["lags"], v["took"]):
            # the lab's side of the cut, apart from the model's: start and share predict the
            # cut again, and the row is the last prediction plus these
            lab = {"measured_took_ms": took * 1e3, "lab_at_ms": at * 1e3, "mode": mode,
                   "measured_ms": ex * 1e3}
            # the bench's ideal, on its clock, from its reference medians
            before = min(max(at, 0.0), v["two_rail"])
            ideal = before + (1 - before / v["two_rail"]) * v["one_rail"]
            if align == "snapshot":
                snap = (snapshot_s(size, snapshot_bps, hosts * kw.get("rph", 1))
                        if v["copied"] else 0.0)
                st = _starts(snap, lag, v["ref_lag"], size)
                p = predict(hosts, list(rates_gbps), size, h, rail, at, **st, **kw)
                if not p.get("lazy"):
                    # the bench's extra: the model's hit collective (on the bench's clock)
                    # against the bench's own ideal, from its reference medians, which carry
                    # what the model's references lack (the closing vote, the return, a rate
                    # a little below the model's: 57 ms on 64 MiB two-rail medians against
                    # the snapshot's 38). The model's own ideal: extra_sim_ideal_ms
                    p["extra_sim_ideal_ms"] = p["extra_ms"]
                    p["extra_ms"] = p["took_ms"] - ideal * 1e3
            elif align == "share" and at > 0:
                t2 = predict(hosts, list(rates_gbps), size, h, rail, at, **kw)["two_rail_ms"]
                p = predict(hosts, list(rates_gbps), size, h, rail,
                            at * t2 / 1e3 / v["two_rail"], **kw)
            elif align == "start":
                p = predict(hosts, list(rates_gbps), size, h, rail, at - start, **kw)
                # on the bench's clock, as the lab's took is: every time `start` later (the
                # model's vote stands for the lab's closing vote: `end` is not added)
                for k in ("took_ms", "detected_ms", "live_done_ms"):
                    p[k] += start * 1e3
                p["start_ms"] = start * 1e3
                p["extra_sim_ideal_ms"] = p["extra_ms"]
                p["extra_ms"] = p["took_ms"] - ideal * 1e3
            else:
                p = predict(hosts, list(rates_gbps), size, h, rail, at, **kw)
            p.update(lab)
            rows.append(p)
            meas.append(ex * 1e3)
            pred.append(p["extra_ms"])
        q = sp.get((size, mode))
        m, pr = statistics.median(meas), statistics.median(pred)
        ver = FS.verdict(meas, pred)
        mine = rows[-len(meas):] if meas else []
        # the hit collective's own time, lab vs model: what the model predicts per cut,
        # without the bench's reference medians
        tv = FS.verdict([r["measured_took_ms"] for r in mine], [r["took_ms"] for r in mine])
        lab = FS.summary(meas)
        summary.append({"nbytes": size, "mode": mode, "cuts": len(meas),
                        "measured_ms": m, "predicted_ms": pr,
                        "error_pct": 100 * (pr - m) / m if m else float("nan"),
                        "measured_mean_ms": statistics.mean(meas),
                        "predicted_mean_ms": statistics.mean(pred),
                        "lab_two_rail_ms": v["two_rail"] * 1e3,
                        "sim_two_rail_ms": rows[-1]["two_rail_ms"],
                        "start_ms": (start * 1e3 if align == "start"
                                     else rows[-1].get("start_ms", 0.0)),
                        "end_ms": end * 1e3,
                        "lab_one_rail_iqr_ms": (q[2] - q[0]) * 1e3 if q is not None else 0.0,
                        "lab_noise_ms": v["noise"] * 1e3,
                        "measured_ci95_ms": lab.get("ci95", float("nan")),
                        "mean_error_pct": ver.get("error_pct", float("nan")),
                        "diff_ms": ver.get("mean", float("nan")),
                        "diff_ci95_ms": ver.get("ci95", float("nan")),
                        "verdict": ver["verdict"],
                        # cuts the paired verdict needs at this run's spread of lab - model
                        "cuts_paired_10pct": _paired_need(ver, pred),
                        "took_lab_mean_ms": statistics.mean(r["measured_took_ms"] for r in mine),
                        "took_sim_mean_ms": statistics.mean(r["took_ms"] for r in mine),
                        "took_diff_ms": tv.get("mean", float("nan")),
                        "took_diff_ci95_ms": tv.get("ci95", float("nan")),
                        "took_error_pct": tv.get("error_pct", float("nan")),
                        "took_verdict": tv["verdict"],
                        "predicted_sim_ideal_mean_ms": statistics.mean(
                            r.get("extra_sim_ideal_ms", r["extra_ms"]) for r in mine),
                        "cuts_for_10pct": lab.get("cuts_needed", float("nan"))})
    return rows, summary


def _paired_need(ver, pred, rel=0.10):
    """Cuts for the 95 % interval of lab - model to shrink to rel x the model's mean."""
    import math
    sd, m = ver.get("sd", float("nan")), abs(sum(pred) / len(pred)) if pred else 0.0
    if not m or not sd == sd:
        return float("nan")
    return math.ceil((1.96 * sd / (rel * m)) ** 2)


def _starts(snap, lag, ref_lag, size):
    """predict's start and ref_start for a cut: the snapshot, plus, where the file has every
    rank's call times, the hit collective's entry lag (its references: the median lag)."""
    if size <= LAZY_MAX_BYTES or lag is None or ref_lag is None:
        return {"start": snap}
    return {"start": snap + lag, "ref_start": snap + ref_lag}


def stamps(row, stamp_delay=0.0):
    """[(cut, call)] of one bench row (seconds, the bench's clock). Files with fail_called
    stamped the cut when lab.fail returned; older ones when it was called, so their cut is
    taken stamp_delay later (the nft / ip command's own time)."""
    failures = row["raw"]["failures"]
    called = row["raw"].get("fail_called")
    if called:
        return [(tf, tc) for (tf, _), tc in zip(failures, called)]
    return [(tf + stamp_delay, tf) for tf, _ in failures]


def copies_first(row):
    """Whether the row's in-place collectives copied their input before the data moved (the
    failover snapshot), from the counters the bench records since session 22: with nothing
    ahead a blocking one runs out of place instead (executor._out_of_place). Older files
    have none: they copied."""
    snaps = row["raw"].get("snapshots")
    return not snaps or bool(snaps.get("at_post") or snaps.get("at_run")) or not snaps.get(
        "out_of_place")


def bench_cuts(path, stamp_delay=0.0, near=0):
    """The cuts of a bench/failover.py JSON: per (size, mode), [(at seconds, host, rail,
    measured extra seconds)] recomputed as the bench does (failstats.cut_extra), from its
    raw rows, with the cut at stamps(). near: the bench's ideal from the K collectives
    around each cut instead of the run's medians (failstats.references). lags: per cut,
    the hit collective's entry lag (failstats.entry_lags; None in files without every
    rank's call times), ref_lag: its median over the two-rail calls."""
    import statistics
    data = bench_json(path)
    out = {}
    for row in data:
        rows = row["raw"]["rows"]
        med2, med1 = FS.run_medians(rows)
        heals = [th for _, th in row["raw"]["failures"]]
        lazy = row["size"] <= LAZY_MAX_BYTES
        lag = FS.entry_lags(row["raw"].get("rank_starts"))
        cuts, lags, took = [], [], []
        for k, ((tf, _), th) in enumerate(zip(stamps(row, stamp_delay), heals)):
            c = FS.cut_extra(rows, tf, th, near, lazy, (med2, med1))
            if c is None:
                continue
            # the bench's rotation: host 1 + k % 3; rail 0 for small sizes, else alternating
            rail = 0 if (row["size"] < (1 << 20) or k % 2 == 0) else 1
            cuts.append((c["at"], 1 + k % 3, rail, c["extra"]))
            lags.append(lag[c["s"]] if lag and c["s"] < len(lag) else None)
            took.append(c["took"])
        # the bench's references carry the typical lag: its median over two-rail calls
        ref = (statistics.median(x for x, (_, _, a) in zip(lag, rows) if a == FS.BOTH)
               if lag else None)
        out[(row["size"], row["mode"])] = dict(cuts=cuts, two_rail=med2, one_rail=med1,
                                               noise=FS.noise(rows), lags=lags, ref_lag=ref,
                                               took=took, copied=copies_first(row))
    return out


def phases(path, rates_gbps=(0.4, 0.4), hosts=4, stamp_delay=0.0, align="snapshot",
           snapshot_bps=None, **kw):
    """Every cut split into the phases the bench's events show (rank 0's 'down' event:
    when the rail was declared dead, and when the re-run was done), next to the model's:
    rows of {nbytes, mode, at_ms, lab_down_ms, sim_down_ms, lab_rerun_ms, sim_rerun_ms}.
    Times from the hit collective's start, lab ms; the model's cut placed by share of the
    two-rail work (as compare(align="share")) and its detection scaled back the same way (a
    two-rail phase). sim_rerun_ms is the vote plus the re-run, as the lab's time from
    'down' to 'rerun done' is; a one-rail phase, in the model's own ms. align="snapshot"
    (the default): the cut placed after the snapshot copy instead (compare), no scaling;
    "share": as described."""
    data = bench_json(path)
    cuts = bench_cuts(path, stamp_delay)
    out = []
    for row in data:
        v = cuts[(row["size"], row["mode"])]
        rows = row["raw"]["rows"]
        downs = [e for e in row.get("events") or [] if e.get("event") == "down"]
        # files since 2026-11-24 keep every rank's events: the first rank to mark it dead
        every = [e for r in row.get("ranks") or [] for e in r.get("events") or []
                 if e.get("event") == "down"]
        for tf, tc in stamps(row, stamp_delay):
            span = FS.hit_span(rows, tf, row["size"] <= LAZY_MAX_BYTES)
            ev = next((e for e in downs if e["time"] >= tc - 1e-3), None)
            if span is None or ev is None or not ev.get("rerun_done_s"):
                continue
            t0 = rows[span[1]][0]  # the stalled collective's start
            at, h, rail, _ = next(c for c in v["cuts"] if abs(c[0] - (tf - t0)) < 1e-9)
            if kw.get("rph", 1) > 1 and row["size"] <= LAZY_MAX_BYTES:
                continue  # the lazy model has one rank per host
            snap = (snapshot_s(row["size"], snapshot_bps, hosts * kw.get("rph", 1))
                    if align == "snapshot" and v["copied"] else 0.0)
            k = next(i for i, c in enumerate(v["cuts"]) if abs(c[0] - (tf - t0)) < 1e-9)
            st = (_starts(snap, v["lags"][k], v["ref_lag"], row["size"])
                  if align == "snapshot" else {})
            p = predict(hosts, list(rates_gbps), row["size"], h, rail, at, **st, **kw)
            s = v["two_rail"] / (p["two_rail_ms"] / 1e3)  # lab s per sim s
            if p.get("lazy") or align == "snapshot":  # lazy: timeout-bound; not scaled
                s = 1.0
            elif at > 0:
                p = predict(hosts, list(rates_gbps), row["size"], h, rail, at / s, **kw)
            else:
                s = 1.0
            first = min((e["time"] for e in every if e["time"] >= tc - 1e-3), default=None)
            out.append({"nbytes": row["size"], "mode": row["mode"], "at_ms": at * 1e3,
                        "why": ev.get("why", ""),
                        "lab_down_ms": (ev["time"] - t0) * 1e3,
                        "lab_first_down_ms": (float("nan") if first is None
                                              else (first - t0) * 1e3),
                        "sim_down_ms": p["detected_ms"] * s,
                        "lab_rerun_ms": (ev["rerun_done_s"] - ev["time"]) * 1e3,
                        "sim_rerun_ms": p["took_ms"] - p["detected_ms"],
                        "unfinished": p["unfinished"],
                        # the lab's lost slices (files since 2026-11-24): an exact count per
                        # cut, which the collectives' noise does not touch
                        "lab_slices": ev.get("rerun_slices"),
                        # older files: the re-run's time over the lab's one-rail time per
                        # piece (its one-rail median over its pieces; s15's exact counts
                        # agree with this in 8 of 8 cuts)
                        "lab_slices_est": _pieces(ev, v["one_rail"], row["size"])})
    return out


def _pieces(ev, one_rail, nbytes, piece=1 << 20):
    """Pieces a lab re-run moved, from its time: rerun time / (one-rail time per piece)."""
    if not ev.get("rerun_done_s") or nbytes < 2 * piece:  # 1 MiB: half a slice per rail
        return ev.get("rerun_slices")
    return int(round((ev["rerun_done_s"] - ev["time"]) / (one_rail / (nbytes // piece))))


def same_call(path, rates_gbps=(0.4, 0.4), hosts=4, plan=True, **kw):
    """Every cut of a bench JSON with the engine's traces (bench/failover.py since session
    30) against the model, each on its own call (failstats.same_call): the cut placed at the
    same share of the hit call's own two-rail data time, the model's extra against its own
    ideal (its two- and one-rail times, start 0: the data clock) scaled by the lab's T2 over
    the model's, next to the lab's extra against its own call. Returns (rows, summary):
    per cut, and per (size, mode) the paired verdict (failstats.verdict) of the extras, of
    the hit call's data time, and lost slices lab = model. plan: the model runs each hit
    call's own plan, read from its trace's ops per rail (plan_for_ops; False: the even
    split for every cut, as before session 30's second look)."""
    import statistics
    rows, summary = [], []
    for row in bench_json(path):
        if row["size"] <= LAZY_MAX_BYTES:
            continue
        cuts = FS.same_call(row)
        for c in cuts:
            h = 1 + c["k"] % 3
            # the hit call's own plan (its ops per rail in the trace): an uneven one right
            # after a re-admission is replayed as it ran (plan_rates), the even one as before
            # (plan="ops": from the op counts alone, the middle of their range of shares,
            # as session 30 read it; True: exact from the bytes per rail where the file has
            # them, files since session 31)
            pr, matched = None, True
            rb = c.get("rail_bytes") if plan and plan != "ops" else None
            if plan and c.get("rail_ops"):
                try:
                    pr = plan_for_ops(hosts, row["size"], c["rail_ops"], tuple(rates_gbps),
                                      kw.get("piece", 1 << 20), kw.get("rph", 1),
                                      rail_bytes=rb)
                except ValueError:
                    matched = False
            pkw = dict(kw, plan_rates=pr) if pr else kw
            ref = predict(hosts, list(rates_gbps), row["size"], h, c["rail"], 10.0, **kw)
            t2 = ref["two_rail_ms"] / 1e3
            if pr:  # the model's L: its surviving rail's last transfer in the uncut call
                t2 = _rail_last(hosts, tuple(rates_gbps), pr, row["size"], 1 - c["rail"],
                                kw.get("alpha", 0.0), kw.get("piece", 1 << 20), kw.get("rph", 1))
            p = predict(hosts, list(rates_gbps), row["size"], h, c["rail"], c["share"] * t2,
                        **pkw)
            if pr:  # the reference reading against the model's own one/two-rail ratio
                p["extra_ms"] = p["took_ms"] - _ideal(c["share"] * t2 * 1e3, t2 * 1e3, t2 * 1e3
                                                      * ref["one_rail_ms"] / ref["two_rail_ms"])
            s = c["T2"] / t2  # lab s per model s in this call
            # placed instead at the surviving rail's progress at the cut (its share of ops
            # done, files with the hit calls' op times): the work's share, not the time's
            prog = c.get("live_progress", float("nan"))
            pp = (predict(hosts, list(rates_gbps), row["size"], h, c["rail"], prog * t2, **pkw)
                  if prog == prog else None)
            # placed instead where the model's cut rail has moved the bytes the lab's had at
            # the cut (files since session 31): the same work lost on it; its ideal at that
            # place in the model's own call (T1 = 2 T2)
            pb, bshare = None, float("nan")
            if c.get("rail_bytes_at_cut") and c["c"] > 0:
                done = c["rail_bytes_at_cut"][c["rail"]] / c["rail_bytes"][c["rail"]]
                tb = time_at_bytes(hosts, tuple(rates_gbps), pr, row["size"], c["rail"], done,
                                   kw.get("alpha", 0.0), kw.get("piece", 1 << 20),
                                   kw.get("rph", 1))
                bshare = min(tb / t2, 1.0)
                pb = predict(hosts, list(rates_gbps), row["size"], h, c["rail"], tb, **pkw)
            elif c.get("rail_bytes_at_cut"):  # a cut before the data: the time's place
                bshare, pb = c["share"], p
            rows.append({"nbytes": row["size"], "mode": row["mode"], "cut": c["k"],
                         "rail": c["rail"], "share": c["share"], "c_ms": c["c"] * 1e3,
                         "lab_T2_ms": c["T2"] * 1e3, "sim_T2_ms": t2 * 1e3,
                         "sim_T1_ms": p["one_rail_ms"],
                         "lab_took_ms": c["took"] * 1e3, "sim_took_ms": p["took_ms"] * s,
                         "lab_extra_ms": c["extra"] * 1e3, "sim_extra_ms": p["extra_ms"] * s,
                         # T1 = 2 T2 on both sides: the lab's surviving rail's own pace
                         "lab_extra_2x_ms": c["extra_2x"] * 1e3,
                         "sim_extra_2x_ms": (p["took_ms"] - _ideal(c["share"] * t2 * 1e3,
                                                                   t2 * 1e3, 2 * t2 * 1e3)) * s,
                         "sim_extra_bytes_ms": (
                             (pb["took_ms"] - _ideal(bshare * t2 * 1e3, t2 * 1e3, 2 * t2 * 1e3))
                             * s if pb else float("nan")),
                         "sim_share_bytes": bshare,
                         "sim_lost_bytes": pb["unfinished"] if pb else -1,
                         "lab_dead_bytes_progress": (
                             c["rail_bytes_at_cut"][c["rail"]] / c["rail_bytes"][c["rail"]]
                             if c.get("rail_bytes_at_cut") else float("nan")),
                         "rail_bytes": c.get("rail_bytes"),
                         # the hit call had the model's plan: the even split (by its bytes
                         # where the file has them, else by its ops)
                         "even": (pr is None and matched) if rb else c["symmetric"],
                         "symmetric": c["symmetric"], "plan_matched": matched,
                         "sim_plan_rates": pr, "rail_ops": c.get("rail_ops"),
                         "lab_live_progress": c["live_progress"],
                         "sim_extra_prog_ms": pp["extra_ms"] * s if pp else float("nan"),
                         "sim_lost_prog": pp["unfinished"] if pp else -1,
                         "lab_dead_progress": c["dead_progress"],
                         "lab_lost": c["lost"], "sim_lost": p["unfinished"],
                         "lab_first_down_ms": c["first_down"] * 1e3,
                         "sim_detected_ms": p["detected_ms"] * s,
                         "fail_ms": c["fail_s"] * 1e3, "r21": c["r21"]})
        sel = rows[len(rows) - len(cuts):]
        if not sel:
            continue
        lab = [r["lab_extra_ms"] for r in sel]
        sim = [r["sim_extra_ms"] for r in sel]
        v = FS.verdict(lab, sim)
        v2 = FS.verdict([r["lab_extra_2x_ms"] for r in sel], [r["sim_extra_2x_ms"] for r in sel])
        # the cuts whose hit call had the model's plan (an even split: the planner's, on
        # equal rails; a call just after a re-admission can still lean on one rail)
        ss = [r for r in sel if r["even"]]
        vs = (FS.verdict([r["lab_extra_2x_ms"] for r in ss], [r["sim_extra_2x_ms"] for r in ss])
              if len(ss) > 1 else {"mean": float("nan"), "ci95": float("nan"),
                                   "error_pct": float("nan"), "verdict": "none"})
        sp = [r for r in sel if r["sim_extra_prog_ms"] == r["sim_extra_prog_ms"]]
        vp = (FS.verdict([r["lab_extra_ms"] for r in sp], [r["sim_extra_prog_ms"] for r in sp])
              if sp else {"mean": float("nan"), "ci95": float("nan"),
                          "error_pct": float("nan"), "verdict": "none"})
        sb = [r for r in sel if r["sim_extra_bytes_ms"] == r["sim_extra_bytes_ms"]]
        vb = (FS.verdict([r["lab_extra_2x_ms"] for r in sb], [r["sim_extra_bytes_ms"] for r in sb])
              if len(sb) > 1 else {"mean": float("nan"), "ci95": float("nan"),
                                   "error_pct": float("nan"), "verdict": "none"})
        tv = FS.verdict([r["lab_took_ms"] for r in sel], [r["sim_took_ms"] for r in sel])
        ls = FS.summary(lab)
        summary.append({"nbytes": row["size"], "mode": row["mode"], "cuts": len(sel),
                        "lab_mean_ms": ls["mean"], "lab_ci95_ms": ls.get("ci95"),
                        "sim_mean_ms": statistics.fmean(sim),
                        "diff_ms": v["mean"], "diff_ci95_ms": v["ci95"],
                        "error_pct": v["error_pct"], "verdict": v["verdict"],
                        "cuts_paired_10pct": _paired_need(v, sim),
                        "lab_2x_mean_ms": statistics.fmean(r["lab_extra_2x_ms"] for r in sel),
                        "sim_2x_mean_ms": statistics.fmean(r["sim_extra_2x_ms"] for r in sel),
                        "diff_2x_ms": v2["mean"], "diff_2x_ci95_ms": v2["ci95"],
                        "error_2x_pct": v2["error_pct"], "verdict_2x": v2["verdict"],
                        "sim_r21": rows[-1]["sim_T1_ms"] / rows[-1]["sim_T2_ms"],
                        "sym_cuts": len(ss),
                        "lab_2x_sym_mean_ms": (statistics.fmean(r["lab_extra_2x_ms"] for r in ss)
                                               if ss else float("nan")),
                        "lab_2x_sym_ci95_ms": (FS.summary([r["lab_extra_2x_ms"] for r in ss])
                                               .get("ci95", float("nan"))),
                        "sim_2x_sym_mean_ms": (statistics.fmean(r["sim_extra_2x_ms"] for r in ss)
                                               if ss else float("nan")),
                        "diff_2x_sym_ms": vs["mean"], "diff_2x_sym_ci95_ms": vs["ci95"],
                        "error_2x_sym_pct": vs["error_pct"], "verdict_2x_sym": vs["verdict"],
                        "cuts_2x_sym_10pct": (_paired_need(vs, [r["sim_extra_2x_ms"] for r in ss])
                                              if len(ss) > 1 else float("nan")),
                        "lost_equal_sym": sum(r["lab_lost"] == r["sim_lost"] for r in ss),
                        "prog_cuts": len(sp),
                        "sim_prog_mean_ms": (statistics.fmean(r["sim_extra_prog_ms"] for r in sp)
                                             if sp else float("nan")),
                        "diff_prog_ms": vp["mean"], "diff_prog_ci95_ms": vp["ci95"],
                        "error_prog_pct": vp["error_pct"], "verdict_prog": vp["verdict"],
                        "lost_equal_prog": sum(r["lab_lost"] == r["sim_lost_prog"] for r in sp),
                        "bytes_cuts": len(sb), "diff_bytes_ms": vb["mean"],
                        "diff_bytes_ci95_ms": vb["ci95"], "error_bytes_pct": vb["error_pct"],
                        "verdict_bytes": vb["verdict"],
                        "lost_equal_bytes": sum(r["lab_lost"] == r["sim_lost_bytes"] for r in sb),
                        "symmetric": sum(r["symmetric"] for r in sel),
                        "even": sum(r["even"] for r in sel),
                        "plan_unmatched": sum(not r["plan_matched"] for r in sel),
                        "lost_equal": sum(r["lab_lost"] == r["sim_lost"] for r in sel),
                        "took_error_pct": tv["error_pct"], "took_verdict": tv["verdict"],
                        "r21": sel[0]["r21"]})
    return rows, summary


def _ideal(at, t2, t1):
    """The bench's ideal: two rails until the cut (at, clamped to 0..t2), one after."""
    before = min(max(at, 0.0), t2)
    return before + (1 - before / t2) * t1
