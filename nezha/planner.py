"""The planner: which channels carry which part of a collective, and with which algorithm.

Every rank runs the same deterministic function on the same inputs (the agreed cost model,
see costmodel.py), so every rank gets the same plan; its hash travels in each wire header
and a difference is an error. Plans are made when a collective starts to run, not when it
is posted, so every rank plans it after the same history of finished collectives.
"""
import zlib

from nezha import log
from nezha.costmodel import (HIER_CLEAR, INA_SMALL_BYTES, PIECE_ONE_PER_HOST, RAIL_RATE, SLICE_STEP,
                             VOTE_COST, CostModel, Layout, OffloadModel, auto_min_piece, bucket_of,
                             hop_cost_of, ina_small_time)
from nezha.topo import placement

ALGO_RING = 1
ALGO_RD = 2
ALGO_CHAIN = 3
ALGO_TREE = 4
ALGO_DIRECT = 5
ALGO_HIER = 6
ALGO_RAB = 7
ALGO_INA = 8  # whole on the INA service (no engine schedule; executor._execute_ina_small)
ALGO_HOST = 9  # in the host area, every rank on one host (no schedule; executor._execute_host)
ALGO_NAMES = {0: "direct", ALGO_RING: "ring", ALGO_RD: "rd", ALGO_CHAIN: "chain",
              ALGO_TREE: "tree", ALGO_DIRECT: "direct", ALGO_HIER: "hier", ALGO_RAB: "rab",
              ALGO_INA: "ina", ALGO_HOST: "host"}
LAZY_MAX_BYTES = 256 << 10  # failover.LAZY_MAX_BYTES: larger collectives vote
VOTE_CAL_FRAMES = 12  # STATUS frames of a vote where VOTE_COST was measured (4 x 1: 4 x 3)
ROUND = 256  # shares are whole multiples of this many elements (when large enough)
PIECE_UNITS = 64  # ... where the payload has PIECE_UNITS units a rail: else a smaller unit
MAX_PIECES = 64  # slices of one collective (the vote carries one bit per slice)
# the collectives whose rails the model picks with a slice's cost (Planner.piece_model);
# and broadcast's chain (CHAIN_SLICE); the others (hier broadcast, reduce, alltoall, a
# re-run) keep the minimum piece
PIECE_MODEL_COLLS = ("allreduce", "allgather", "reduce_scatter", "broadcast")
SPLIT_ALGOS = ("ring", "rd", "rab", "direct", "chain")  # split plans whose rails the model picks
# Steps of rail latency a second rail's slice adds per step of broadcast's chain (each rail's
# slice is a whole chain of n - 1 hops), in place of SLICE_STEP. With the minimum piece
# (32 KiB) 32 KiB ran whole on one rail, 537-589 us, against 289-351 split (lab 4 x 1, 400 +
# 400); split at 8 and 16 KiB it ran 311 and 350 us against 177 and 244 whole (a split
# chain's small slices cost far more than SLICE_STEP's 0.75 steps a hop). Between the two:
# the model's saving at the probed rates is ~170 us at 16 KiB, ~340 at 32 KiB, so 5.2 x 3
# hops x the measured step (11-19 us in most session-30 runs) lies between them for steps
# of 11-22 us; a slower measured step keeps 32 KiB whole as before
# (docs/results/session30/bcast-32k)
CHAIN_SLICE = 5.2
# (collective, algorithm) that _rails_by_model keeps on one rail where one rail's bytes of
# the whole call, on a host's link, fit in the start-up measure's first step
# (costmodel.HOP_SIZES[0]: what it saw pass from idle, in the shaper's burst; no measure,
# the sustained price as for the others). rd reduce_scatter's steps carry half then a
# quarter of the payload (3 KiB of 4 KiB at 4 ranks); priced at the sustained rate it went
# over both rails at 4 KiB: 71-72 us against 38-40 on one (Open MPI 55-66). Past the first
# step a stream of calls drains the burst and the measured price of an idle link is too
# cheap: 8 KiB (6 KiB on one rail) ran 82-85 us on one and 72-75 on two (lab 4 x 1, 400 +
# 400, session 29, docs/results/session29/rs-small), where a fast 4 KiB sample priced one
# rail cheaper (session 29 priced the rails inside the bound with the measure).
# rd allgather moves the same bytes (one then two blocks a step). Within the first sample the
# measure is one rail's burst and holds nothing a second slice would save: priced by it, a
# start-up with a 12-13 us step split 4 KiB (46 against 45 us) and bench compare's allgather
# 1 KiB a rank ran 45-68 us on two rails against 36-38 on one (Open MPI 37-39), 512 B a rank
# 50 against 24 (session 30, docs/results/session30/allgather-small)
# rab allreduce likewise (its link bytes over the whole call: rab_link_bytes, 3 KiB of 2 KiB
# at 4 ranks): with the second slice measured (median 0.15 steps per step over 72 start-ups in
# the lab's 4 x 1, session 31) 2 KiB went over both rails in half the jobs and ran 70-88 us there against
# 58-61 on one (rd 47-55; docs/results/session31/slice-cost). The measure is right about
# the slice (rab2 - rab1 ~11 us, 4 steps of 13 us at ~0.2); within the first sample nothing
# is saved to pay it. The constant 0.75 hid this at 2 KiB and kept 4 KiB on rd in slow-step
# jobs, where rab over both rails ran 71-99 us against rd's 96
ONE_RAIL_IN_FIRST_STEP = (("reduce_scatter", "rd"), ("allgather", "rd"), ("allreduce", "rab"))
# Steps of rail latency one more rail's slice adds to a small broadcast's tree: its slices
# run side by side (each a whole tree on its rail), so the extra slice costs the ranks'
# CPU for its sends and receives, not a round of its own. Lab, 4 x 1, 400 + 100: 2 KiB
# cost ~5 us more on two rails, 4 KiB ~15 us less (docs/results/session29/bcast-small).
# The constant where the second slice is not measured; measured (Planner.slice_step), the
# tree's is that per round of the tree (Planner._tree_slice): the start-up measure is the
# same shape, two whole small plans side by side on two rails, each step's sends, receives
# and wake-ups doubled. The lab's 4 x 1 measured 0.06-0.45, median 0.15, steps per step (session 31,
# docs/results/session31/slice-cost): 2 rounds x 0.15 x an 18 us step = ~5 us, what session
# 29 saw at 2 KiB
TREE_SLICE = 0.5


class Plan:
    """slices: [(channel, first element, element count)]; algo: algorithm id; key: bucket."""

    __slots__ = ("slices", "algo", "hash", "key", "esize", "chans")

    def __init__(self, slices, algo, key=None, esize=1, tag=None):
        self.slices = slices
        self.chans = [c for c, _, _ in slices]
        self.algo = algo
        self.key = key
        self.esize = esize
        # tag: what else shapes the schedules (the hierarchical rail owners), hashed too
        self.hash = zlib.crc32(repr((slices, algo) if tag is None else
                                    (slices, algo, tag)).encode())

    def __repr__(self):
        return f"Plan({ALGO_NAMES.get(self.algo, self.algo)}, {self.slices})"


