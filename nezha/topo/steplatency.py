"""Start-up step latency: what one step between hosts costs on these machines, measured.

The cost model's step latencies (costmodel.RAIL_ALPHA, SHM_ALPHA) were set on a faster
machine; on a slower one (2-core VM, 2026-11-28: a recursive-doubling step ~50 us, the
model's 25 us) the choice left recursive doubling at a third of the size where it stopped
winning (allreduce 4-8 KiB 0.57x the time with steps x3, broadcast 8 KiB 0.25x;
docs/results/session24/matrix/summary.md). So every rank, once, in Communicator():
  1. WARM untimed, then CALLS timed blocking allreduces of 8 B, recursive doubling, by
     the user's path (the fast path from the second call), back to back (the ranks run
     in step, as a training loop does): they run as collectives, but stats() and
     messages number the user's calls from 0 after them (RunState.base);
  2. per call its wall time; this rank's median (one preempted call does not count);
  3. the slowest rank's median, agreed as int64 MAX (exact: every rank the same integer,
     so every rank builds the same Layout and plans alike);
  4. costmodel.alpha_of_small spreads it over the model's steps of that allreduce: the
     rail step latency, shm steps in proportion. The crowding scale is not applied on
     top: the measure already waited for the partners to be scheduled.
  5. then the byte cost of a step that does not stream (rd, rab, tree) at the sizes small
     payloads use: HOP_CALLS timed rd allreduces of each of costmodel.HOP_SIZES, whole on
     the rail small payloads take, back to back like the 8 B ones (a stream of such calls,
     as a training loop or a benchmark makes: whatever a queue or a shaper's bucket gives
     a burst, that is what it gives the next call too); the slowest rank's median per size,
     agreed with the 8 B one (int64 MAX), and the planner prices those steps' bytes from
     them (costmodel.HopCost, Planner.set_hop_samples). Isolated calls (each on idle links)
     measured a burst the next call in a loop does not get: 16 KiB 40 us a step against
     300 in the loop (docs/results/session27/bytecost). ~30-70 ms more start-up in the lab
     (4 x 1, 400 Mbit/s), most of it the 64 KiB calls. With several ranks on each host
     rd crosses hosts from one rank per host (rd_hosts.pxi), so a point is one payload on
     the link; steps where several ranks of a host cross at once (flat rab, the tree) are
     priced at all of their bytes on the host's link (costmodel.Layout._step). Session 27
     read the 2 x 4 samples as four payloads a step (flat rd's) and priced those steps 4x
     too cheap: flat rab at 64-256 KiB, 3.4x slower than hierarchical (issue12/ab64).
  6. then what a second concurrent slice adds (Planner.slice_step, in place of costmodel.
     SLICE_STEP): with two rails and one connection per rail, SLICE_CALLS pairs of the 8 B
     rd allreduce, whole on the fastest rail and split 4 + 4 B over the fastest two at once,
     interleaved call by call; the slowest rank's median of each, agreed with the rest (int64
     MAX); the split's excess over the whole in whole calls (slice_steps) is the steps per
     step a second slice costs the CPUs (its sends, receives and wake-ups). ~3 ms; the lab's
     4 x 1 measured 0.06-0.45, median 0.15 over 72 start-ups (session 31, docs/results/
     session31/slice-cost); the constant 0.75 was fitted on striped rings at 2-16 KiB in
     session 26. NEZHA_SLICE_STEP=model or a number skips it.
Skipped (the constants stay) with one rank, every rank on one host (no step between
hosts to measure), NEZHA_PROBE=off, and NEZHA_RAIL_ALPHA=model or a number.
"""
from __future__ import annotations

import time

import numpy as np

from nezha import log
from nezha.costmodel import HOP_SIZES, RAIL_ALPHA, SHM_ALPHA, SLICE_STEP, alpha_of_small
from nezha.planner import ALGO_RD, Plan
from nezha.topo import rateprobe

WARM = 3     # untimed calls first: the first ones pay for cold caches and sleeping threads
CALLS = 16   # timed calls; the median of them
SEQ = rateprobe.SEQ_BASE + 0x100  # request numbers, apart from the rate probe's
HOP_WARM = 1  # untimed calls of each size first, at least HOP_WARM_BYTES of them
# A stream of calls long enough to drain a shaper's burst before the timed ones: 1 + 9 rd
# allreduces of 4 KiB put 80 KB on a link, inside the lab's 88 KB tbf bucket, and read 52 us
# where a stream of them runs 90-107 (session 28, docs/results/session28/band-400-100): the
# model then kept rd at 4 KiB on 400 + 100, 0.92 of Open MPI, where rab ran 84-87 us
# Drained back to back (no gap) they read 168-198 us (session 28, B1-B2) and priced rd 2 KiB
# above rab: a barrier after each call (outside the timer), as the bench's OSU loop and an
# application's work between collectives leave, lets the shaper refill what it does there.
HOP_WARM_BYTES = 128 << 10
HOP_CALLS = 9  # timed calls of each of HOP_SIZES; the median of them
# timed pairs (whole on one rail, split over two) of the second slice's measure: 16 gave
# medians of 0.14-0.40 steps per step in five measures of one job (lab 4 x 1, session 31);
# 32 pairs cost ~3 ms
SLICE_CALLS = 32


