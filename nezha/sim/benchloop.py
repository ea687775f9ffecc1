"""The compare bench's call sequence, replayed: what `nezha sim lab --replay` predicts.

bench/_common.py times a size like this: two probe calls (barrier, call, barrier), then
warm-up calls, a barrier, and the timed calls, each followed by a barrier outside the
timer; the row's time is the mean over ranks of each rank's mean call. The replay runs the
same calls in the same order, from the smallest size the run has at 64 KiB and up, with:
- the planner learning as the communicator makes it learn: every call's per-channel times
  (each rank's time to its last op on the channel, engine.channel_times_ns) go to
  CostModel.record when executor._feeds says so, and a sync applies them when
  CostModel.sync_due() says so. So a bucket starts cold and is learned over the calls the
  lab made, instead of starting at its converged split;
- the links' token buckets (bucket.py) carried from call to call, refilled during the
  gaps: a barrier between calls, and a model sync when one is due. A gap lasts `gap`
  seconds: the lab's own latency for a small collective (the same fast path and wire as
  the barrier), read from the file by small_latency(). Between two sizes every bucket
  fills (the comment at PROBE_CALLS says why);
- the start-up rate probe's prior, when the run had one (seed_probe): the rates it agreed
  on, from the run's comm.stats(), seed the cost model as rateprobe.probe() did; and the
  step latency it measured (seed_step_latency), as topo/steplatency.py gave it.
"""
import numpy as np

from nezha import costmodel
from nezha.costmodel import GLOBAL_MIN_BYTES
from nezha.failover import LAZY_MAX_BYTES
from nezha.lab import shaping
from nezha.sim import bucket as B
from nezha.sim import fabric as F
from nezha.sim import network as NW
from nezha.sim import nezha_sched as N
from nezha.topo import crowd

PROBE_CALLS = 2  # bench/_common.PROBE_CALLS
# Between two sizes the bench (bench/_common.run_benchmark) gathers the size's statistics
# (summarize: an MPI Allreduce of the samples and three small ones), prints the row, makes the
# next size's buffers and plans it (barrier, an MPI MAX), and nezha builds the new size's
# schedule: milliseconds of Python on 4 ranks sharing 2 cores, against the 1.75 ms a
# 400 Mbit/s bucket (87 632 B) needs to fill. The replay takes every bucket as full when a
# size starts. It matters at the first size striped over equal rails (128 KiB): a rail the
# previous size did not use holds a full bucket, and if the other one does not, its first
# syncs make the idle rail look several times faster. Until the split picked its rails by
# the prior (Planner.split), that took the other rail off the size for good (its piece fell
# below MIN_RAIL_PIECE and a one-slice plan is never measured); now it keeps a small share
# until the next sync.


# Runs started before this ran with NEZHA_MIN_RAIL_PIECE=64k (32k was the default for a
# morning: on 400 + 100 Mbit/s it split 256 KiB and learned the slow rail's share from
# token-bucket bursts, 2.4x slower; the default then and now); a run's own
# NEZHA_MIN_RAIL_PIECE, when its env set one, wins, then the defaults the compare suite
# records (nezha_defaults): a number, or "auto" since the default follows the host layout
# and crowding (costmodel.auto_min_piece: planner_then applies it to the run's layout and
# CPUs as the ranks did).
PIECE_64K_UNTIL = "2026-11-24T08:50"
# Since eebfdf5 (2026-11-27 12:56 UTC) a small striped collective is lazy too, and a lazy
# striped one never feeds the model (executor._feeds); compare documents record it as
# nezha_defaults.LAZY_STRIPED since session 21, older ones by their start time.
LAZY_STRIPED_SINCE = "2026-11-27T12:57"
# A cost-model sync runs inside the collective that fed it (executor._feed_model): a small
# allreduce with a vote, built in Python each time, on 4 ranks sharing 2 cores. Measured in
# the lab by bench/sync_cost.py: 1.57 ms per sync on average over 4 ranks x 40 calls
# (docs/results/session21/sim-replay/sync-cost.txt). The bench's timer includes it, and the
# links idle meanwhile.
SYNC_S = 1.57e-3
# The bench's row is the mean over ranks of each rank's own clock, each from its own
# barrier exit; the replay starts every rank at once, ends them together, and so predicts
# the span (last rank's end minus first rank's start). Rank i reads e_i - s_i, so the row
# is span - lag - end: lag, the ranks' mean start after the first (barrier-exit skew), end,
# their mean end before the last (4 ranks on 2 cores: they wake and return in turn). One
# constant for both, fitted (calibrate.rank_skew: least squares in the row's relative error)
# on the runs of session 26 with every rank's call times, `nezha sim calibrate
# docs/results/session26/ina-sim/{,first/}compare-*/compare.json.gz`: nezha-rail0 and
# nezha-ina, 64 KiB - 64 MiB, 330 points: lag 50.8 + end 223.3 = 274.1 µs. Checked on
# runs it did not see (session 21's nezha-all, docs/results/session28/sim-skew): the same
# fit on those gives 281, on session 21's one-rail runs 319.
RANK_SKEW_S = 274e-6


