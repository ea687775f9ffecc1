"""Cost feedback: what each channel delivers, learned from finished collectives.

Every rank records, per collective, how long each channel took for its slice. Those local
times differ between ranks, so they never steer the plan directly: every few megabytes of
striped traffic the ranks sum them in one small internal allreduce (sync), and only the
summed numbers update the model. Syncs happen at the same point of the collective sequence
on every rank, so every rank holds the same model and plans the same split.

Per size bucket (collective, algorithm, log2 of the payload) the model keeps each channel's
delivered rate rho = bytes / seconds (EWMA). Splitting the next payload in proportion to
rho moves bytes from the channel that finished last to the one that finished first; the
fixed point is the split at which all channels finish together (water-filling for affine
costs, reached by feedback rather than by fitting alpha and beta).

States of a bucket (seeds §1.5, "cold/hot start"):
  COLD  fewer than K_WARM synced samples: split by the prior (the channels' overall rates
        if any were measured, else nominal = equal);
  HOT   split by the bucket's own rates.
A channel whose rate moves by more than SHIFT_FACTOR for SHIFT_SYNCS syncs in a row (a rail
slowed down or sped up), or that joins or leaves, sends every bucket back to COLD.

The sync interval (sync_bytes) starts at SYNC_BYTES. A sync in which every bucket it carries
was HOT already and no channel's rate moved by SHIFT_FACTOR doubles it, up to SYNC_BYTES_MAX
(a steady model is only kept up to date, and each sync is a collective of its own: issue
14 found 4 of them, 5.5-9.4 ms, in every DDP step); any other sync (a COLD bucket in it, a
rate shift) and a channel joining or leaving set it back. It follows synced state only, so
every rank syncs at the same point.
"""
import collections
import math

import numpy as np

from nezha import log

K_WARM = 3          # synced samples before a bucket trusts its own rates
LAMBDA = 0.5        # EWMA weight of a new sample
SHIFT_FACTOR = 1.8  # rate change that counts as a shift (either way)
SHIFT_SYNCS = 2     # consecutive shifted syncs before every bucket goes COLD
HYSTERESIS_TIME = 0.005  # move a bucket's split only when the split in force, under the new
# rates, is modelled this much slower than the new one (fraction of its modelled time). A
# share threshold is wrong on unequal rails: on 400 + 100 Mbit/s a point of share toward the
# slow rail costs ~5 % of the time, so a 1 %-of-payload threshold kept the split that slow
# first calls (idle VM pages) had pulled toward the 100, 3-4 % slower for the whole job
# (session 26). 0.5 %: well below what a point costs on any split, above the jitter of the
# EWMA target between syncs. A constant, not a setting: every rank must apply the same rule.
HYSTERESIS = 0.01   # the rule before session 27 (ignore split changes smaller than this
# share of the payload), kept to replay runs made with it (sim: hyst_by_time off)
EQUAL_BAND = 0.03   # shares this close to equal are made exactly equal (Ethereal)
SYNC_BYTES = 8 << 20  # striped bytes between syncs (while the model is not steady)
SYNC_BYTES_MAX = 32 << 20  # ... doubled by each steady sync up to this
SYNC_COUNT = 64       # ... or this many recorded collectives
GLOBAL_MIN_BYTES = 256 << 10  # slices at least this large feed the overall (prior) rate
LEARN_BYTES = 256 << 10     # while a bucket is cold, sync after this much striped traffic

COLD, HOT = "COLD", "HOT"


class Bucket:
    """Learned state of one size bucket."""

    __slots__ = ("rho", "samples", "state", "shares", "mask")

    def __init__(self, nchan):
        self.rho = [None] * nchan
        self.samples = 0
        self.state = COLD
        self.shares = None   # the split in force; changes only at syncs (hysteresis)
        self.mask = None     # which channels it was made for