def decide(mode: str, alpha: str, host_of: list, nranks: int) -> tuple[bool, str]:
    """(measure or not, why), from what every rank agrees on, so every rank decides alike."""
    if alpha.lower() != "auto":
        return False, f"NEZHA_RAIL_ALPHA={alpha}"
    if mode == "off":
        return False, "NEZHA_PROBE=off"
    if nranks < 2:
        return False, "one rank"
    if len(set(host_of)) < 2:
        return False, "one host: no step between hosts"
    return True, "NEZHA_RAIL_ALPHA=auto"


def median_ns(times: list[int]) -> int:
    """This rank's median call (ns), 0 if some call was not timed."""
    if not times or min(times) <= 0:
        return 0
    return int(np.median(np.array(times, np.int64)))


def measure(comm) -> dict | None:
    """Time the calls, agree the slowest rank's median; {"small_us", "alpha_us", ...} or
    None when some rank timed nothing (every rank alike)."""
    buf = np.zeros(2, np.int32)   # 8 B
    times = []
    # the user's own path (the compiled fast path from the second call): the internal one
    # (rateprobe._run) runs ~170 us of Python a call, and on 4 ranks sharing 2 cores every
    # engine then waits for partners in theirs (4 x 1: 370-490 us a call against 100-130
    # by the fast path; 2 x 4: 1.0-1.2 ms against 95-210). rd whatever NEZHA_ALGO says, and
    # not on an INA rail (it would time the service)
    algo, ina = comm.planner.algo, comm._ina
    comm.planner.algo, comm._ina = "rd", None
    hop, pair = [], _slice_channels(comm)
    one = two = 0
    try:
        for i in range(WARM + CALLS):
            t0 = time.perf_counter_ns()
            comm.allreduce(buf)
            if i >= WARM:
                times.append(time.perf_counter_ns() - t0)
        hop = [median_ns(_time_whole(comm, size)) for size in HOP_SIZES]
        if pair is not None:
            one, two = _time_slices(comm, pair)
    finally:
        comm.planner.__dict__.pop("allreduce", None)  # _time_slices' plans
        comm.planner.algo, comm._ina = algo, ina
        # the plans cached for these calls were made with rd forced and no INA: a user's
        # 8 B call (the fast path keys by address, which differs between ranks) must not
        # find them, even where the measure is void and the model keeps its version
        comm._forget_plans()
    mine = median_ns(times)
    # MAX of -mine too: the fastest rank's, and a rank that timed nothing (0) voids the
    # measure on every rank
    k = len(hop)
    agreed = rateprobe.agree_max(comm, [mine, -mine] + hop + [-t for t in hop]
                                 + [one, two, -one, -two], SEQ)
    small = agreed[0] if -agreed[1] > 0 else 0
    alpha = alpha_of_small(comm.planner.hosts, small * 1e-9) if small else None
    if alpha is None:
        return None
    out = {"small_us": round(small * 1e-3, 1), "fastest_us": round(-agreed[1] * 1e-3, 1),
           "alpha_us": round(alpha * 1e6, 2)}
    # the sizes only if every rank timed every one (agreed: every rank alike)
    if k == len(HOP_SIZES) and all(-t > 0 for t in agreed[2 + k:2 + 2 * k]):
        out["hop"] = {"small_ns": small, "sizes": list(HOP_SIZES), "ns": agreed[2:2 + k]}
    # a second slice: only if every rank timed both (agreed: every rank alike)
    t1, t2, f1, f2 = agreed[2 + 2 * k:]
    if pair is not None and -f1 > 0 and -f2 > 0:
        out["slice"] = {"one_ns": t1, "two_ns": t2, "steps": slice_steps(t1, t2)}
    return out


def slice_steps(one_ns: int, two_ns: int) -> float:
    """Steps per step a second concurrent slice adds (costmodel.SLICE_STEP's measure): the
    8 B rd allreduce split over two rails at once over the same call on one rail, less 1.
    Both are the slowest rank's medians (agreed integers), so every rank computes the same
    float. Not below 0: two slices never cost less than one (a noisy pair of medians could
    say so, and a free slice would stripe every size)."""
    if not one_ns > 0:
        return 0.0
    return round(max(0.0, (two_ns - one_ns) / one_ns), 4)