# Collectives NEZHA_HIER_RAILS=auto aligns in balanced layouts even when no NIC is nearer to
# one local rank than another: their striped cross-host phase ran 4x the inter-host floor in
# the lab (2 hosts x 4 ranks, allgather of 1 MiB per rank: striped 183 ms, aligned 47 ms,
# floor 42 ms; docs/results/session15). The cause was a dropped first segment waiting for
# TCP's probe timer, fixed by the transport's tx_kick; striped 256 KiB then ran at the floor
# (docs/results/session16): worth re-measuring before striping them again
ALIGN_ANYWAY = ("allgather", "reduce_scatter")


class Planner:
    """Splits collectives over channels by their measured rates, small payloads whole."""

    # off only to replay runs made before them (sim/benchloop.planner_then): a slow rail's
    # piece judged by time (split), the probe's rates as links' with a measured step
    piece_by_time = True
    probe_link_rates = True
    # a second rail's slice priced by the model in measured steps, not NEZHA_MIN_RAIL_PIECE
    # (Planner.piece_model; session 26)
    piece_by_step = True

    def __init__(self, nchan, cfg, names=None, ranks=1, nominal=None):
        self.nchan = nchan
        self.ranks = ranks
        self.alive = [True] * nchan
        # nominal: per-channel prior rates (the rails' link speeds), equal when None
        self.model = CostModel(nchan, names or [str(c) for c in range(nchan)],
                               nominal=None if cfg["SPLIT"] == "equal" else nominal,
                               static=cfg["SPLIT"] == "equal")
        self.algo = cfg["ALGO"]
        self.small = cfg["SMALL_MSG_THRESHOLD"]
        self.piece_cfg = cfg["MIN_RAIL_PIECE"]  # None: auto, by the host layout (set_hosts)
        self.max_rails = cfg["MAX_RAILS"]
        self.max_ratio = cfg["RAIL_MAX_RATIO"]
        self.nconns = cfg["SOCKET_NCONNS"]
        # With failover, large slices are cut into pieces that run one after another on
        # their channel, so that a failure loses one piece, not the whole slice.
        self.piece_bytes = 0
        self.failover = False  # set by the communicator (the same on every rank)
        self._logged = {}
        # nominal repeats each rail's speed once per connection (topo.rails.nominal_rates)
        # the rail step latency: a number of NEZHA_RAIL_ALPHA, else the constants until the
        # start-up measurement (set_step_latency) replaces them
        alpha = cfg["RAIL_ALPHA"]
        self.rail_alpha, self.alpha_why = None, "model constants, scaled by crowding"
        # the measured whole-payload step (set_hop_samples), None: the sustained rates
        self.hop_samples = None
        if alpha.lower() not in ("auto", "model"):
            self.rail_alpha, self.alpha_why = float(alpha), "NEZHA_RAIL_ALPHA"
        # steps per step a second rail's slice adds (_slice_cost): NEZHA_SLICE_STEP's number,
        # else costmodel.SLICE_STEP until the start-up measure (set_slice_step) replaces it
        self.slice_cfg = str(cfg["SLICE_STEP"])
        self.slice_step, self.slice_why = SLICE_STEP, "constant"
        if self.slice_cfg.lower() not in ("auto", "model"):
            self.slice_step, self.slice_why = float(self.slice_cfg), "NEZHA_SLICE_STEP"
        self.set_rail_rates(nominal[::self.nconns] if nominal else None)
        self.set_hosts([0] * ranks)
        self.set_hier_rails(cfg["HIER_RAILS"])

    def set_hosts(self, host_of, crowding=1.0):
        """Which host every rank is on. Hierarchical collectives apply (hier_ok) with more
        than one host, more than one rank per host and the same number on each. crowding:
        ranks per CPU on the most crowded machine (topo/crowd.py), agreed by every rank."""
        self.hosts = list(host_of)
        counts = [self.hosts.count(h) for h in set(self.hosts)]
        self.hier_ok = len(counts) > 1 and len(set(counts)) == 1 and counts[0] > 1
        self.layout = Layout(self.hosts, crowding, self.rail_alpha, self._hop_cost())
        if self.piece_cfg is None:
            self.min_piece, self.piece_why = auto_min_piece(self.hosts, self.layout.crowding)
        else:
            self.min_piece, self.piece_why = self.piece_cfg, "NEZHA_MIN_RAIL_PIECE"
        self._set_piece_model()
        self._hier_memo = {}
        self._choice_memo = {}
        self._owners_memo = {}
        self._ina_memo = {}

    def _set_piece_model(self):
        """piece_model: auto, one rank per host, a measured step (the same on every rank): a
        second slice costs SLICE_STEP steps per step of its plan, and the model picks the
        rails of allreduce, allgather and reduce_scatter (_rails_by_model); the minimum
        piece stays for the rest. One connection per rail only (the model counts rails,
        split channels)."""
        self.piece_model = bool(self.piece_by_step and self.piece_cfg is None
                                and self.rail_alpha is not None and self.nconns == 1
                                and self.min_piece == PIECE_ONE_PER_HOST)
        self._rails_memo = {}
        self._choice_memo = {}

    def set_step_latency(self, rail_alpha, why):
        """The seconds one step between hosts costs (topo/steplatency.py's agreed measure,
        the same on every rank), or None: the constants. Every choice is made again."""
        self.rail_alpha, self.alpha_why = rail_alpha, why
        self._link_rates()
        self.set_hosts(self.hosts, self.layout.crowding)
        self.model.version += 1  # cached plans were chosen with the old one

    def set_slice_step(self, steps, why="measured at start-up"):
        """Steps per step of a plan that a second rail's slice adds (topo/steplatency.py's
        agreed measure: the same float on every rank), or None: costmodel.SLICE_STEP again.
        Every choice is made again."""
        self.slice_step, self.slice_why = ((SLICE_STEP, "constant") if steps is None
                                           else (float(steps), why))
        self._forget_choices()
        self.model.version += 1  # cached plans were chosen with the old one

    def set_hop_samples(self, samples, why="measured at start-up"):
        """The agreed start-up times of whole rd allreduces (topo/steplatency.py):
        {"small_ns": 8 B call, "sizes": [B], "ns": [per size]}, the same integers on every
        rank, or None: unpipelined steps' bytes at the sustained rate again. Every choice
        is made again."""
        self.hop_samples, self.hop_why = samples, why
        self.set_hosts(self.hosts, self.layout.crowding)
        self.model.version += 1  # cached plans were chosen with the old one

    def _hop_cost(self):
        """costmodel.HopCost from hop_samples on this layout, the step latency in force and
        the fastest rail's link rate (small payloads run whole on the best channel), or
        None."""
        h = self.hop_samples
        if not h or self.rail_alpha is None:
            return None
        return hop_cost_of(self.hosts, self.rail_alpha, h["small_ns"], h["sizes"], h["ns"],
                           max(self.rail_rates))

    def hier_groups(self, rank):
        """(ranks on rank's host, one rank per host at rank's local position); the second
        is None where hosts hold different numbers of ranks (no hierarchical plan)."""
        local = [r for r, h in enumerate(self.hosts) if h == self.hosts[rank]]
        if not self.hier_ok:
            return local, None
        me = local.index(rank)
        order = list(dict.fromkeys(self.hosts))
        cross = [[r for r, h in enumerate(self.hosts) if h == host][me] for host in order]
        return local, cross

    def hier_hosts(self):
        """Every host's ranks (hosts in order of their first rank, ranks in order), as the
        hierarchical builders take them; None where hier does not apply."""
        if not self.hier_ok:
            return None
        order = list(dict.fromkeys(self.hosts))
        return [[r for r, h in enumerate(self.hosts) if h == host] for host in order]

    # ---- which local ranks carry each rail's slices across hosts (topo/placement.py) ----

    def set_hier_rails(self, mode, near=None):
        """NEZHA_HIER_RAILS (auto, aligned, striped), and every local position's nearest
        rails (indices; placement.agreed_near) when known: the same on every rank."""
        self.hier_rails, self.near = mode, near
        self._owners_memo = {}

    def _owner_table(self, coll="allreduce"):
        """(owners per live rail, live rails, why), or None: every local rank drives every
        rail (striped). Over the live rails: after a failure the survivors are shared."""
        if not self.hier_ok or self.hier_rails == "striped":
            return None
        L, n = self.ranks // len(set(self.hosts)), self.nconns
        live = [r for r in range(self.nchan // n) if any(self.alive[r * n:(r + 1) * n])]
        if not live:
            return None
        near = None if self.near is None else [[live.index(r) for r in nr if r in live]
                                               for nr in self.near]
        owners, why = placement.from_nearest(near, L, len(live)), "nearest NICs"
        if owners is None:
            if self.hier_rails == "auto" and coll not in ALIGN_ANYWAY:
                # no NIC is nearer to one local rank than another: aligning an allreduce or
                # a broadcast buys nothing, and a rank that waits for a CPU idles its rails
                # (4 hosts x 2 ranks on 2 cores: aligned 1.05-1.07x the floor at 16 MiB,
                # striped 1.02x)
                return None
            owners, why = placement.modular(L, len(live)), "local rank mod rails"
        if self.hier_rails == "auto" and not placement.balanced(owners, L):
            return None
        return owners, live, why

    def rail_owners(self, chan, coll="allreduce"):
        """Flags per local position: which carry chan's hierarchical slices of coll across
        hosts; None: all of them (striped, or every position drives this rail)."""
        kind = coll in ALIGN_ANYWAY
        key = (chan, kind, tuple(self.alive))
        if key in self._owners_memo:
            return self._owners_memo[key]
        table, got = self._owner_table(coll), None
        if table is not None and chan // self.nconns in table[1]:
            own = table[0][table[1].index(chan // self.nconns)]
            L = self.ranks // len(set(self.hosts))
            got = None if len(own) == L else [i in own for i in range(L)]
        if len(self._owners_memo) >= 256:
            self._owners_memo.clear()
        self._owners_memo[key] = got
        return got

    def _owner_tag(self, algo, coll="allreduce"):
        """What a hierarchical plan's schedules depend on besides its slices (Plan tag)."""
        if algo != ALGO_HIER:
            return None
        table = self._owner_table(coll)
        return None if table is None else (table[0], table[1])

    def describe_rails(self, names=None):
        """Which rails each local rank drives in hierarchical collectives, and why."""
        if not self.hier_ok:
            return "hierarchical rails: no hierarchical layout (one rank per host, or uneven)"
        L = self.ranks // len(set(self.hosts))
        table = self._owner_table()
        rails = self.nchan // self.nconns
        names = names or [f"rail{r}" for r in range(rails)]
        if table is None:
            why = ("NEZHA_HIER_RAILS=striped" if self.hier_rails == "striped" else
                   "NEZHA_HIER_RAILS=auto: no local rank has nearer NICs than another, or "
                   "aligned would leave rails or ranks unevenly loaded")
            out = f"hierarchical rails: every local rank drives every rail ({why})"
            other = self._owner_table("allgather")
            if other is not None and not all(len(o) == L for o in other[0]):
                out += ("; allgather and reduce_scatter aligned by local rank mod rails: "
                        + placement.describe(other[0], L, [names[r] for r in other[1]]))
            return out
        owners, live, why = table
        if all(len(o) == L for o in owners):
            return ("hierarchical rails: every local rank drives every rail (one live rail, "
                    f"NEZHA_HIER_RAILS={self.hier_rails})")
        return (f"hierarchical rails (NEZHA_HIER_RAILS={self.hier_rails}, aligned by {why}): "
                + placement.describe(owners, L, [names[r] for r in live]))

    @property
    def version(self):
        """Changes whenever a plan could come out differently (for the plan cache)."""
        return (self.model.version, tuple(self.alive))

    def best_channel(self, key=None, avoid=()):
        """The live channel expected to finish a small payload first."""
        rates, _ = self.model.rates(key)
        live = ([c for c in range(self.nchan) if self.alive[c] and c not in avoid] or
                [c for c in range(self.nchan) if self.alive[c]] or [0])
        return max(live, key=lambda c: (rates[c], -c))

    def split(self, coll, count, esize, blocks=1, algo=None):
        """[(channel, off, cnt)] covering [0, count) exactly once (of each of blocks blocks:
        an allgather's or reduce_scatter's pieces are cut from every block alike, so a rail's
        piece of the payload is its share of all of them, as an allreduce's is of its one
        buffer: NEZHA_MIN_RAIL_PIECE judges that).

        Which channels: by the prior (CostModel.prior: the overall agreed rates, learned
        from every large slice), never by the size bucket's own rates. A channel a bucket
        leaves out is never measured in it again (one-slice plans below GLOBAL_MIN_BYTES do
        not feed the model), so shares a few points off equal dropped a rail from 128 KiB
        for good (1.8 or 3.6 ms in the lab, docs/sim.md). The bucket's rates only share the
        payload among the channels chosen, each of which it keeps measuring.

        With the model's slice cost (piece_model; algo: the plan's algorithm) as many
        channels as _rails_by_model finds worth their slice, instead of the minimum piece."""
        nbytes = count * esize
        key = bucket_of(coll, nbytes)
        payload = nbytes * max(blocks, 1)
        prior = self.model.prior()
        live = [c for c in range(self.nchan) if self.alive[c]] or [0]
        top = max(prior[c] for c in live)
        active = [c for c in live if prior[c] * self.max_ratio >= top]
        active = sorted(active, key=lambda c: (-prior[c], c))[: self.max_rails]
        min_piece = self.min_piece if self.min_piece != float("inf") else payload + 1
        name = ALGO_NAMES.get(algo)
        want = (self._rails_by_model(coll, name, payload)
                if self.piece_model and coll in PIECE_MODEL_COLLS and name in SPLIT_ALGOS
                else None)
        while len(active) > 1:
            if want is not None:
                if len(active) <= want:
                    break
                active.remove(min(active, key=lambda c: (prior[c], -c)))  # the slowest
                continue
            share = self.model.prior_shares([c in active for c in range(self.nchan)])
            # judged by time, not bytes: the pieces of a split finish together, so the
            # slowest rail's piece takes as long as the fastest rail's, and that must be at
            # least what a minimum piece takes on the fastest rail (on 400 + 100 the 100's
            # fifth of a 128 KiB reduce_scatter, 26 KiB, ran as long as 102 KiB on the 400:
            # by bytes it was dropped, 0.65-0.82x Open MPI, which stripes; session 25).
            # Equal rails: the same as each piece >= NEZHA_MIN_RAIL_PIECE
            judged = max if self.piece_by_time else min
            if judged(share[c] for c in active) * payload >= min_piece:
                break
            active.remove(min(active, key=lambda c: (share[c], -c)))  # costs more than it saves
        if len(active) <= 1:
            c = active[0] if active else self.best_channel(key)
            return self._pieces(c, 0, count, esize), key
        shares = self.model.shares(key, [c in active for c in range(self.nchan)])
        counts = split_counts(count, [shares[c] for c in sorted(active)])
        slices, off = [], 0
        for c, cnt in zip(sorted(active), counts):
            if cnt > 0:
                slices += self._pieces(c, off, cnt, esize)
            off += cnt
        return slices, key

    def _pieces(self, chan, off, cnt, esize):
        if not self.piece_bytes or cnt * esize <= self.piece_bytes:
            return [(chan, off, cnt)]
        n = min(MAX_PIECES // self.nchan, -(-cnt * esize // self.piece_bytes))
        return [(chan, off + cnt * i // n, cnt * (i + 1) // n - cnt * i // n) for i in range(n)]

    def resplit(self, slices, esize):
        """Slices of a failed channel, cut again over the live channels (same offsets)."""
        out = []
        for _, off, cnt in slices:
            sub, _ = self.split("rerun", cnt, esize)
            out += [(c, off + o, n) for c, o, n in sub]
        return out

    # ---- algorithm choice -------------------------------------------------------------
    # Every input below is the same on every rank: the host layout, the configured rails
    # (not the live ones) with their agreed nominal speeds, the configuration and nbytes.
    # Never the learned rates: a call may be planned when it is posted, before a vote moves
    # rails, and every rank must pick the same algorithm (the plan hash checks it).

    FLAT = {"allreduce": ("rd", "rab", "ring"), "broadcast": ("tree", "chain"),
            "allgather": ("rd", "ring"), "reduce_scatter": ("rd", "ring")}
    # the direct allgather (ALGO_DIRECT) runs only where NEZHA_ALGO=direct forces it: in the
    # lab (4 x 1, 400 + 100) it beat rd at 8 KiB a rank in every job, at 4 KiB it tied and at
    # 16-32 KiB it was on both sides of rd (the same bytes; the row follows which links the
    # shaper's wait falls on; session 29, docs/results/session29/allgather-small), and its
    # price (costmodel.DIRECT_MSG) is not measured
    IDS = {"rd": ALGO_RD, "rab": ALGO_RAB, "ring": ALGO_RING, "tree": ALGO_TREE,
           "chain": ALGO_CHAIN, "direct": ALGO_DIRECT}

    def set_rail_rates(self, mbps, ring_payload=False):
        """Every rail's speed in Mbit/s, agreed by every rank (the rails' nominal speeds, or
        the start-up probe's agreed rates: ring_payload), or None: RAIL_RATE each."""
        self._mbps, self._ring_payload = mbps, ring_payload
        self._link_rates()

    def _link_rates(self):
        """rail_rates (B/s per link) for Layout.time. The probe's rate is a ring allreduce's
        payload over its time; the ring moves 2(N-1)/N of it over each link. The constant
        step latency was set against the payload rate (the pair calibrated together); a
        measured one is a step's real time, so it pairs with the link's: with the payload
        rate the bytes cost 1.5x too much at 4 ranks and every switch point sat 1.5x low
        (reduce_scatter 16 KiB on the ring, 0.75x Open MPI; session 25)."""
        rails = max(self.nchan // self.nconns, 1)
        mbps, n = self._mbps, self.ranks
        scale = (2 * (n - 1) / n if self._ring_payload and self.rail_alpha is not None and n > 1
                 and self.probe_link_rates else 1.0)
        self.rail_rates = ([RAIL_RATE] * rails if not mbps or len(mbps) != rails else
                           [float(m) * 125e3 * scale for m in mbps])
        if getattr(self, "layout", None) is not None:
            self.layout.hop = self._hop_cost()  # priced against the new link rate
        self._forget_choices()

    @property
    def algo(self):
        """NEZHA_ALGO (auto, ring, rd, rab, hier); setting it (the same on every rank, between
        two collectives) forgets the choices made."""
        return self._algo

    @algo.setter
    def algo(self, value):
        self._algo = value
        self._forget_choices()

    def _forget_choices(self):
        """Forget every rail and algorithm choice made (their inputs changed)."""
        self._rails_memo = {}
        self._choice_memo = {}
        self._hier_memo = {}
        self._ina_memo = {}

    def set_failover(self, on):
        """With failover, collectives that are not lazy end with a vote (in the model)."""
        self.failover = bool(on)
        self._choice_memo = {}
        self._hier_memo = {}  # its prices hold the vote or the lazy broadcast's barrier
        self._ina_memo = {}

    def _rails_used(self, nbytes, coll=None, name=None):
        """Rails a split payload of nbytes goes over, as Planner.split picks them (by the
        rails' speeds here): the fastest rail's piece at least NEZHA_MIN_RAIL_PIECE, or with
        the model's slice cost (piece_model) as many as pay for their slice."""
        if self.piece_model and coll in PIECE_MODEL_COLLS and name in SPLIT_ALGOS:
            return self._rails_by_model(coll, name, nbytes)
        return self._rails_by_piece(nbytes)

    def _rails_by_piece(self, nbytes):
        """Rails by NEZHA_MIN_RAIL_PIECE alone (the fastest rail's piece at least it)."""
        rates = sorted(self.rail_rates, reverse=True)
        if self.min_piece == float("inf"):
            return 1
        if not self.piece_by_time:  # as runs before session 25 priced it: equal shares
            return max(1, min(len(rates), int(nbytes // max(self.min_piece, 1))))
        k = len(rates)
        while k > 1 and nbytes * rates[0] / sum(rates[:k]) < self.min_piece:
            k -= 1
        return k

    def _slice_cost(self, coll, name):
        """Seconds one more rail's slice adds to a plan of name: SLICE_STEP measured steps
        for each of its steps (0 without the model's slice cost)."""
        if not (self.piece_model and coll in PIECE_MODEL_COLLS):
            return 0.0
        per_step = CHAIN_SLICE if name == "chain" else self.slice_step
        return per_step * self.layout.rail_alpha * self.layout.steps(coll, name)

    def _one_rail_in_first_step(self, coll, name, nbytes):
        """Whether _rails_by_model keeps nbytes of coll by name on one rail
        (ONE_RAIL_IN_FIRST_STEP): a measure in force and one rail's bytes on the busiest
        host's link over the whole call (rd allgather or reduce_scatter: (P - 1) / P of the
        payload, P ranks a power of two, times the pairs leaving one host) within the first
        measured step's."""
        hop = self.layout.hop
        if (coll, name) not in ONE_RAIL_IN_FIRST_STEP or hop is None or not hop.points:
            return False
        if name == "rab":
            # only where the second slice is measured (the constant priced it at session
            # 26's fit, which this rule would move)
            return (self.slice_why != "constant"
                    and self.layout.rab_link_bytes(nbytes) <= hop.points[0][0])
        return self.layout.rd_blocks_link_bytes(nbytes) <= hop.points[0][0]

    def _rails_by_model(self, coll, name, nbytes):
        """How many rails (the fastest first) give the shortest modelled time for nbytes of
        coll by name, each rail after the first paying _slice_cost. From the agreed rail
        rates and step latency only: the same on every rank."""
        return self._rails_memoized((coll, name, nbytes),
                                    lambda: self._count_rails(coll, name, nbytes))

    def _count_rails(self, coll, name, nbytes):
        rates = sorted(self.rail_rates, reverse=True)[: max(1, self.max_rails)]
        extra = self._slice_cost(coll, name)
        # at the sustained rates: SLICE_STEP was measured against those byte prices
        # (session 26). With the measured byte cost of small steps (Layout.hop) a
        # second slice at 4-8 KiB saved less than 0.75 steps and rab 8 KiB ran on one
        # rail: 184-195 us against 104-139 on two (docs/results/session27/bytecost)
        # within the first measured step (ONE_RAIL_IN_FIRST_STEP) the measure is one rail's
        # burst
        if self._one_rail_in_first_step(coll, name, nbytes):
            return 1
        best = min((self.layout.time(coll, name, nbytes, j, rate=sum(rates[:j]),
                                     measured=False)
                    + (j - 1) * extra, j) for j in range(1, len(rates) + 1))
        if name == "chain":  # CHAIN_SLICE is from 400 + 400 alone: it adds rails where it
            # pays and takes none the minimum piece split (400 + 100 from 40 KiB, session 21)
            return min(len(rates), max(best[1], self._rails_by_piece(nbytes)))
        return best[1]

    def _rails_memoized(self, key, compute):
        """compute() once per key (the planner's rail choices: their inputs change only
        with the rates, the step latency or a rail's life, which clear the memo)."""
        got = self._rails_memo.get(key)
        if got is None:
            got = compute()
            if len(self._rails_memo) >= 1024:
                self._rails_memo.clear()
            self._rails_memo[key] = got
        return got

    def flat_times(self, coll, nbytes, root=0):
        """{flat algorithm: modelled seconds} of the candidates for nbytes of coll.

        Whole-payload algorithms (rd allreduce, tree) run on one channel, the fastest
        rail; the others are split, over as many rails as Planner.split would use."""
        rates = sorted(self.rail_rates, reverse=True)
        n, out = self.ranks, {}
        per_rank = self._kept_bytes(coll, nbytes)
        # rails by the whole payload (all blocks: Planner.split's pieces), laziness by the
        # input a rank keeps (its own block)
        vote = self._vote_time()
        for name in self.FLAT[coll]:
            if name == "rd" and coll != "allreduce" and (n < 2 or n & (n - 1)):
                continue  # recursive doubling/halving of blocks: a power of two of ranks only
            whole = name == "tree" or (name == "rd" and coll == "allreduce")
            k = 1 if whole else self._rails_used(nbytes, coll, name)
            if name == "tree":  # with failover lazy; right after a lazy tree an allreduce
                # that ORs bytes runs instead (Communicator._broadcast), priced as the tree
                t = self.layout.time("broadcast", "tree", nbytes, 1, root, rate=rates[0])
            else:
                t = (self.layout.time(coll, name, nbytes, k, root, rate=sum(rates[:k]))
                     + (k - 1) * self._slice_cost(coll, name))
            # with failover, a collective that is not lazy (large, or a chain: no retarget,
            # failover.lazy_ok) ends with a vote, a control round of its own; small striped
            # ones are lazy too (session 20)
            if name == "chain" or per_rank > LAZY_MAX_BYTES:
                t += vote
            out[name] = t
        return out

    def algorithm(self, coll, nbytes, root=0):
        """Algorithm id for nbytes of a collective (size, host layout, configured rails and
        NEZHA_ALGO only): the flat one the cost model finds fastest (or the fixed rule of
        NEZHA_SMALL_MSG_THRESHOLD when set), or hierarchical where it applies and the model
        says it is faster (NEZHA_ALGO=hier forces it where it applies; ring, rd and rab force
        flat)."""
        key = (coll, nbytes, root)
        got = self._choice_memo.get(key)
        if got is None:
            got = self._choose(coll, nbytes, root)
            if len(self._choice_memo) >= 1024:
                self._choice_memo.clear()
            self._choice_memo[key] = got
        return got

    def _flat(self, coll, nbytes, root=0):
        """(flat algorithm id, {candidate: seconds} or None when not from the model)."""
        forced = {"ring": ALGO_RING, "rd": ALGO_RD, "rab": ALGO_RAB}.get(self.algo)
        pow2 = self.ranks > 1 and not self.ranks & (self.ranks - 1)
        if coll == "allgather" and self.algo == "direct" and self.ranks > 1:
            return ALGO_DIRECT, None
        if self.small is not None or self.ranks < 2:  # the fixed rule (or nothing to choose)
            small = self.small if self.small is not None else 0
            if coll == "allreduce":
                return forced or (ALGO_RD if nbytes < small else ALGO_RING), None
            if coll == "broadcast":
                return ALGO_TREE if nbytes < small else ALGO_CHAIN, None
            # small and a power of two of ranks: log2(P) steps (recursive doubling/halving)
            return (ALGO_RD if pow2 and self.algo != "ring" and nbytes < small
                    else ALGO_RING), None
        times = self.flat_times(coll, nbytes, root)
        best = min(times, key=lambda a: (times[a], a))
        if coll == "allreduce" and forced:
            return forced, times
        if coll != "broadcast" and self.algo == "ring":
            return ALGO_RING, times
        return self.IDS[best], times

    def _choose(self, coll, nbytes, root, quiet=False):
        if coll == "reduce":  # small: the allreduce's latency algorithm, kept at the root
            if self.algo == "ring":
                return ALGO_RING
            if self.small is not None:
                return ALGO_RD if nbytes < self.small else ALGO_RING
            if self.ranks < 2:
                return ALGO_RING
            times = self.flat_times("allreduce", nbytes)
            return ALGO_RD if min(times, key=lambda a: (times[a], a)) == "rd" else ALGO_RING
        if coll not in self.FLAT:
            return ALGO_DIRECT if coll == "alltoall" else ALGO_RING
        flat, times = self._flat(coll, nbytes, root)
        algo = flat
        if self.hier_ok and self.algo not in ("ring", "rd", "rab", "direct") and not (
                flat == ALGO_TREE and self.algo != "hier" and not self.failover):
            # with failover a small broadcast is lazy both ways (a tree, or hier opening
            # with a barrier; until session 29 hier voted, and the tree was kept whatever
            # the model said); without, the tree stays (hier against it unmeasured)
            if self.algo == "hier" or self._hier_wins(coll, flat, nbytes, root):
                algo = ALGO_HIER
        if times is not None and not quiet and log.enabled("INFO", "PLAN"):
            b = bucket_of(coll, nbytes)
            if self._logged.get(b[:2]) != algo:
                self._logged[b[:2]] = algo
                name = ALGO_NAMES[algo]
                rails = (self._rails_used(nbytes, coll, name)
                         if name in SPLIT_ALGOS and not (coll, name) == ("allreduce", "rd")
                         else None)
                log.info("PLAN", f"{coll} {nbytes} B: {name}"
                         + (f" on {rails} rail(s)" if rails else "") + " ("
                         + ", ".join(f"{a} {t * 1e6:.0f} us" for a, t in times.items())
                         + (f", hier {self._hier_time(coll, nbytes):.0f} us"
                            if self.hier_ok else "")
                         + (f"; a second slice {self.slice_step:g} steps per step, "
                            f"{self.slice_why}" if self.piece_model else "") + ")")
        return algo

    def _kept_bytes(self, coll, nbytes):
        """The input a rank keeps for a lazy re-run (its own block of an allgather or
        reduce_scatter, else the whole payload): what failover.lazy_ok compares with
        LAZY_MAX_BYTES."""
        n = self.ranks
        return nbytes // n if coll in ("allgather", "reduce_scatter") and n else nbytes

    def _vote_time(self):
        """Seconds of a closing vote (with failover; 0 without), as flat_times prices it."""
        if not self.failover:
            return 0.0
        # an all-to-all of STATUS frames, P (P - 1) in all: VOTE_COST was set at 4 x 1
        # (VOTE_CAL_FRAMES); at 2 x 4 (8 ranks, 56 frames, 2 CPUs) the closing vote of a
        # hier broadcast cost ~1000 us (NEZHA_FAILOVER=0: hier 16 KiB 171 us, with it 1183)
        # where the unscaled price said ~205 (docs/results/session28/bcast-hier)
        scale = max(1.0, self.ranks * (self.ranks - 1) / VOTE_CAL_FRAMES)
        return VOTE_COST * scale * self._sync_time()  # VOTE_COST small allreduces (rd of 8 B)

    def _sync_time(self):
        """Seconds of the barrier a lazy hierarchical broadcast opens with (with failover;
        0 without): headers in to each host's first rank, dissemination between them, back
        out (hosts_barrier), priced as the small allreduce of the same shape (rd of 8 B)."""
        if not self.failover:
            return 0.0
        rate = max(self.rail_rates) if self.rail_rates else None
        return self.layout.time("allreduce", "rd", 8, 1, rate=rate)

    def _hier_seconds(self, coll, nbytes):
        """Modelled seconds of a hierarchical run, with its closing vote where it is not
        lazy (failover.lazy_ok): above LAZY_MAX_BYTES per rank, as flat_times prices them.
        A lazy hierarchical broadcast pays its opening barrier instead (_sync_time): until
        session 29 it voted at every size, ~1.1 ms at 2 x 4 for 16-64 KiB
        (docs/results/session28/bcast-hier, session29/bcast-hier-lazy)."""
        rails = len(self.rail_rates)
        t = self.layout.time(coll, "hier", nbytes, rails, rate=sum(self.rail_rates))
        if self._kept_bytes(coll, nbytes) > LAZY_MAX_BYTES:
            t += self._vote_time()
        elif coll == "broadcast":
            t += self._sync_time()
        return t

    def _hier_time(self, coll, nbytes):
        return self._hier_seconds(coll, nbytes) * 1e6

    def _hier_wins(self, coll, flat, nbytes, root):
        """The cost model's verdict (costmodel.Layout.time), memoized. Its inputs never
        change (layout, configured rails, not live ones): a call may be planned when it is
        posted (allgather, reduce_scatter, small broadcast), before a vote moves rails."""
        key = (coll, flat, nbytes, root)
        win = self._hier_memo.get(key)
        if win is None:
            t_hier = self._hier_seconds(coll, nbytes)
            name = ALGO_NAMES[flat]
            whole = name == "tree" or (name == "rd" and coll == "allreduce")
            # the rails the flat plan runs on (Planner.split's, as flat_times prices it): with
            # all rails assumed, allgather rd 16 KiB at 2 x 4 (1 rail: below the shared hosts'
            # 64 KiB piece) looked half its price and ran 2.2x hier's time (session 28)
            k = 1 if whole else self._rails_used(nbytes, coll, name)
            t_flat = self.layout.time(coll, name, nbytes, k, root,
                                      rate=sum(sorted(self.rail_rates, reverse=True)[:k]))
            if name == "chain" or (not whole
                                   and self._kept_bytes(coll, nbytes) > LAZY_MAX_BYTES):
                t_flat += self._vote_time()  # not lazy either: both sides vote (flat_times)
            # small payloads stay on their latency path unless hier wins clearly; not where
            # rd's price is the start-up measure of rd itself (allreduce, a size within the
            # measured ones): at 4 x 2 that margin kept 16 KiB on rd, 513-558 us against
            # hier's 388-407 (docs/results/session28/hop-per-host)
            latency = (nbytes < self.small if self.small is not None
                       else flat in (ALGO_RD, ALGO_TREE)
                       and not (flat == ALGO_RD and coll == "allreduce"
                                and self.layout.hop is not None
                                and nbytes <= self.layout.hop.points[-1][0]))
            win = t_hier < (HIER_CLEAR if latency else 1.0) * t_flat
            if len(self._hier_memo) >= 512:
                self._hier_memo.clear()
            self._hier_memo[key] = win
        return win

    def switch_points(self, coll, lo=1, hi=1 << 30, root=0):
        """{"a->b": first payload in bytes that gets b}: where the choice for coll changes
        between lo and hi bytes (powers of two scanned, each change found to the byte), in
        order of size; a change made again further up is "a->b#2" (#3, ...)."""
        out, prev, size = {}, self._choose(coll, lo, root, True), lo
        while size < hi:
            nxt = min(size * 2, hi)
            got = self._choose(coll, nxt, root, True)
            if got != prev:
                a, b = size, nxt  # algorithm(a) == prev != algorithm(b)
                while b - a > 1:
                    m = (a + b) // 2
                    if self._choose(coll, m, root, True) == prev:
                        a = m
                    else:
                        b = m
                mid = self._choose(coll, b, root, True)
                name = f"{ALGO_NAMES[prev]}->{ALGO_NAMES[mid]}"
                # the same change again further up (ring->rd->ring: a vote's cost where the
                # split starts) gets its own entry, name#2, instead of replacing the first
                k = sum(1 for x in out if x.split("#")[0] == name)
                out[name if not k else f"{name}#{k + 1}"] = b
                prev = mid
                if mid != got:
                    # a third choice before nxt (A->C->B): scan on from b, where choose is
                    # prev. Bisecting [size, nxt] again from C, which size does not have,
                    # found C->A and A->C for ever (6 ranks, NEZHA_MIN_RAIL_PIECE=32k)
                    size = b
                    continue
            size = nxt
        return out

    def switch_table(self):
        """{collective: {"a->b": bytes}} of the auto choice for this layout and these rails,
        4 B to 1 GiB (`nezha info`, NEZHA_DEBUG=INFO)."""
        return {coll: self.switch_points(coll)
                for coll in ("allreduce", "broadcast", "allgather", "reduce_scatter")}

    def describe(self):
        """One line: the layout, the rails the model assumes and the switch points."""
        hosts = len(set(self.hosts))
        rails = ", ".join(f"{r * 8e-6:.0f}" for r in self.rail_rates)
        table = self.switch_table()
        parts = [f"{coll} " + (", ".join(f"{k} at {_size(v)}" for k, v in pts.items())
                               or ALGO_NAMES[self._choose(coll, 1 << 20, 0, True)])
                 for coll, pts in table.items()]
        src = "fixed NEZHA_SMALL_MSG_THRESHOLD" if self.small is not None else "cost model"
        return (f"algorithms ({src}, NEZHA_ALGO={self.algo}; {self.ranks} ranks on {hosts} "
                f"hosts, {self.layout.crowding:g} ranks per CPU, step latency "
                f"{self.layout.rail_alpha * 1e6:.0f} us ({self.alpha_why}), rails {rails} Mbit/s"
                f"{' (links: the probe x 2(N-1)/N)' if self._ring_payload and self.rail_alpha else ''}"
                f"{', failover votes' if self.failover else ''}, {self.describe_piece()}"
                f"{self.describe_hop()}): "
                + "; ".join(parts))

    def describe_hop(self):
        """', rd allreduce between hosts from one rank per host (...)' where rd_hosts.pxi
        runs, ', whole-payload steps' bytes measured (...)' where measured, or ''."""
        hop, lay = self.layout.hop, self.layout
        via = (f", rd allreduce between hosts from one rank per host ({lay.hosts_rd} step{'s' if lay.hosts_rd > 1 else ''})"
               if lay.hosts_rd else "")
        return via + ("" if hop is None else
                      f", whole-payload steps' bytes measured ({hop.describe()} on a host's link)")

    def describe_piece(self):
        """The smallest rail piece in use and where it comes from."""
        v = self.min_piece
        if self.piece_model:
            return (f"rails by the model for allreduce, allgather, reduce_scatter (a slice "
                    f"{self.slice_step:g} steps per step, {self.slice_why}), the broadcast "
                    f"tree ({self._tree_slice():g} a slice) and the broadcast chain "
                    f"({CHAIN_SLICE:g} a hop), "
                    f"else min rail piece {_size(v)} "
                    f"({self.piece_why})")
        return f"min rail piece {'inf' if v == float('inf') else _size(v)} ({self.piece_why})"

    # ---- the INA rail: an offload channel beside the TCP rails ----------------------------
    def set_offload(self, min_bytes, small="auto", small_bytes=0):
        """An INA rail is configured: its split model (large collectives: costmodel.
        OffloadModel), NEZHA_INA_SMALL and the largest small allreduce (one datagram:
        NEZHA_INA_CHUNK, or INA_SMALL_BYTES when that is 0)."""
        self.offload = OffloadModel(min_bytes)
        self.ina_small_mode = small
        self.ina_small_max = int(small_bytes) or INA_SMALL_BYTES
        self._ina_memo = {}

    def offload_split(self, kind, count, blocks, es):
        """Elements [k, count) (of each block) to the INA rail: k (OffloadModel.split)."""
        return self.offload.split(kind, count, blocks, es)

    def ina_small(self, nbytes, recoverable=True):
        """Whether an allreduce of nbytes (1 element or more) goes whole to the INA rail,
        from what every rank holds alike: NEZHA_INA_SMALL, the layout, the configured rail
        rates, and recoverable (failover is on: a service lost during one is recovered). Not
        from learned rates: a lazy collective has no agreement to learn from."""
        mode = getattr(self, "ina_small_mode", "off")
        if mode == "off" or self.ranks < 2 or not 0 < nbytes <= self.ina_small_max:
            return False
        if mode == "on":
            return True
        return recoverable and self.ina_small_wins(nbytes)

    def ina_small_wins(self, nbytes):
        """The cost model's verdict: two hops through the service beat the fastest flat
        allreduce on the TCP rails (rd for small payloads), memoized."""
        got = self._ina_memo.get(nbytes)
        if got is None:
            rate = max(self.rail_rates)
            tcp = min(self.flat_times("allreduce", nbytes).values())
            got = ina_small_time(self.layout, nbytes, rate) < tcp
            if len(self._ina_memo) >= 1024:
                self._ina_memo.clear()
            self._ina_memo[nbytes] = got
        return got

    def allreduce(self, count, esize):
        """Plan for an allreduce of count elements."""
        nbytes = count * esize
        algo = self.algorithm("allreduce", nbytes)
        if algo == ALGO_RD:  # latency-bound: whole, on the channel that finishes first
            key = bucket_of("allreduce-rd", nbytes)
            return Plan([(self.best_channel(key), 0, count)], algo, key, esize)
        slices, key = self.split("allreduce", count, esize, algo=algo)
        return Plan(slices, algo, key, esize, self._owner_tag(algo))

    def broadcast(self, count, esize, small_algo=ALGO_TREE, root=0):
        """Plan for a broadcast: a tree for small payloads (or small_algo: ALGO_RD, an
        allreduce in which the other ranks add nothing, which with failover follows a lazy
        tree), a pipelined chain or hier for large. The tree is striped over as many rails
        as the model finds worth their slice (_tree_rails), each rail's slice a whole tree."""
        algo = self.algorithm("broadcast", count * esize, root)
        if algo == ALGO_TREE:
            key = bucket_of("broadcast-tree", count * esize)
            k = self._tree_rails(count * esize, root)
            if k > 1 and count >= k:
                return Plan(self._tree_slices(count, k), small_algo, key, esize)
            return Plan([(self.best_channel(key), 0, count)], small_algo, key, esize)
        slices, key = self.split("broadcast", count, esize, algo=algo)
        return Plan(slices, algo, key, esize, self._owner_tag(algo))

    def _tree_rails(self, nbytes, root=0):
        """Rails (the fastest first) a small broadcast's tree is striped over: the count
        with the shortest modelled tree, each rail after the first paying TREE_SLICE steps.
        Only where the model picks rails at all (piece_model: auto, one rank per host, a
        measured step, one connection per rail); else one. From agreed inputs only (rates,
        step latency, measured hop cost): the same on every rank."""
        if not self.piece_model or self.ranks < 2:
            return 1
        return self._rails_memoized(("tree", nbytes, root),
                                    lambda: self._count_tree_rails(nbytes, root))

    def _count_tree_rails(self, nbytes, root):
        rates = sorted(self.rail_rates, reverse=True)[: max(1, self.max_rails)]
        live = sum(1 for a in self.alive if a)
        extra = self._tree_slice(root) * self.layout.rail_alpha
        times = [(self.layout.time("broadcast", "tree", nbytes, 1, root,
                                   rate=sum(rates[:j])) + (j - 1) * extra, j)
                 for j in range(1, min(len(rates), max(live, 1)) + 1)]
        k = min(times)[1]
        if log.enabled("INFO", "PLAN"):
            log.info("PLAN", f"broadcast tree of {nbytes} B: {k} rail(s) ("
                     + ", ".join(f"{j}: {t * 1e6:.0f} us" for t, j in times) + ")")
        return k

    def _tree_slice(self, root=0):
        """Steps one more rail's slice adds to the tree: TREE_SLICE, or where the second
        slice is measured or set (slice_why not "constant") that per round of the tree."""
        if self.slice_why == "constant":
            return TREE_SLICE
        return self.slice_step * len(self.layout._tree(root))

    def _tree_slices(self, count, k):
        """[(channel, off, cnt)] of a tree striped over the k live channels the prior rates
        rank first, shared by those rates (the agreed prior: never a bucket's own, which a
        rank could have moved alone; lazy trees feed no bucket anyway), cut as split cuts
        (split_counts: whole units, each unit left over where the tree finishes first; the
        old int(count x share) gave the last rail the rest: 4 KiB on 400 + 100 was 3276/820
        bytes, split_counts 3296/800)."""
        prior = self.model.prior()
        live = [c for c in range(self.nchan) if self.alive[c]] or [0]
        top = sorted(live, key=lambda c: (-prior[c], c))[:k]
        shares = self.model.prior_shares([c in top for c in range(self.nchan)])
        slices, off, order = [], 0, sorted(top)
        for c, cnt in zip(order, split_counts(count, [shares[c] for c in order])):
            if cnt > 0:
                slices.append((c, off, cnt))
            off += cnt
        return slices

    def flat_tree(self, chan, nbytes, root=0):
        """Whether a tree's slice of nbytes on chan runs in one round (the root sends to
        every other rank itself) rather than binomial: when the model prices that one step
        below the binomial tree's log2(n) at chan's rate (latency-bound payloads). Only where
        piece_model holds (one rank per host, a measured step); the same on every rank."""
        if not self.piece_model or self.ranks < 3:
            return False
        return self._rails_memoized(("star", chan, nbytes, root),
                                    lambda: self._star_wins(chan, nbytes, root))

    def _star_wins(self, chan, nbytes, root):
        rate = self.rail_rates[min(chan // max(self.nconns, 1), len(self.rail_rates) - 1)]
        star = self.layout.time("broadcast", "star", nbytes, 1, root, rate=rate)
        tree = self.layout.time("broadcast", "tree", nbytes, 1, root, rate=rate)
        if log.enabled("INFO", "PLAN"):
            log.info("PLAN", f"broadcast tree of {nbytes} B on channel {chan}: "
                     f"{'one round' if star < tree else 'binomial'} (one round "
                     f"{star * 1e6:.0f} us, binomial {tree * 1e6:.0f} us)")
        return star < tree

    def reduce(self, count, esize):
        """Plan for a reduce: small payloads whole (recursive doubling), large ones split."""
        if self.algorithm("reduce", count * esize) == ALGO_RD:
            key = bucket_of("reduce-rd", count * esize)
            return Plan([(self.best_channel(key), 0, count)], ALGO_RD, key, esize)
        return self.blocks("reduce", count, esize)

    def blocks(self, coll, block_count, esize, algo=ALGO_RING):
        """Plan for allgather / reduce_scatter / alltoall / reduce: how each block is cut
        (allgather and reduce_scatter: over rails by the size of all the ranks' blocks)."""
        nblocks = self.ranks if coll in ("allgather", "reduce_scatter") else 1
        slices, key = self.split(coll, block_count, esize, nblocks, algo)
        return Plan(slices, algo, key, esize, self._owner_tag(algo, coll))

    def single(self, algo=0):
        """One whole piece on the best channel (barrier, send/recv)."""
        return Plan([(self.best_channel(), 0, 0)], algo)


def split_unit(count, nrails):
    """Elements a rail's piece is a whole multiple of: ROUND where the payload holds
    PIECE_UNITS of them per rail, else the largest power of two that does (1 for the
    smallest), so a rail's share is rounded by at most 1/PIECE_UNITS of an equal one.
    A 256-element unit cut 8 KiB a rank (2048 float32) into eighths: the 100's fifth of 400 +
    100 became a quarter and its piece ran as long as the whole payload on the 400 (session
    29, docs/results/session29/allgather-small)."""
    unit = ROUND
    while unit > 1 and count < unit * PIECE_UNITS * nrails:
        unit //= 2
    return unit


def split_counts(count, shares):
    """Elements per rail (in the order of shares, summing to count) for the payload's
    shares: every rail's ideal count rounded down to split_unit, and each unit left over
    to the rail that then finishes first (its count over its share: the split's makespan
    grows least), the first rail on a tie. The old rule gave the last rail every unit
    left over, which on 400 + 100 made the 100's piece the slowest (a quarter instead of a
    fifth). Integers from the agreed shares: the same on every rank."""
    n = len(shares)
    if n == 1:
        return [count]
    unit = split_unit(count, n)
    units, rest = divmod(count, unit)  # whole units, and a tail under one unit
    total = sum(shares) or 1.0
    w = [max(float(x), 0.0) / total for x in shares]
    got = [int(units * x) for x in w]
    for _ in range(units - sum(got)):
        best = min((j for j in range(n) if w[j] > 0),
                   key=lambda j: ((got[j] + 1) / w[j], j), default=0)
        got[best] += 1
    out = [g * unit for g in got]
    if rest:  # under one unit: to the rail that finishes first with it
        best = min((j for j in range(n) if w[j] > 0),
                   key=lambda j: ((out[j] + rest) / w[j], j), default=0)
        out[best] += rest
    return out


def _size(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.4g} {unit}"
    return f"{n} B"


def layout_planner(cfg, hosts, mbps=None, rails=1, nconns=1, failover=False):
    """A planner for a layout (host of every rank) and rails (Mbit/s each; None: rails of
    RAIL_RATE) without a job, for its switch points (`nezha info`)."""
    rails = len(mbps) if mbps else rails
    p = Planner(rails * nconns, cfg, ranks=len(hosts),
                nominal=[m for m in mbps for _ in range(nconns)] if mbps else None)
    p.set_hosts(hosts)
    p.set_failover(failover)
    return p