class CostModel:
    """Per-channel delivered rates, per size bucket, with the cold/hot state machine."""

    def __init__(self, nchan, names, nominal=None, static=False):
        self.nchan = nchan
        self.static = static               # NEZHA_SPLIT=equal: never leave the prior
        self.names = names
        self.nominal = list(nominal) if nominal else [1.0] * nchan
        self.rho = [None] * nchan          # overall rate per channel (prior for COLD buckets)
        self.shifted = [0] * nchan
        self.buckets = {}
        self.pending = {}                  # key -> [bytes per chan, seconds per chan, count]
        self.pending_bytes = 0
        self.pending_count = 0
        self.syncs = 0
        self.sync_bytes = SYNC_BYTES  # the interval in force (identical on every rank)
        self.sync_max = SYNC_BYTES_MAX  # SYNC_BYTES only to replay runs made before (sim)
        self.version = 0   # bumped whenever a plan could change (plan cache key)
        self.cap_hot = True  # _capped; off only to replay runs made before it (sim)
        self.learn_striped = True  # LEARN_BYTES counts striped records only; off: the sim
        # replaying runs made before (session 21)
        self.hyst_by_time = True  # _worth_moving by modelled time; off: the sim replaying
        # runs made before (session 27), which moved by HYSTERESIS of the payload
        # the prior is a measurement (agreed nominal speeds, or the start-up probe's rates:
        # topo/rateprobe.py sets it), not the equal split of rails of unknown speed
        self.prior_known = nominal is not None
        self.skip_cold = True  # record() drops a bucket's cold call (see there); off: the
        # sim replaying runs made before (session 28), which learned from it
        self._seen = set()     # bucket keys record() has been given once

    # ---- local recording (not used for planning until synced) ------------------------

    def record(self, key, chan_bytes, chan_ns):
        """Add one finished collective's per-channel (bytes, ns) of this rank.

        A bucket's first collective of the job (its cold call) is not learned from when the
        prior is a measurement: it pays first touches the others do not (its spare's pages;
        on a VM that has handed idle memory back to its host, 10x the usual cost: session
        26), which lands on the channels unevenly. On 400 + 100 Mbit/s after 3 s idle it made
        the 400 look 8 % slow: the first sync split 78.7 % where the optimum is 80 %, and
        calls 2-5 ran 3-7 % slow (session 27). The second call is learned from instead, still
        on the prior's split. With an equal prior of unknown speeds the cold call is learned
        from: a skewed rate is far better than an even split of unequal rails. Every rank
        records the same collectives, so every rank drops the same one."""
        if sum(1 for b in chan_bytes if b) < 1:
            return
        if self.skip_cold and key not in self._seen:
            self._seen.add(key)
            if self.prior_known or all(r is not None for r in self.rho):
                return
        acc = self.pending.setdefault(key, [[0.0] * self.nchan, [0.0] * self.nchan, 0])
        for c in range(self.nchan):
            if chan_bytes[c]:
                acc[0][c] += chan_bytes[c]
                acc[1][c] += chan_ns[c] * 1e-9
        acc[2] += 1
        self.pending_bytes += sum(chan_bytes)
        self.pending_count += 1

    def sync_due(self):
        """True when enough has been recorded; identical on every rank (same collectives).

        A cold bucket learns fast (a sync after every striped collective of some size), a
        hot one is only kept up to date."""
        if not self.pending_count:
            return False
        if self.pending_bytes >= self.sync_bytes or self.pending_count >= SYNC_COUNT:
            return True
        # only a striped record teaches a COLD bucket its shares: a one-channel one (a rail
        # left out or dead, a slow one below MIN_RAIL_PIECE) never makes it HOT, and synced
        # after every collective of 256 KiB or more, 1.5 ms each in the lab (session 21)
        return self.pending_bytes >= LEARN_BYTES and any(
            self.state(k) == COLD and (not self.learn_striped or sum(1 for b in acc[0] if b) > 1)
            for k, acc in self.pending.items())

    def sync_keys(self):
        """Bucket keys in the next sync, in an order every rank agrees on."""
        return sorted(self.pending)

    def sync_vector(self, keys):
        """This rank's pending seconds per (key, channel): the vector the ranks sum."""
        v = np.zeros(len(keys) * self.nchan, np.float64)
        for i, k in enumerate(keys):
            v[i * self.nchan:(i + 1) * self.nchan] = self.pending[k][1]
        return v

    # ---- agreed updates --------------------------------------------------------------

    def apply(self, keys, summed, nranks):
        """Update rates from the ranks' summed times (the same on every rank)."""
        self.syncs += 1
        shift = [False] * self.nchan
        steady = bool(keys)  # every bucket of this sync HOT already, no rate shift
        for i, k in enumerate(keys):
            nbytes, _, count = self.pending[k]
            b = self.buckets.setdefault(k, Bucket(self.nchan))
            steady = steady and b.state == HOT
            for c in range(self.nchan):
                secs = summed[i * self.nchan + c] / nranks
                if not nbytes[c] or secs <= 0:
                    continue
                rate = nbytes[c] / secs
                b.rho[c] = rate if b.rho[c] is None else (1 - LAMBDA) * b.rho[c] + LAMBDA * rate
                if nbytes[c] / count >= GLOBAL_MIN_BYTES:
                    g = self.rho[c]
                    if g is not None and not (1 / SHIFT_FACTOR < rate / g < SHIFT_FACTOR):
                        shift[c] = True
                    self.rho[c] = rate if g is None else (1 - LAMBDA) * g + LAMBDA * rate
            b.samples += 1
            if b.state == COLD and b.samples >= K_WARM and all(
                    b.rho[c] is not None for c in range(self.nchan) if (b.shares or [1] * self.nchan)[c]):
                b.state = HOT
                log.info("PLAN", f"bucket {_key_text(k)} COLD -> HOT (rates "
                         f"{self._rates_text(b.rho)})")
        # from what every rank applied alike (the summed times), never from local timings
        steady = steady and not any(shift)
        self.sync_bytes = min(2 * self.sync_bytes, self.sync_max) if steady else SYNC_BYTES
        for c in range(self.nchan):
            self.shifted[c] = self.shifted[c] + 1 if shift[c] else 0
            if self.shifted[c] >= SHIFT_SYNCS:
                self.shifted[c] = 0
                # the last sample is the truth now; forget the old rate and relearn
                self.rho[c] = self._last_rate(keys, summed, nranks, c) or self.rho[c]
                self.reset(f"rate of {self.names[c]} changed to {self._mbps(self.rho[c])}")
        self.pending, self.pending_bytes, self.pending_count = {}, 0, 0
        self._restep()
        self.version += 1

    def _last_rate(self, keys, summed, nranks, c):
        best = None
        for i, k in enumerate(keys):
            nbytes = self.pending[k][0][c]
            secs = summed[i * self.nchan + c] / nranks
            if nbytes >= GLOBAL_MIN_BYTES and secs > 0:
                best = nbytes / secs
        return best

    def reset(self, why):
        """Every bucket back to COLD (a rail joined, left or changed speed)."""
        for b in self.buckets.values():
            b.state, b.samples, b.rho = COLD, 0, [None] * self.nchan
        self.sync_bytes = SYNC_BYTES
        self.version += 1
        log.info("PLAN", f"all buckets -> COLD: {why}")

    def set_channels(self, alive):
        """A channel joined or left (alive: list of bool): relearn everything."""
        self.reset(f"channels now {[n for n, a in zip(self.names, alive) if a]}")

    # ---- planning --------------------------------------------------------------------

    def prior(self):
        """Rates per channel that no one bucket owns: the channels' overall rates once every
        one is measured, else nominal. COLD buckets split by them, and Planner.split picks
        the channels by them (every channel it picks keeps being measured)."""
        if not self.static and all(r is not None for r in self.rho):
            return list(self.rho)
        return list(self.nominal)

    def rates(self, key):
        """(rates per channel for this bucket, state)."""
        b = self.buckets.get(key)
        if not self.static and b is not None and b.state == HOT:
            return [r if r is not None else 0.0 for r in b.rho], HOT
        return self.prior(), COLD

    def prior_shares(self, mask):
        """The split the prior asks for over the channels in mask (equal when nearly equal)."""
        return self._normalize(self.prior(), mask)

    def _target(self, key, mask):
        """The split the current rates ask for (equal when nearly equal: Ethereal)."""
        return self._normalize(self._target_rates(key, mask), mask)

    def _target_rates(self, key, mask):
        """The rates per channel _target splits by."""
        rates, state = self.rates(key)
        if state == HOT and any(m and r is None for m, r in zip(mask, self.buckets[key].rho)):
            rates = self.prior()  # a channel this bucket never ran on: no share of 0 for ever
        elif state == HOT and self.cap_hot:
            rates = self._capped(rates, mask)
        return rates

    def _capped(self, rates, mask):
        """A hot bucket's rates, where no channel the prior finds slower gets a larger
        share, relative to the fastest, than the prior gives it. A small payload's piece on
        a slow shaped rail fits that rail's idle token bucket, so the bucket measures a burst
        (the lab's 100 Mbit/s rail learned at 331, the 400 at 170: 256-512 KiB went hot at
        34/66 and took as long as twice the size). If every channel pays the same step
        latency the equal-finish split is the sustained rates at any size; the bucket may
        still give a channel less than that."""
        prior = self.prior()
        live = [c for c in range(self.nchan) if mask[c]]
        if not live:
            return rates
        f = max(live, key=lambda c: prior[c])
        if prior[f] <= 0 or rates[f] <= 0:
            return rates
        out = list(rates)
        for c in live:
            if prior[c] < prior[f]:
                out[c] = min(rates[c], rates[f] * prior[c] / prior[f])
        return out

    def _normalize(self, rates, mask):
        w = [rates[c] if mask[c] else 0.0 for c in range(self.nchan)]
        total = sum(w)
        if total <= 0:
            w = [1.0 if mask[c] else 0.0 for c in range(self.nchan)]
            total = sum(w)
        new = [x / total for x in w]
        live = [x for x in new if x > 0]
        if live and max(live) - min(live) <= EQUAL_BAND * 2 / len(live):
            new = [1 / len(live) if x > 0 else 0.0 for x in new]
        return new

    def shares(self, key, mask):
        """Fraction of the payload per channel (0 where mask is False).

        Reading it never changes it, so that ranks that plan a call more or fewer times
        (the plan cache) still agree; it moves only in apply(), with hysteresis."""
        b = self.buckets.setdefault(key, Bucket(self.nchan))
        mask = list(mask)
        if b.shares is None or b.mask != mask:
            b.shares, b.mask = self._target(key, mask), mask
            self._log_split(key, b)
        return b.shares

    def _restep(self):
        # after new (agreed) rates: move each bucket's split where that is worth it
        for key, b in sorted(self.buckets.items()):
            if b.shares is None:
                continue
            rates = self._target_rates(key, b.mask)
            new = self._normalize(rates, b.mask)
            if new != b.shares and self._worth_moving(b.shares, new, rates):
                b.shares = new
                self._log_split(key, b)

    def _worth_moving(self, old, new, rates):
        """The hysteresis, the one rule for every bucket: move from the split in force (old)
        to new when, under the new rates, old's modelled time exceeds new's by more than
        HYSTERESIS_TIME of old's. Its inputs are agreed (the synced rates), so every rank
        decides alike; it runs in apply() only, so a plan cached between syncs stays valid.
        Where the model cannot price a split (a channel in it at rate 0), or replaying a run
        made before session 27 (hyst_by_time off): by share, HYSTERESIS of the payload."""
        if self.hyst_by_time:
            t_old, t_new = makespan(old, rates), makespan(new, rates)
            if math.isfinite(t_old) and math.isfinite(t_new):
                return t_old - t_new > HYSTERESIS_TIME * t_old
            if math.isfinite(t_new):
                return True
        return max(abs(a - o) for a, o in zip(new, old)) >= HYSTERESIS

    def _log_split(self, key, b):
        log.info("PLAN", f"bucket {_key_text(key)} [{b.state}] split "
                 + ", ".join(f"{self.names[c]} {100 * x:.1f}%" for c, x in enumerate(b.shares)))

    def state(self, key):
        """COLD or HOT."""
        b = self.buckets.get(key)
        return b.state if b else COLD

    def summary(self):
        """Rates and states for comm.stats()."""
        return {"syncs": self.syncs, "sync_bytes": self.sync_bytes,
                "rates_mbps": {self.names[c]: (None if r is None else round(float(r) * 8e-6, 1))
                               for c, r in enumerate(self.rho)},
                "buckets": {_key_text(k): {"state": b.state,
                                           "split": None if b.shares is None else
                                           [round(s, 4) for s in b.shares]}
                            for k, b in sorted(self.buckets.items())}}

    def _rates_text(self, rho):
        return ", ".join(f"{self.names[c]} {self._mbps(r)}" for c, r in enumerate(rho))

    @staticmethod
    def _mbps(r):
        return "?" if r is None else f"{r * 8e-6:.0f} Mbit/s"