def planner_then(pl, doc):
    """The planner as the run's code had it, at the run's crowding: runs whose compare
    document does not record HOT_CAP split hot buckets by their own rates alone (a slow
    shaped rail's burst drew 256-512 KiB onto it); CostModel._capped bounds them by the
    prior since. Runs that do not record SYNC_BYTES_MAX synced every SYNC_BYTES, steady or
    not. Runs that do not record PIECE_BY_TIME / PROBE_LINK_RATES ran before session 25,
    PIECE_BY_STEP before session 26, HYST_BY_TIME before session 27, SKIP_COLD before
    session 28."""
    defaults = doc.get("nezha_defaults") or {}
    cpus = (doc.get("host") or {}).get("cpus")
    if cpus and getattr(pl, "hosts", None):
        # the lab's namespaces share one machine's CPUs: the crowding its ranks agreed on
        # (MIN_RAIL_PIECE=auto and the step latencies follow it)
        pl.set_hosts(pl.hosts, crowd.crowding([{"machine": "lab", "cpus": cpus}] * len(pl.hosts)))
    pl.model.cap_hot = bool(defaults.get("HOT_CAP"))
    pl.model.learn_striped = bool(defaults.get("LEARN_STRIPED"))  # recorded since session 21
    pl.model.sync_max = int(defaults.get("SYNC_BYTES_MAX", costmodel.SYNC_BYTES))
    # recorded since session 27: a split moves by the modelled time it saves
    # (CostModel._worth_moving); before, by 1 % of the payload
    pl.model.hyst_by_time = bool(defaults.get("HYST_BY_TIME"))
    # recorded since session 28: a bucket's cold call is not learned from where the prior
    # is measured (CostModel.record); before, it was
    pl.model.skip_cold = bool(defaults.get("SKIP_COLD"))
    # recorded since session 25: a slow rail's piece judged by time, the probe's rates as
    # the links' with a measured step (Planner.piece_by_time, probe_link_rates)
    pl.piece_by_time = bool(defaults.get("PIECE_BY_TIME"))
    pl.probe_link_rates = bool(defaults.get("PROBE_LINK_RATES"))
    # recorded since session 26: a second rail's slice priced in measured steps
    # (Planner.piece_by_step); before, NEZHA_MIN_RAIL_PIECE alone
    pl.piece_by_step = bool(defaults.get("PIECE_BY_STEP"))
    if hasattr(pl, "_link_rates"):  # not on a stand-in with a model only (test_planner)
        pl._link_rates()
        pl._set_piece_model()
    lazy = defaults.get("LAZY_STRIPED")
    pl.lazy_striped = bool(str(doc.get("started") or "") >= LAZY_STRIPED_SINCE
                           if lazy is None else lazy)
    return pl


def failover_of(run_doc, nchan):
    """Did the run's communicator vote (comm.stats()["failover"]; by default it does on
    several rails)? Only a voting collective can be lazy."""
    fo = ((run_doc or {}).get("stats") or {}).get("failover")
    return nchan > 1 if fo is None else bool(fo)


def lazy_of(pl, plan, nbytes, failover):
    """failover.lazy_ok for a replayed allreduce: voting, small, and one slice or (since
    eebfdf5) striped."""
    return bool(failover and 0 < nbytes <= LAZY_MAX_BYTES
                and (len(plan.slices) == 1 or getattr(pl, "lazy_striped", False)))


