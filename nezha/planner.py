"""The planner: which channels carry which part of a collective, and with which algorithm.

Every rank runs the same deterministic function on the same inputs (the agreed cost model,
see costmodel.py), so every rank gets the same plan; its hash travels in each wire header
and a difference is an error. Plans are made when a collective starts to run, not when it
is posted, so every rank plans it after the same history of finished collectives.
"""
import zlib

from nezha.costmodel import HIER_CLEAR, CostModel, Layout, bucket_of

ALGO_RING = 1
ALGO_RD = 2
ALGO_CHAIN = 3
ALGO_TREE = 4
ALGO_DIRECT = 5
ALGO_HIER = 6
ALGO_NAMES = {0: "direct", ALGO_RING: "ring", ALGO_RD: "rd", ALGO_CHAIN: "chain",
              ALGO_TREE: "tree", ALGO_DIRECT: "direct", ALGO_HIER: "hier"}
ROUND = 256  # shares are whole multiples of this many elements (when large enough)
MAX_PIECES = 64  # slices of one collective (the vote carries one bit per slice)


class Plan:
    """slices: [(channel, first element, element count)]; algo: algorithm id; key: bucket."""

    __slots__ = ("slices", "algo", "hash", "key", "esize", "chans")

    def __init__(self, slices, algo, key=None, esize=1):
        self.slices = slices
        self.chans = [c for c, _, _ in slices]
        self.algo = algo
        self.key = key
        self.esize = esize
        self.hash = zlib.crc32(repr((slices, algo)).encode())

    def __repr__(self):
        return f"Plan({ALGO_NAMES.get(self.algo, self.algo)}, {self.slices})"