def makespan(shares, rates):
    """Modelled time of a split per byte of payload: the channel that finishes last, its
    share over its rate. The model keeps no fixed cost per channel apart: a rate is what the
    channel delivered at this bucket's size (bytes over the slice's whole time, its fixed
    cost included), so the payload cancels out. inf when a channel with a share has no
    rate."""
    t = 0.0
    for s, r in zip(shares, rates):
        if s > 0:
            if not r > 0:
                return math.inf
            t = max(t, s / r)
    return t


def bucket_of(coll, nbytes):
    """Size bucket key: (collective, log2 of the payload rounded down)."""
    return (coll, int(math.log2(nbytes)) if nbytes > 0 else -1)


def _key_text(k):
    return f"{k[0]}:{'0' if k[1] < 0 else _size_text(1 << k[1])}+"


def _size_text(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div:
            return f"{n // div}{unit}"
    return str(n)


# ---- choosing an algorithm: flat or hierarchical --------------------------------------
# Nominal links, not the measured rates above: the choice must be the same on every rank
# and must not move while a split is being learned (measured rates are per channel and
# per algorithm, not per link). A step costs its latency plus the bytes of its busiest
# link over that link's rate; pipelined phases overlap, so their bytes count once, on the
# busier of the two links.
RAIL_ALPHA = 25e-6  # s per step between hosts (one TCP hop)
RAIL_RATE = 1.25e9  # B/s of one rail, shared by the host's ranks
SHM_ALPHA = 5e-6    # s per step within a host
SHM_RATE = 4e9      # B/s one rank moves through shared memory
CROWD_CAL = 2.0     # ranks per CPU where the step latencies above were set (the lab: 4
                    # ranks on 2 cores). A step waits while the other ranks of its CPU run
                    # before its partner does, so a more crowded machine scales the
                    # latencies by crowding - CROWD_CAL + 1 (crowding - 1 at CROWD_CAL 2)
HIER_CLEAR = 0.75   # against a latency algorithm (rd, tree) hier must take at most this
                    # share of its time: near a tie the small path keeps the payload
STEP_EFF = 0.85     # share of the link rate a step that does not stream from the one before
                    # it gets (rd, rab, tree): the next send waits for the last byte of the
                    # step before and its reduction, so the pipe drains and refills at every
                    # step, where ring and chain stream from step to step. It is what makes
                    # the ring win over rab for large payloads at the same bytes on the wire
UNPIPELINED = ("rd", "rab", "tree", "direct", "star")
DIRECT_MSG = 0.5    # the direct allgather's step posts n - 1 sends and receives at once:
                    # each after the first costs this many step latencies (CPU: a system
                    # call, a header and a wake-up each way). Not measured on its own: at
                    # 4 ranks it prices direct's latency as rd's two steps, which is what
                    # the lab showed at 1-2 KiB a rank (docs/results/session29/
                    # allgather-small); at 8 ranks and more it keeps rd for the smallest
                    # payloads, where one step's saving is unmeasured
VOTE_COST = 4.0     # a closing vote, in small allreduces (rd of 8 B on one rail; measured
                    # at start-up where topo/steplatency.py ran, so the vote follows). It runs
                    # in the engine (nz_vote, C) but is a control round of its own: every
                    # rank's status to every peer and the verdict back. Measured in the lab
                    # (4 hosts x 2 rails of 400 Mbit/s, 2026-11-24, docs/results/session14/
                    # wave1/ab.py): one vote ~200 us (median of the slowest rank), a barrier
                    # 30-36 us and a 4 B allreduce ~50 us


# NEZHA_MIN_RAIL_PIECE=auto: the smallest rail piece by the job's layout and crowding
# (every rank holds the same ones). A split's second slice repeats every step of the plan
# for half the bytes. With one rank per host at CROWD_CAL ranks per CPU (the lab's 4 x 1)
# 2 x 32 KiB beat 64 KiB whole on two equal rails (0.47x at 64 KiB; 400 + 100: 0.65-0.68x
# at 256 KiB, docs/results/session21/issue17-piece). With several ranks on a host the
# extra slice's steps cost their shared CPUs more than the bandwidth saves (4 x 2
# hierarchical 64 KiB 1.25x slower with 32k, docs/results/session20/issue17-lazy-striped).
# More crowded one-rank-per-host jobs (8 x 1 on 2 CPUs) keep 64k: not measured to win, the
# lab's noise there (2x between identical runs) hid any difference. A per-slice CPU term in
# Layout.time would replace these two points once measured at more layouts.
PIECE_ONE_PER_HOST = 32 << 10
PIECE_SHARED_HOST = 64 << 10
# Where PIECE_ONE_PER_HOST applied and the step latency is measured, the model prices a
# second slice instead (Planner.piece_model): every step of the plan is repeated on the other
# rail for that rail's piece, which costs the CPUs SLICE_STEP measured steps per step on top
# of the bytes. A rail is used where that buys more than it costs at the job's own step and
# rates (Planner._rails_by_model), so the point moves with them instead of a fixed 32 KiB.
# Measured in the lab (docs/results/session26/band32): see there for the value.
SLICE_STEP = 0.75


def auto_min_piece(host_of, crowding=1.0):
    """(bytes, why) of NEZHA_MIN_RAIL_PIECE=auto for this host layout and crowding (ranks
    per CPU on the most crowded machine, topo/crowd.py), both agreed by every rank."""
    most = max(collections.Counter(host_of).values(), default=1)
    if most > 1:
        return PIECE_SHARED_HOST, (f"auto, up to {most} ranks on a host: a second slice's "
                                   "steps cost their shared CPUs")
    if crowding > CROWD_CAL:
        return PIECE_SHARED_HOST, (f"auto, one rank per host but {crowding:g} ranks per CPU: "
                                   "a second slice's steps cost the shared CPUs")
    return PIECE_ONE_PER_HOST, f"auto, one rank per host, {crowding:g} ranks per CPU"


class Layout:
    """Which host every rank is on, and what that costs each algorithm (Layout.time)."""

    def __init__(self, host_of, crowding=1.0, rail_alpha=None, hop=None):
        h = self.host_of = list(host_of)
        # the measured byte cost of a whole-payload step (HopCost, topo/steplatency.py), or
        # None: the bytes of every step at the link's sustained rate
        self.hop = hop
        # with more ranks than CPUs every step also waits for its partner to be scheduled
        # (topo/crowd.py): the steps' latencies grow with the crowding, the rates do not.
        # A measured rail_alpha (topo/steplatency.py, NEZHA_RAIL_ALPHA) already holds this
        # machine's crowding: it replaces the scale, never multiplies it; shm steps follow
        # it in proportion (nothing measures them apart)
        self.crowding = max(1.0, float(crowding))
        c = (rail_alpha / RAIL_ALPHA if rail_alpha else
             max(1.0, self.crowding - CROWD_CAL + 1))
        self.crowd_scaled = not rail_alpha  # the constants, scaled by crowding
        self.rail_alpha, self.shm_alpha = rail_alpha or RAIL_ALPHA * c, SHM_ALPHA * c
        self.n = n = len(h)
        counts = collections.Counter(h)
        self.H = len(counts)
        self.L = n // self.H if len(set(counts.values())) == 1 else None  # ranks per host
        self.ring = self._links([(r, (r + 1) % n) for r in range(n)])
        p2 = 1 << (n.bit_length() - 1) if n else 1
        self.rd = [self._links([(r, r ^ k) for r in range(p2)]) for k in _pow2s(p2)]
        self.fold = self._links([(r, r - p2) for r in range(p2, n)])
        # rd allreduce with the same number of ranks (more than one) on every host of
        # several: each host's ranks hand their input to its first rank over shm, the
        # first ranks run rd between hosts (one rank per host: every step has one pair
        # leaving a host), and hand the result back (rd_hosts.pxi). hosts_rd: its steps
        # between hosts (the fold's two included), 0 where rd runs flat
        hp2 = 1 << (self.H.bit_length() - 1)
        self.hosts_rd = ((hp2.bit_length() - 1) + (2 if self.H > hp2 else 0)
                         if self.H > 1 and self.L and self.L > 1 else 0)
        # the direct allgather: every rank to every other in one step; the most pairs
        # leaving one host (its ranks times the ranks elsewhere), any pair within one
        most = max(counts.values(), default=0)
        self.direct = (max((c * (n - c) for c in counts.values()), default=0), most > 1)
        self._chains = {}

    def rd_blocks_link_bytes(self, nbytes):
        """Bytes the busiest host's link carries over a whole rd allgather or reduce_scatter
        of nbytes (all blocks together): step k moves k of the n blocks on each of the
        step's pairs leaving a host ((P - 1) / P of the payload at P ranks a power of two
        and one rank a host)."""
        return sum(lk[0] * k * nbytes / self.n
                   for k, lk in zip(_pow2s(1 << len(self.rd)), self.rd))

    def rab_link_bytes(self, nbytes):
        """Bytes the busiest host's link carries over a whole rab allreduce of nbytes: the
        halving's and the doubling's step k move k of the p2 blocks on each of the step's
        pairs leaving a host, the fold's two steps the whole payload (3/2 of the payload at 4
        ranks, one a host)."""
        p2 = 1 << len(self.rd)
        return (2 * sum(lk[0] * k * nbytes / p2 for k, lk in zip(_pow2s(p2), self.rd))
                + 2 * self.fold[0] * nbytes)

    def steps(self, coll, algo):
        """How many steps between ranks one slice of algo makes (a second slice on another
        rail makes them all again): ring, rd, rab (the fold's two included), chain."""
        n = self.n
        if n <= 1:
            return 0
        fold = 2 if self.fold != (0, False) else 0
        if algo == "ring":
            return 2 * (n - 1) if coll == "allreduce" else n - 1
        if algo == "rab":
            return 2 * len(self.rd) + fold
        if algo == "rd":
            return len(self.rd) + (fold if coll == "allreduce" else 0)
        if algo == "direct":
            return 1 + max(n - 2, 0) * DIRECT_MSG
        if algo == "chain":  # a broadcast's chain: root -> root+1 -> ... (n - 1 hops)
            return n - 1
        raise ValueError(f"no step count for {algo}")

    def _links(self, pairs):
        """(most pairs leaving one host, any pair within a host) of one step."""
        out, local = collections.Counter(), False
        for a, b in pairs:
            if self.host_of[a] != self.host_of[b]:
                out[self.host_of[a]] += 1
            else:
                local = True
        return max(out.values(), default=0), local

    def _chain(self, root):
        """(links, latency) of the chain root -> root+1 -> ... (a broadcast)."""
        c = self._chains.get(root)
        if c is None:
            hops = [((root + v) % self.n, (root + v + 1) % self.n) for v in range(self.n - 1)]
            lat = sum(self.rail_alpha if self.host_of[a] != self.host_of[b] else self.shm_alpha
                      for a, b in hops)
            c = self._chains[root] = (self._links(hops), lat)
        return c

    def _tree(self, root):
        """Links of every round of the binomial tree from root (a small broadcast)."""
        rounds, k = [], 1
        while k < self.n:
            rounds.append(self._links([((root + v) % self.n, (root + v + k) % self.n)
                                       for v in range(k) if v + k < self.n]))
            k *= 2
        return rounds

    def _star(self, root):
        """Links of the one-round tree from root: the root sends to every other rank."""
        return self._links([(root, (root + v) % self.n) for v in range(1, self.n)])

    def _step(self, links, nbytes, bx, eff=1.0, hop=None):
        e, local = links
        if not e:
            t = 0.0
        elif hop is not None:  # a step that does not stream: its bytes as measured
            t = self.rail_alpha + hop.cost(e * nbytes / bx)
        else:
            t = self.rail_alpha + e * nbytes / bx
        return max(t, self.shm_alpha + nbytes / (SHM_RATE * eff)) if local else t

    def _hosts_rd_local(self, s, eff=STEP_EFF):
        """Seconds of rd_hosts' two shm steps: the first rank takes in (and reduces) the
        other L - 1 inputs, then sends the result to each of them."""
        return 2 * (self.shm_alpha + (self.L - 1) * s / (SHM_RATE * eff))

    def time(self, coll, algo, nbytes, rails=1, root=0, rate=None, measured=True):
        """Modelled seconds of one collective: nbytes is the payload (allgather,
        reduce_scatter: all blocks together), algo a name (ring, rd, rab, chain, tree,
        hier); rails carry it together, rate B/s in all (default: rails * RAIL_RATE).
        measured=False: every step's bytes at the sustained rate, even with a HopCost."""
        n, s = self.n, float(nbytes)
        bx = rate or max(rails, 1) * RAIL_RATE
        if n <= 1:
            return 0.0
        eff = STEP_EFF if algo in UNPIPELINED else 1.0
        hop = self.hop if measured and eff < 1.0 else None
        bx *= eff
        if algo == "rab":  # halving then doubling among p2: step k moves k of p2 blocks
            p2 = 1 << len(self.rd)
            return (2 * sum(self._step(lk, k * s / p2, bx, eff, hop)
                            for k, lk in zip(_pow2s(p2), self.rd))
                    + (2 * self._step(self.fold, s, bx, eff, hop) if self.fold != (0, False)
                       else 0.0))
        if algo == "tree":
            return sum(self._step(lk, s, bx, eff, hop) for lk in self._tree(root))
        if algo == "star":  # one step, the root's bytes to every other host at once
            return self._step(self._star(root), s, bx, eff, hop)
        if algo == "hier":  # every phase pipelined; L ranks share the host's rails
            H, L = self.H, self.L or 1
            if coll == "allreduce":   # rs in host, allreduce across hosts, ag in host
                steps_x, steps_s, x, m = 2 * (H - 1), 2 * (L - 1), 2 * (H - 1) / H, 2 * (L - 1) / L
            elif coll == "broadcast":  # scatter in the root's host, chains across, ring in host
                steps_x, steps_s, x, m = H - 1, L, 1.0, 2 * (L - 1) / L
            else:                      # a ring across hosts, H rings in the host
                steps_x, steps_s, x, m = H - 1, H * (L - 1), (H - 1) / H, (L - 1) / L
            return (steps_x * self.rail_alpha + steps_s * self.shm_alpha
                    + max(x * s / bx, m * s / SHM_RATE))
        if algo == "ring":
            steps = 2 * (n - 1) if coll == "allreduce" else n - 1
            return steps * self._step(self.ring, s / n, bx)
        if algo == "direct":  # allgather: one step, every rank's block to every other
            extra = max(n - 2, 0) * DIRECT_MSG * self.rail_alpha if self.direct[0] else 0.0
            return self._step(self.direct, s / n, bx, eff, hop) + extra
        if algo == "chain":
            (e, local), lat = self._chain(root)
            return lat + s * max(e / bx, 1 / SHM_RATE if local else 0.0)
        if algo != "rd":
            raise ValueError(f"no time model for {algo}")
        if coll in ("allgather", "reduce_scatter"):  # step k moves k blocks
            return sum(self._step(lk, k * s / n, bx, eff, hop)
                       for k, lk in zip(_pow2s(1 << len(self.rd)), self.rd))
        if self.hosts_rd:  # in to the host's first rank, rd between hosts, back out
            return (self._hosts_rd_local(s, eff)
                    + self.hosts_rd * self._step((1, False), s, bx, eff, hop))
        return (sum(self._step(lk, s, bx, eff, hop) for lk in self.rd)
                + (2 * self._step(self.fold, s, bx, eff, hop) if self.fold != (0, False) else 0.0))


def alpha_of_small(host_of, seconds):
    """The rail step latency (s) at which the model's small allreduce (rd, a payload too
    small to count) on this layout takes `seconds`: the measured time spread over its
    steps, those within a host at SHM_ALPHA / RAIL_ALPHA of one across. None with no step
    between hosts (one host: nothing measured there)."""
    base = Layout(host_of)
    if base.H < 2 or not seconds > 0:
        return None
    return RAIL_ALPHA * seconds / base.time("allreduce", "rd", 0)


# ---- the byte cost of a whole-payload step, measured at the sizes used -----------------
# A step that does not stream from the one before it (rd, rab, tree: UNPIPELINED) sends its
# bytes as one burst on an idle link; the model priced them at the link's sustained rate
# (the rate probe's, learned on 512 KiB and more). Where a burst passes faster than that
# (the lab's tbf lets its bucket through at veth speed; a shared link's queue is empty
# between calls) the model priced the binomial tree ~3x too dear and broadcast 8 KiB ran the
# chain at 0.58-0.67x Open MPI while the tree ran at 1.33x (docs/results/session26/band-s26).
# So the start-up step measure (topo/steplatency.py) also times isolated rd allreduces of
# HOP_SIZES on the rail small payloads use, and those steps are priced by what was measured.
HOP_SIZES = (4 << 10, 16 << 10, 64 << 10)


class HopCost:
    """Seconds the bytes of one unpipelined step take, measured: points [(bytes on the
    measured link in one step, seconds)], sizes rising, seconds not falling; between them
    linear (from (0, 0)), past the last one the link's sustained rate `ref` (B/s, the
    model's for such a step: the link rate x STEP_EFF) on top of the last point."""

    __slots__ = ("points", "ref")

    def __init__(self, points, ref):
        self.points = [(float(x), float(b)) for x, b in points]
        self.ref = float(ref)

    def cost(self, t_long):
        """Seconds for a step the model prices at t_long on its links' sustained rate (the
        same bytes on the measured link: t_long x ref).

        Below the first point: the segment between the first two points extended down (a
        shaper's burst: free up to what it lets through, then its rate), never above the
        line from (0, 0). Drawn from (0, 0) it priced rab 4 KiB's 2 and 1 KiB steps at half
        and a quarter of rd's 4 KiB step, where they cost next to nothing: rab on one rail
        ran 84-87 us against rd's 90-107 while the model priced it 1.3x rd's (400 + 100,
        docs/results/session28/band-400-100)."""
        x = t_long * self.ref
        pts = self.points
        if pts and x <= pts[0][0]:
            x1, b1 = pts[0]
            line = b1 * x / x1
            if len(pts) > 1 and pts[1][0] > x1:
                x2, b2 = pts[1]
                return max(0.0, min(line, b1 - (b2 - b1) * (x1 - x) / (x2 - x1)))
            return line
        x0 = b0 = 0.0
        for xi, bi in pts:
            if x <= xi:
                return b0 + (bi - b0) * (x - x0) / (xi - x0)
            x0, b0 = xi, bi
        return b0 + (x - x0) / self.ref

    def describe(self):
        """'4 KiB 12 us, ...' (the measured points, one link's bytes in one step)."""
        return ", ".join(f"{_size_text(int(x))}B {b * 1e6:.0f} us" for x, b in self.points)


def hop_cost_of(host_of, rail_alpha, small_ns, sizes, times_ns, link_rate):
    """HopCost from the agreed start-up measure: times_ns[i] the rd allreduce of sizes[i] B
    (whole, on one rail), small_ns the one of 8 B (the step latency's). The excess over the
    8 B call is spread over the model's rd steps between hosts; a step carries the payload
    on each of the most pairs leaving one host: flat rd, or with the same number of ranks
    (> 1) on every host rd_hosts.pxi, where one rank per host crosses (one payload a step;
    its shm bytes in and out are taken off first). So a point is what one host put on its
    link in one step, and Layout._step prices any step by all of its host's bytes (flat
    rab's or the tree's several local ranks crossing at once). link_rate: that rail's
    sustained link rate (B/s). None when nothing is between hosts or no size was timed."""
    lay = Layout(host_of, rail_alpha=rail_alpha)
    if lay.hosts_rd:  # several ranks on each host: one rank per host crosses (rd_hosts)
        cross = [1] * lay.hosts_rd
    else:
        cross = [lk[0] for lk in lay.rd if lk[0]] + ([lay.fold[0]] * 2 if lay.fold[0] else [])
    if not cross or not sizes or len(sizes) != len(times_ns) or not small_ns > 0 \
            or not link_rate > 0:
        return None
    e, pts, prev = max(cross), [], 0.0
    for s, t in zip(sizes, times_ns):
        if not t > 0:
            return None
        # rd_hosts' shm bytes (in to the first rank and back) are priced apart
        shm = (lay._hosts_rd_local(s) - lay._hosts_rd_local(0)) if lay.hosts_rd else 0.0
        prev = max(prev, ((t - small_ns) * 1e-9 - shm) / len(cross))
        pts.append((e * s, prev))
    return HopCost(pts, link_rate * STEP_EFF)


def _pow2s(p2):
    k = 1
    while k < p2:
        yield k
        k *= 2


# ---- an offload channel: the INA rail ---------------------------------------------------
# A small allreduce through the aggregation service is two hops (rank -> service -> rank)
# whatever the rank count; recursive doubling on the TCP rails is log2(P) steps (+2 to fold
# the ranks past a power of two). A hop through the service costs more than one TCP step:
# it crosses two user-space programs, and the service waits for the slowest rank. Lab,
# 4 hosts x 1 rank, 4 B (issue 13): INA 86-90 us with both ends spinning vs rd 45-68 us,
# i.e. a hop about 1.4-1.8 x a step; the lower end is taken, so the model sends them to
# INA from 8 ranks on one host each (rd: 3 steps) and keeps 4 ranks, or 4 hosts x 2 ranks
# (rd: one step of the three inside a host), on rd.
INA_HOP_FACTOR = 1.4
INA_SMALL_BYTES = 1432  # one datagram at an MTU of 1500 (NEZHA_INA_CHUNK=0)
OFFLOAD_EWMA = 0.5      # weight of the newest agreed rate of a split collective
OFFLOAD_EXPLORE = 16    # of the calls the time rule leaves to TCP, every so many split anyway


def ina_small_time(layout, nbytes, rate):
    """Modelled seconds of an allreduce of nbytes as one INA datagram per rank each way:
    two hops, and the ranks of the most crowded host share its link both ways."""
    per_host = max(collections.Counter(layout.host_of).values(), default=1)
    hop = INA_HOP_FACTOR * layout.rail_alpha + per_host * float(nbytes) / rate
    return 2 * hop


class OffloadModel:
    """The TCP rails and an offload channel sharing one collective (nezha/rails/ina/
    offload.py runs it). Per kind (allreduce, reduce_scatter, allgather) the agreed rates of
    both paths, in bytes of the whole buffers per second: every rank learns them from the
    same agreed times (the MAX over the ranks after each split collective), so every rank
    splits the next one alike. Per rank the offloaded allreduce moves S each way, the ring
    2(N-1)/N * S; an offloaded reduce_scatter S up and S/N down, an allgather S/N up and S
    down, their rings (N-1)/N * S each way: the measured rates include that."""

    def __init__(self, min_bytes):
        self.min_bytes = int(min_bytes)
        self.rate_tcp = {}
        self.rate_ina = {}
        self.skipped = {}  # per kind: calls the time rule left to TCP alone

    def split(self, kind, count, blocks, es):
        """k such that elements [k, count) (of each of `blocks` blocks) go to the offload
        channel and [0, k) to the TCP rails, both finishing together: cold half each, then
        by the agreed rates. The offload share is at least min_bytes (a share much smaller
        than that is mostly the fixed costs of a split: the agreement, the copy, the first
        round trip, and would teach the model a rate far below the rail's); where the rates
        put it below, the modelled time decides between that floor and the TCP rails alone
        (k = count): a slow offload channel's floor can take longer than TCP for all of it
        (400 Mbit/s TCP + INA 100, 2 MiB: 84 ms against 63, session 26's ina-sim)."""
        tcp, ina = self.rate_tcp.get(kind), self.rate_ina.get(kind)
        f = 0.5 if tcp is None or ina is None else ina / (ina + tcp)
        k = int(count * (1.0 - f))
        unit = blocks * es
        if (count - k) * unit < self.min_bytes:
            k = max(0, count - (self.min_bytes + unit - 1) // unit)
            if tcp and ina:
                floor_t = max(k * unit / tcp, (count - k) * unit / ina)
                if count * unit / tcp <= floor_t:
                    # TCP alone; every OFFLOAD_EXPLORE-th such call the floor anyway, so
                    # the rates stay measured (a faster offload channel is noticed)
                    n = self.skipped[kind] = self.skipped.get(kind, 0) + 1
                    if n % OFFLOAD_EXPLORE:
                        return count
        return max(0, min(k, count))

    def learn(self, kind, tcp_bytes, tcp_ns, ina_bytes, ina_ns):
        """Agreed times of one split collective (the slowest rank's)."""
        if tcp_bytes > 0:
            self._learn(self.rate_tcp, kind, tcp_bytes / max(tcp_ns, 1) * 1e9)
        self._learn(self.rate_ina, kind, ina_bytes / max(ina_ns, 1) * 1e9)

    @staticmethod
    def _learn(rates, kind, rate):
        old = rates.get(kind)
        rates[kind] = rate if old is None else OFFLOAD_EWMA * rate + (1 - OFFLOAD_EWMA) * old

    def forget(self):
        """The offload channel failed: it comes back cold."""
        self.rate_ina = {}