def lab_overrides(doc, run=None):
    """The configuration a lab run's planner had, as far as the replay needs it: ring from
    64 KiB (NEZHA_ALGO=ring) and its minimum rail piece."""
    env = (run or {}).get("env") or {}
    piece = env.get("NEZHA_MIN_RAIL_PIECE") or (doc.get("nezha_defaults") or {}).get(
        "MIN_RAIL_PIECE")
    if piece is None and str(doc.get("started") or "") < PIECE_64K_UNTIL:
        piece = "64k"
    return {"ALGO": "ring", **({"MIN_RAIL_PIECE": piece} if piece else {})}


def small_latency(rows, upto=1024):
    """Median time (s) of the system's calls of at most `upto` bytes: the gap a barrier
    leaves between two calls."""
    t = [r["avg_us"] * 1e-6 for r in rows if 0 < r["nbytes"] <= upto]
    return float(np.median(t)) if t else 0.0


def call(pl, fab, host_of, nbytes, alpha, buckets, esize=4):
    """One allreduce: (plan, per-rank time, per-rank per-channel time to its last op)."""
    wl, plan = N.workload("allreduce", nbytes, pl, esize)
    r = NW.simulate(wl, fab, host_of, "rail", 1, alpha, tol=1e-4, buckets=buckets)
    n, nchan = pl.ranks, pl.nchan
    end = np.where(np.isnan(r.t_end), 0.0, r.t_end)
    chan_t = np.zeros((n, nchan))
    for side in (wl.src, wl.dst):  # a rank's ops: its sends, receives and reductions
        np.maximum.at(chan_t, (side, np.minimum(wl.chan, nchan - 1)), end)
    return plan, chan_t.max(axis=1), chan_t


def feed(pl, plan, nbytes, chan_t, esize=4, lazy=False):
    """executor._feed_model for all ranks at once: record the ranks' mean per-channel
    times (the sync sums the ranks' times and divides by their number); True if a
    sync ran. As executor._feeds: a lazy striped call below GLOBAL_MIN_BYTES does not
    record (it stays on the fast path)."""
    if plan.key is None or pl.nchan <= 1 or not ((len(plan.slices) > 1 and not lazy)
                                                  or nbytes >= GLOBAL_MIN_BYTES):
        return False
    nb = [0] * pl.nchan
    for chan, _, cnt in plan.slices:
        nb[chan] += cnt * esize
    used = chan_t.mean(axis=0) * 1e9
    m = pl.model
    m.record(plan.key, nb, [float(used[c]) if nb[c] else 0.0 for c in range(pl.nchan)])
    if not m.sync_due():
        return False
    keys = m.sync_keys()
    m.apply(keys, m.sync_vector(keys), 1)
    return True


