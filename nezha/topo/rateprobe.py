"""Start-up rate probe: the cost model's prior where no nominal link speed can be trusted.

A rail's nominal speed (rails.py: the slowest end's, agreed by every rank) seeds the cost
model when every rail has one. Virtual NICs (the lab's veth say 10000 Mb/s whatever tbf
shapes them to), NICs without a speed, and shaped links have none worth trusting; the first
collectives would then be split evenly, which on 400 + 100 Mbit/s rails makes them 2.5x
slower than the split the model learns a few collectives later.

The probe, run once by every rank in Communicator() (NEZHA_PROBE):
  0. untimed rounds of 1/128, 1/32, 1/8 and 1/2 of round 1's bytes, then GAP_S idle: on
     fresh connections TCP is still in its start-up phase, which slowed round 1 on the fast
     rail most (it overrated that rail by up to 9 points of share in the lab); rising sizes,
     because one burst of 1/2 on fresh connections left the job's large collectives about
     3 % slower (see probe());
  1. round 1: one allreduce of NEZHA_PROBE_BYTES per channel on every channel at once (ring;
     all rails busy together, as in a striped collective); the engine's per-channel finish
     times, agreed as int64 MAX over the ranks (the slowest rank's view; exact, so every
     rank computes bit-identical numbers: ranks that planned different splits would
     mismatch). A channel some rank did not time (a rail failed during the probe) voids
     the probe for every rank alike;
  2. round 2, after an idle gap of GAP_S: the same, the slowest channel carrying ROUND2 x
     the bytes and the others in proportion to round 1's rates (so that the fast rails run
     as long as the slow one: their few milliseconds in round 1 are mostly fixed costs);
  3. rate = (bytes in round 2 - bytes in round 1) / (agreed time 2 - agreed time 1) per
     channel, in Mbit/s: a shaper's burst (tbf lets its full bucket through unshaped, about
     88 KB in the lab) and per-step latencies are in both rounds and drop out. The rates
     become the model's nominal rates (CostModel.nominal): cold buckets split by them until
     measured rates replace them.
Both steps are regular collectives (they vote and fail over like any other, and time out
after NEZHA_TIMEOUT); neither is recorded by the model. Python runs here, once, never per
chunk.
"""
from __future__ import annotations

import time

import numpy as np

from nezha import log
from nezha._core import engine as _eng
from nezha.buffers import address
from nezha.planner import ALGO_RD, ALGO_RING, Plan
from nezha.request import Request
from nezha.types import DType, ReduceOp

SEQ_BASE = 0xA0000000  # request numbers of the probe's collectives (apart from the user's)


def decide(mode: str, rails: list[tuple[str, int | None, bool]], nranks: int,
           split: str = "measured") -> tuple[bool, str]:
    """(probe or not, why). rails: (name, agreed nominal Mbit/s or None, is loopback) per rail.
    A pure function of what every rank agrees on, so every rank decides alike."""
    if mode == "off":
        return False, "NEZHA_PROBE=off"
    if nranks < 2:
        return False, "one rank"
    if len(rails) < 2:
        return False, "one rail: nothing to split"
    if mode == "on":
        return True, "NEZHA_PROBE=on"
    if split == "equal":
        return False, "NEZHA_SPLIT=equal: the split ignores rates"
    unknown = [name for name, speed, loop in rails if speed is None and not loop]
    if all(loop for _, _, loop in rails):
        return False, "loopback rails (one device: nothing to tell apart; NEZHA_PROBE=on probes)"
    if not unknown:
        return False, "nominal speeds known (" + ", ".join(
            f"{name} {speed} Mbit/s" for name, speed, _ in rails) + ")"
    return True, f"no trusted nominal speed on {', '.join(unknown)}"


ROUND2 = 2.5       # round 2: the slowest channel carries this many times round 1's bytes
MAX_RATIO = 8      # ... and no channel more than this many times the slowest one's
GAP_S = 0.02       # idle before round 2: every shaper's bucket full again, as before round 1
WARM_RAMP = (128, 32, 8, 2)   # untimed rounds of 1/div of round 1's bytes first (): none