class Planner:
    """Splits collectives over channels by their measured rates, small payloads whole."""

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
        self.min_piece = cfg["MIN_RAIL_PIECE"]
        self.max_rails = cfg["MAX_RAILS"]
        self.max_ratio = cfg["RAIL_MAX_RATIO"]
        self.nconns = cfg["SOCKET_NCONNS"]
        # With failover, large slices are cut into pieces that run one after another on
        # their channel, so that a failure loses one piece, not the whole slice.
        self.piece_bytes = 0
        self.set_hosts([0] * ranks)

    def set_hosts(self, host_of):
        """Which host every rank is on. Hierarchical collectives apply (hier_ok) with more
        than one host, more than one rank per host and the same number on each."""
        self.hosts = list(host_of)
        counts = [self.hosts.count(h) for h in set(self.hosts)]
        self.hier_ok = len(counts) > 1 and len(set(counts)) == 1 and counts[0] > 1
        self.layout = Layout(self.hosts)
        self._hier_memo = {}

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

    def split(self, coll, count, esize):
        """[(channel, off, cnt)] covering [0, count) exactly once."""
        nbytes = count * esize
        key = bucket_of(coll, nbytes)
        rates, _ = self.model.rates(key)
        live = [c for c in range(self.nchan) if self.alive[c]] or [0]
        top = max(rates[c] for c in live)
        active = [c for c in live if rates[c] * self.max_ratio >= top]
        active = sorted(active, key=lambda c: (-rates[c], c))[: self.max_rails]
        min_piece = self.min_piece if self.min_piece != float("inf") else nbytes + 1
        shares = None
        while True:
            if len(active) <= 1:
                c = active[0] if active else self.best_channel(key)
                return self._pieces(c, 0, count, esize), key
            mask = [c in active for c in range(self.nchan)]
            shares = self.model.shares(key, mask)
            small = min(active, key=lambda c: (shares[c], -c))
            if shares[small] * nbytes >= min_piece:
                break
            active.remove(small)  # a piece this small costs more than it saves
        unit = ROUND if count >= ROUND * 4 * len(active) else 1
        slices, off = [], 0
        order = sorted(active)
        for i, c in enumerate(order):
            cnt = count - off if i == len(order) - 1 else int(count * shares[c]) // unit * unit
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

    def algorithm(self, coll, nbytes, root=0):
        """Algorithm id for nbytes of a collective (size, host layout and NEZHA_ALGO only):
        the flat one, or hierarchical where it applies and the cost model says it is faster
        (NEZHA_ALGO=hier forces it where it applies; ring and rd force flat)."""
        if coll == "allreduce":
            flat = {"ring": ALGO_RING, "rd": ALGO_RD}.get(
                self.algo, ALGO_RD if nbytes < self.small else ALGO_RING)
        elif coll == "broadcast":
            flat = ALGO_TREE if nbytes < self.small else ALGO_CHAIN
        elif coll == "reduce":  # small: the allreduce's latency algorithm, kept at the root
            return ALGO_RING if self.algo == "ring" or nbytes >= self.small else ALGO_RD
        elif coll in ("allgather", "reduce_scatter"):  # nbytes: all blocks together
            # small and a power of two of ranks: log2(P) steps (recursive doubling/halving)
            pow2 = self.ranks > 1 and not self.ranks & (self.ranks - 1)
            flat = (ALGO_RD if pow2 and self.algo != "ring" and nbytes < self.small
                    else ALGO_RING)
        else:
            return ALGO_DIRECT if coll == "alltoall" else ALGO_RING
        if not self.hier_ok or self.algo in ("ring", "rd"):
            return flat
        if flat == ALGO_TREE and self.algo != "hier":
            return flat  # small broadcasts stay lazy allreduces with failover (a hier one votes)
        return ALGO_HIER if self.algo == "hier" or self._hier_wins(coll, flat, nbytes, root) \
            else flat

    def _hier_wins(self, coll, flat, nbytes, root):
        """The cost model's verdict (costmodel.Layout.time), memoized. Its inputs never
        change (layout, configured rails, not live ones): a call may be planned when it is
        posted (allgather, reduce_scatter, small broadcast), before a vote moves rails."""
        key = (coll, flat, nbytes, root)
        win = self._hier_memo.get(key)
        if win is None:
            rails = max(self.nchan // self.nconns, 1)
            t_hier = self.layout.time(coll, "hier", nbytes, rails)
            t_flat = self.layout.time(coll, ALGO_NAMES[flat], nbytes, rails, root)
            # small payloads stay on their latency path unless hier wins clearly
            win = t_hier < (HIER_CLEAR if nbytes < self.small else 1.0) * t_flat
            if len(self._hier_memo) >= 512:
                self._hier_memo.clear()
            self._hier_memo[key] = win
        return win

    def allreduce(self, count, esize):
        """Plan for an allreduce of count elements."""
        nbytes = count * esize
        algo = self.algorithm("allreduce", nbytes)
        if algo == ALGO_RD:  # latency-bound: whole, on the channel that finishes first
            key = bucket_of("allreduce-rd", nbytes)
            return Plan([(self.best_channel(key), 0, count)], algo, key, esize)
        slices, key = self.split("allreduce", count, esize)
        return Plan(slices, algo, key, esize)

    def broadcast(self, count, esize, small_algo=ALGO_TREE, root=0):
        """Plan for a broadcast: a tree for small payloads (or small_algo: ALGO_RD, an
        allreduce in which the other ranks add nothing), a pipelined chain or hier for
        large."""
        algo = self.algorithm("broadcast", count * esize, root)
        if algo == ALGO_TREE:
            key = bucket_of("broadcast-tree", count * esize)
            return Plan([(self.best_channel(key), 0, count)], small_algo, key, esize)
        slices, key = self.split("broadcast", count, esize)
        return Plan(slices, algo, key, esize)

    def reduce(self, count, esize):
        """Plan for a reduce: small payloads whole (recursive doubling), large ones split."""
        if self.algorithm("reduce", count * esize) == ALGO_RD:
            key = bucket_of("reduce-rd", count * esize)
            return Plan([(self.best_channel(key), 0, count)], ALGO_RD, key, esize)
        return self.blocks("reduce", count, esize)

    def blocks(self, coll, block_count, esize, algo=ALGO_RING):
        """Plan for allgather / reduce_scatter / alltoall / reduce: how each block is cut."""
        slices, key = self.split(coll, block_count, esize)
        return Plan(slices, algo, key, esize)

    def single(self, algo=0):
        """One whole piece on the best channel (barrier, send/recv)."""
        return Plan([(self.best_channel(), 0, 0)], algo)