def replay(pl, fab, host_of, schedule, alpha, buckets, gap, budget=None, refill=True,
           failover=False, sync_s=SYNC_S, step=None):
    """Run schedule [(nbytes, untimed calls, timed calls[, algorithm])] in order: an
    algorithm the run recorded for the size (ring, rd, rab) is the planner's for it
    (pin_algorithm); returns rows
    {nbytes, predicted_s (the bench's mean), first_s, last_s, calls, plans}.
    budget: the bench's --time-budget; a first probe call slower than it (the slowest
    rank's, with the barrier after it) skips the second (compare._plan_early_stop).
    refill: every bucket is full again when a size starts (the bench's work between two
    sizes, the comment at PROBE_CALLS); False: only the barrier gaps refill them.
    failover: the run's communicator votes (failover_of), so small calls are lazy.
    sync_s: what a model sync adds to the call that runs it (SYNC_S). step: step(nb) runs
    one call instead, returning (plan, mean over ranks, slowest rank) in s and leaving the
    buckets as after the barrier that follows it (ina_sched.replays: an INA rail's calls)."""
    rows = []

    def one(nb):
        if step is not None:
            return step(nb)
        plan, t_rank, chan_t = call(pl, fab, host_of, nb, alpha, buckets)
        synced = feed(pl, plan, nb, chan_t, lazy=lazy_of(pl, plan, nb, failover))
        extra = sync_s if synced else 0.0  # inside the call, links idle
        buckets.idle(gap + extra)  # the barrier after it (and the sync)
        return plan, float(t_rank.mean()) + extra, float(t_rank.max()) + extra

    for k, (nb, untimed, timed, *algo) in enumerate(schedule):
        if algo:
            pin_algorithm(pl, algo[0])
        if k and refill:
            buckets.fill()
        plans, times, i = [], [], 0
        while i < untimed:
            plan, _, t = one(nb)
            plans.append(repr(plan))
            # the bench's probe: the slowest rank's call and the barrier after it (MPI MAX)
            if i == 0 and budget and t + gap > budget and untimed >= PROBE_CALLS:
                i += 1  # the second probe is skipped, though the bench counts it
            if i < PROBE_CALLS:
                buckets.idle(gap)  # a probe has a barrier on both sides
            i += 1
        buckets.idle(gap)  # time_loop's barrier before the timed calls
        for _ in range(timed):
            plan, t, _ = one(nb)
            plans.append(repr(plan))
            times.append(t)
        rows.append({"nbytes": nb, "predicted_s": float(np.mean(times)),
                     "first_s": times[0], "last_s": times[-1], "calls": untimed + timed,
                     "plans": sorted(set(plans), key=plans.index)})
    return rows


def schedule_of(run_doc, min_size=64 << 10):
    """[(nbytes, untimed, timed, algorithm)] of one bench run (its JSON 'doc'), sizes >=
    min_size; algorithm: what the run's planner picked for the size (the bench's
    `algorithm`, rank 0's comm.algorithm_for after the size's calls), or None."""
    return [(r["nbytes"], int(r.get("warmup") or 0), int(r["iterations"]),
             r.get("algorithm")) for r in run_doc["results"] if r["nbytes"] >= min_size]


def pin_algorithm(pl, name):
    """Make the planner pick the allreduce algorithm the lab's did for a size (ring, rd,
    rab; anything else, e.g. None from a run that did not record it, leaves the planner as
    it is: lab_overrides' ring). The replay's planner has no step-latency model of its own
    (the lab's one-rail runs since session 13 picked rd at 64 KiB and rab at 128 KiB, where
    the replay ran ring: docs/results/session28/sim-skew)."""
    if name in ("ring", "rd", "rab") and pl.algo != name:
        pl.algo = name
        memo = getattr(pl, "_choice_memo", None)
        if memo is not None:
            memo.clear()


def replays(doc, system, rails, alpha, min_size=64 << 10, probe=True, refill=True,
            sync_s=SYNC_S):
    """Every run of `system` in a compare document, replayed: {False: [...], True: [...]},
    one {nbytes: predicted s} per run, on flat links (False) or with the lab's tbf buckets
    (True). Links run at tbf's goodput ceiling: it counts whole frames. probe: seed the
    planner with the run's start-up rate probe, when it ran one (seed_probe); refill: see
    replay()."""
    lab = doc.get("lab") or {}
    n, rates_bps = int(lab["hosts"]), lab["rates_bps"]
    good = shaping.goodput_ceiling(lab.get("mtu") or shaping.DEFAULT_MTU)
    gap = small_latency((doc.get("summary") or {}).get("allreduce", {}).get(system) or [])
    budget = (doc.get("options") or {}).get("time_budget")
    out = {False: [], True: []}
    for run in doc.get("runs") or []:
        if run.get("system") != system or run.get("collective") != "allreduce" \
                or not run.get("doc"):
            continue
        for tbf in (False, True):
            fab = F.MultiRail(n, len(rails), [rates_bps[i] * good / 1e9 for i in rails], 0.0)
            host_of = fab.place(n)
            bk = B.lab_buckets(fab, [rates_bps[i] for i in rails])
            if not tbf:
                bk.burst[bk.shaped] = 0.0
                bk.tokens[:] = 0.0
            # what the lab ran: ring from 64 KiB, 1 MiB failover pieces, the prior the
            # probe found (equal without one)
            pl = planner_then(N.make_planner(n, host_of, len(rails), None, 1,
                                             lab_overrides(doc, run)), doc)
            pl.piece_bytes = 1 << 20
            if probe:
                seed_probe(pl, run["doc"], rails)
                seed_step_latency(pl, run["doc"])
            rows = replay(pl, fab, host_of, schedule_of(run["doc"], min_size), alpha, bk, gap,
                          budget, refill, failover_of(run["doc"], len(rails)), sync_s)
            out[tbf].append({r["nbytes"]: r["predicted_s"] for r in rows})
    return out