def agreed_times(agreed: list[int], nchan: int) -> list[int] | None:
    """Per-channel ns from the agreed vector [max ns per channel] + [-min ns per channel];
    None when some rank did not time some channel (a rail failed during the probe)."""
    hi, lo = agreed[:nchan], [-x for x in agreed[nchan:2 * nchan]]
    if len(hi) != nchan or len(lo) != nchan or any(x <= 0 for x in lo + hi):
        return None
    return list(hi)


def round2_counts(t1: list[int], cnt1: int, n: int) -> list[int]:
    """Elements per channel in round 2: in proportion to round 1's rates (channels that were
    faster carry more, so that every channel runs about as long as the slowest), at least
    ROUND2 x round 1's; integers from agreed integers, so the same on every rank."""
    slow = max(t1)
    base = int(cnt1 * ROUND2) // n * n
    return [min(base * slow // t, base * MAX_RATIO) // n * n for t in t1]


def rates_from_rounds(t1: list[int], t2: list[int], cnt1: int, cnt2: list[int],
                      es: int) -> list[float] | None:
    """Mbit/s per channel from two rounds: (bytes2 - bytes1) / (t2 - t1). A shaper's burst
    (tbf's bucket, full at the start of both rounds) and the fixed per-step costs appear in
    both rounds alike and drop out. None if some channel did not take longer in round 2."""
    out = []
    for a, b, c2 in zip(t1, t2, cnt2):
        if b <= a or c2 <= cnt1:
            return None
        out.append((c2 - cnt1) * es * 8e3 / (b - a))   # bytes / (ns * 1e-9) * 8e-6
    return out


EQUAL_WITHIN = 0.10  # rails measured this close count as equal (the probe's own spread)


def snap_equal(mbps: list[float]) -> list[float]:
    """Rates within EQUAL_WITHIN of each other become their mean: on equal rails the probe's
    few points of noise would seed a worse split than the even one."""
    if mbps and max(mbps) <= (1 + EQUAL_WITHIN) * min(mbps):
        m = sum(mbps) / len(mbps)
        return [m] * len(mbps)
    return list(mbps)


def rates_of_round(t: list[int], counts: list[int], es: int) -> list[float]:
    """Mbit/s per channel of one round alone (bytes / agreed time)."""
    return [c * es * 8e3 / ns for c, ns in zip(counts, t)]


def probe(comm, nbytes: int) -> dict | None:
    """Run the probe on a started communicator (every rank together); returns what it found
    ({"mbps": per channel, "ms": wall time, ...}) and seeds comm.planner.model, or None when
    it found nothing usable.

    Round 1: nbytes on every channel at once. Round 2, after an idle gap: every channel
    again, the slowest with ROUND2 x nbytes, the others in proportion to round 1's rates.
    The rate of a channel is the difference of bytes over the difference of agreed times."""
    t0 = time.perf_counter()
    n, nchan = comm.size, comm.nchan
    es = 4
    cnt1 = max(int(nbytes) // es // n * n, n)    # per channel, a multiple of the ranks
    # untimed: TCP out of its start-up phase on every connection first, in rising sizes:
    # one burst of half round 1 on fresh connections left a rank's incoming link about 3 %
    # slower for the rest of the job in 7 runs of 10 (lab, 4 x 2 rails; rising sizes: 0
    # of 9; docs/results/probe-ramp/)
    for i, div in enumerate(WARM_RAMP):
        _round(comm, [max(cnt1 // div // n * n, n)] * nchan, 4 + i, timed=False)
    if WARM_RAMP:
        time.sleep(GAP_S)   # every shaper's bucket full again before round 1
    t1 = _round(comm, [cnt1] * nchan, 0)
    cnt2 = round2_counts(t1, cnt1, n) if t1 else None
    t2 = None
    if t1:
        time.sleep(GAP_S)
        t2 = _round(comm, cnt2, 2)
    mbps = rates_from_rounds(t1, t2, cnt1, cnt2, es) if t1 and t2 else None
    how = "difference of the rounds"
    if mbps is None and t2:   # noise larger than the difference (a fast loopback): round 2
        mbps, how = rates_of_round(t2, cnt2, es), "round 2 alone"
    ms = (time.perf_counter() - t0) * 1e3
    names = [comm._mesh.chan_name(c) for c in range(nchan)]
    if mbps is None:
        log.warn("TOPO", f"rate probe: a rail was not timed on every rank (it failed during "
                 f"the probe?); the prior stays {'nominal' if _has_nominal(comm) else 'equal'}")
        return None
    mbps = snap_equal(mbps)
    comm.planner.model.nominal = list(mbps)
    comm.planner.model.prior_known = True   # its cold calls are no longer the best it has
    comm.planner.model.version += 1
    # the algorithm choice's link speeds too (agreed: the same on every rank)
    k = comm.planner.nconns
    comm.planner.set_rail_rates([sum(mbps[i:i + k]) for i in range(0, len(mbps), k)],
                                ring_payload=True)
    log.info("TOPO", f"rate probe ({cnt1 * es} B then {[c * es for c in cnt2]} B per channel "
             f"over {n} ranks, {ms:.0f} ms, {how}): "
             + ", ".join(f"{nm} {r:.0f} Mbit/s" for nm, r in zip(names, mbps))
             + " -> cost-model prior split "
             + ", ".join(f"{nm} {100 * r / sum(mbps):.1f}%" for nm, r in zip(names, mbps)))
    return {"mbps": {nm: round(r, 1) for nm, r in zip(names, mbps)},
            "bytes": [cnt1 * es, [c * es for c in cnt2]], "ms": round(ms, 1), "how": how,
            "agreed_ns": [t1, t2]}


def _round(comm, counts, k, timed=True):
    """One timed allreduce with counts[c] elements on channel c, and the agreement of its
    per-channel times (int64 MAX of [ns] + [-ns]: every rank gets the same integers)."""
    es, nchan = 4, comm.nchan
    offs = [sum(counts[:c]) for c in range(nchan)]
    buf = np.zeros(sum(counts), np.float32)
    plan = Plan([(c, offs[c], counts[c]) for c in range(nchan)], ALGO_RING, None, es)
    _run(comm, "rate probe", SEQ_BASE + k, buf, DType.FLOAT32, ReduceOp.SUM, plan,
         lambda s, algo, chan, off, c, src: _eng.ring_allreduce(
             s, chan, address(buf) + off * es, address(src) + off * es, c))
    if not timed:
        return None
    mine = [t for t, _ in comm._engine.channel_times_ns()]
    # MAX of both: max and -min
    return agreed_times(agree_max(comm, mine + [-t for t in mine], SEQ_BASE + k + 1), nchan)


def agree_max(comm, values: list[int], seq: int) -> list[int]:
    """The element-wise MAX over the ranks of values (int64, exact: every rank gets the same
    integers), by recursive doubling on the best channel."""
    vec = np.array(values, np.int64)
    agree = Plan([(comm.planner.best_channel(), 0, vec.size)], ALGO_RD, None, 8)
    _run(comm, "start-up agreement", seq, vec, DType.INT64, ReduceOp.MAX, agree,
         lambda s, algo, chan, off, c, src: _eng.rd_allreduce(
             s, chan, address(vec) + off * 8, address(src) + off * 8, c))
    return [int(x) for x in vec]


def _has_nominal(comm):
    return any(x != 1.0 for x in comm.planner.model.nominal)


def _run(comm, name, seq, arr, dt, op, plan, build):
    """One internal collective on arr in place, with a fixed plan, never cached or recorded."""
    req = Request(comm, name, seq, arr)
    req.spec = (_eng.COLL_ALLREDUCE, int(dt), int(op), arr.size, -1, lambda: plan, build, None,
                arr, True)
    with comm._st.lock:
        comm._st.busy = True
    last = comm._st.last_plan
    try:
        comm._execute(req)
    finally:
        comm._st.last_plan = last
        with comm._st.lock:
            comm._st.busy = False


def startup(comm, cfg) -> dict:
    """Decide and, if so, probe: {"probed": bool, "why": str, ...result}. Logged (TOPO)."""
    rails = [(r.name, r.properties().speed_mbps, bool(getattr(getattr(r, "iface", None),
                                                              "is_loopback", False)))
             for r in comm._mesh.rails]
    go, why = decide(cfg["PROBE"], rails, comm.size, cfg["SPLIT"])
    out = {"probed": False, "why": why}
    if not go:
        log.info("TOPO", f"rate probe skipped: {why}")
        return out
    log.info("TOPO", f"rate probe: {why}")
    nbytes = cfg["PROBE_BYTES"]
    res = probe(comm, int(nbytes) if nbytes != float("inf") else 512 << 10)
    if res is not None:
        out.update(res, probed=True)
    return out