def _slice_channels(comm):
    """The two channels a second slice would take (the prior's fastest two live rails), or
    None: one connection per rail and two live rails only (the model prices rails, not
    channels: Planner.piece_model), and not where NEZHA_SLICE_STEP says otherwise."""
    pl = comm.planner
    if str(pl.slice_cfg).lower() != "auto" or pl.nconns != 1:
        return None
    live = [c for c in range(pl.nchan) if pl.alive[c]]
    if len(live) < 2:
        return None
    prior = pl.model.prior()
    return sorted(live, key=lambda c: (-prior[c], c))[:2]


def _time_slices(comm, pair) -> tuple[int, int]:
    """This rank's medians (ns) of the 8 B rd allreduce whole on pair[0] and split 4 + 4 B
    over both (each slice a whole rd on its rail, run side by side), the two interleaved call
    by call (one, two, one, two, ...: both see the same drift), WARM + SLICE_CALLS of each, by the
    user's fast path (the planner's allreduce replaced for them: fixed plans, no bucket, so
    nothing is learned from them). Two buffers: the fast path keeps a plan per address."""
    a, b = np.zeros(2, np.int32), np.zeros(2, np.int32)
    plans = {a.ctypes.data: Plan([(pair[0], 0, 2)], ALGO_RD, None, 4),
             b.ctypes.data: Plan([(min(pair), 0, 1), (max(pair), 1, 1)], ALGO_RD, None, 4)}
    cur = [a]
    comm.planner.allreduce = lambda count, es: plans[cur[0].ctypes.data]
    comm._forget_plans()
    ones, twos = [], []
    for i in range(WARM + SLICE_CALLS):
        for buf, out in ((a, ones), (b, twos)):
            cur[0] = buf
            t0 = time.perf_counter_ns()
            comm.allreduce(buf)
            if i >= WARM:
                out.append(time.perf_counter_ns() - t0)
    return median_ns(ones), median_ns(twos)


def _time_whole(comm, size: int) -> list[int]:
    """ns of HOP_CALLS rd allreduces of size bytes (whole, on one rail: NEZHA_ALGO=rd is in
    force), each followed by a barrier (untimed), after HOP_WARM (HOP_WARM_BYTES) untimed ones."""
    buf = np.zeros(size // 4, np.int32)
    times = []
    warm = max(HOP_WARM, -(-HOP_WARM_BYTES // max(size, 1)))
    for i in range(warm + HOP_CALLS):
        t0 = time.perf_counter_ns()
        comm.allreduce(buf)
        t1 = time.perf_counter_ns()
        comm.barrier()
        if i >= warm:
            times.append(t1 - t0)
    return times


def startup(comm, cfg) -> dict:
    """Decide and, if so, measure and give the planner the agreed step latency:
    {"measured": bool, "why": str, ...}. Logged (TOPO; the planner's line: PLAN)."""
    go, why = decide(cfg["PROBE"], cfg["RAIL_ALPHA"], comm.planner.hosts, comm.size)
    out = {"measured": False, "why": why}
    if not go:
        log.info("TOPO", f"step latency not measured ({why}): "
                 f"{comm.planner.layout.rail_alpha * 1e6:.1f} us ({comm.planner.alpha_why})")
        return out
    got = measure(comm)
    if got is None:
        log.warn("TOPO", "step latency: a rank timed nothing (a rail failed during it?); "
                 "the model's constants stay")
        return out
    comm.planner.set_step_latency(got["alpha_us"] * 1e-6, "measured at start-up")
    if "hop" in got:
        comm.planner.set_hop_samples(got["hop"])
    if "slice" in got:
        comm.planner.set_slice_step(got["slice"]["steps"], "measured at start-up")
    out.update(got, measured=True)
    log.info("TOPO", f"step latency: 8 B allreduce (rd) {got['small_us']:.1f} us (the slowest "
             f"rank's median of {CALLS}; the fastest rank's {got['fastest_us']:.1f} us)"
             f" -> {got['alpha_us']:.1f} us per step between hosts, "
             f"{comm.planner.layout.shm_alpha * 1e6:.1f} within (model constants "
             f"{RAIL_ALPHA * 1e6:g} / {SHM_ALPHA * 1e6:g} us)"
             + (f"; whole-payload steps' bytes: {comm.planner.layout.hop.describe()}"
                if comm.planner.layout.hop is not None else "")
             + (f"; 8 B on one rail {got['slice']['one_ns'] * 1e-3:.1f} us, split over two "
                f"{got['slice']['two_ns'] * 1e-3:.1f} us -> a second slice "
                f"{got['slice']['steps']:g} steps per step (constant {SLICE_STEP:g})"
                if "slice" in got else ""))
    return out