def probe_mbps(run_doc, rails):
    """The start-up rate probe's agreed Mbit/s per rail of one bench run (rank 0's
    comm.stats()["probe"], the same on every rank), or None if it did not probe."""
    p = ((run_doc.get("stats") or {}).get("probe") or {})
    mbps = p.get("mbps") or {}
    if not p.get("probed") or len(rails) < 2 or any(f"rail{i}" not in mbps for i in rails):
        return None
    return [float(mbps[f"rail{i}"]) for i in rails]


def seed_probe(pl, run_doc, rails):
    """Seed the planner as rateprobe.probe() seeded the lab's: the probe's agreed rates
    become the cost model's nominal prior (cold buckets split by them until the channels'
    overall rates are measured) and the rail speeds. Taken from the run's stats, not
    simulated: they are what that run's planner started from. Returns them, or None."""
    mbps = probe_mbps(run_doc, rails)
    if mbps is None:
        return None
    pl.model.nominal = list(mbps)
    pl.model.version += 1
    pl.set_rail_rates(mbps, ring_payload=True)
    return mbps


def seed_step_latency(pl, run_doc):
    """Give the planner the step latency the run measured at start-up (topo/steplatency.py,
    comm.stats()["probe"]["step"], recorded since session 24), as its ranks did; runs
    before it (or that did not measure) keep the constants. Returns seconds, or None."""
    step = (((run_doc.get("stats") or {}).get("probe") or {}).get("step") or {})
    if not step.get("measured") or not step.get("alpha_us"):
        return None
    pl.set_step_latency(float(step["alpha_us"]) * 1e-6, "measured at start-up (the run's)")
    if step.get("hop"):   # runs since session 27: the whole-payload steps' bytes too
        pl.set_hop_samples(step["hop"], "measured at start-up (the run's)")
    if step.get("slice"):  # runs since session 31: a second slice's cost too
        pl.set_slice_step(step["slice"]["steps"], "measured at start-up (the run's)")
    return pl.rail_alpha


def slowest(doc, system, nbytes):
    """Median over a compare document's runs of the slowest rank's mean time (s)."""
    vals = [r["max_us"] * 1e-6 for run in doc.get("runs") or []
            if run.get("system") == system and run.get("collective") == "allreduce"
            for r in (run.get("doc") or {}).get("results") or [] if r["nbytes"] == nbytes]
    return float(np.median(vals)) if vals else float("nan")


def row_of_span(span_s, skew_s=None):
    """The bench's row predicted from a predicted span: every rank's own clock is the span
    less its lag at the start and its lag at the end; their means are skew_s together
    (default RANK_SKEW_S). Never below 0."""
    return max(span_s - (RANK_SKEW_S if skew_s is None else skew_s), 0.0)


def span(doc, system, nbytes):
    """Median over a compare document's runs of the mean span of the timed calls (s): the
    last rank's end minus the first rank's start, on the one clock of the lab's namespaces
    (results' rank_calls, bench/_common.rank_calls, since session 21), or NaN. The replay
    starts every rank at once and its ranks end together, so this is what it predicts;
    the bench's row is less by the ranks' mean lag at the start and at the end
    (bench/rankskew.py)."""
    vals = []
    for run in doc.get("runs") or []:
        if run.get("system") != system or run.get("collective") != "allreduce":
            continue
        for r in (run.get("doc") or {}).get("results") or []:
            calls = r.get("rank_calls")
            if r["nbytes"] == nbytes and calls:
                s = np.asarray(calls["start_us"], float)
                e = s + np.asarray(calls["us"], float)
                vals.append(float((e.max(axis=0) - s.min(axis=0)).mean()) * 1e-6)
    return float(np.median(vals)) if vals else float("nan")
