"""The planner: which channels carry which part of a collective, and with which algorithm.

Every rank runs the same deterministic function on the same inputs, so every rank gets
the same plan (its hash travels in each wire header and a difference is an error).
Weights are nominal and equal for now; cost feedback (measured per-rail speed) plugs in
through set_weights.
"""
import zlib

ALGO_RING = 1
ALGO_RD = 2
ALGO_CHAIN = 3
ALGO_TREE = 4
ALGO_DIRECT = 5
ALGO_NAMES = {ALGO_RING: "ring", ALGO_RD: "rd", ALGO_CHAIN: "chain", ALGO_TREE: "tree",
              ALGO_DIRECT: "direct"}


class Plan:
    """slices: [(channel, first element, element count)]; algo: algorithm id."""

    __slots__ = ("slices", "algo", "hash")

    def __init__(self, slices, algo):
        self.slices = slices
        self.algo = algo
        self.hash = zlib.crc32(repr((slices, algo)).encode())

    def __repr__(self):
        return f"Plan({ALGO_NAMES.get(self.algo, self.algo)}, {self.slices})"


class Planner:
    """Splits collectives over channels by weight, keeping small payloads whole."""

    def __init__(self, nchan, cfg):
        self.nchan = nchan
        self.weights = [1.0] * nchan
        self.algo = cfg["ALGO"]
        self.small = cfg["SMALL_MSG_THRESHOLD"]
        self.min_piece = cfg["MIN_RAIL_PIECE"]
        self.max_rails = cfg["MAX_RAILS"]

    def set_weights(self, weights):
        """Relative share of each channel (same values on every rank)."""
        self.weights = list(weights)

    def split(self, count, esize, unit_count=None):
        """[(channel, off, cnt)] covering [0, count) exactly once, by weight.

        unit_count: the per-rank block for collectives whose slices cut every block the
        same way (allgather, reduce_scatter, alltoall): the split is of that block."""
        n = count if unit_count is None else unit_count
        nbytes = n * esize
        active = [c for c in range(self.nchan) if self.weights[c] > 0][: self.max_rails]
        if not active:
            active = [0]
        min_piece = self.min_piece if self.min_piece != float("inf") else nbytes + 1
        # fewer channels when pieces would be smaller than the minimum piece
        while len(active) > 1 and nbytes < min_piece * len(active):
            active = active[:-1]
        if len(active) == 1:
            return [(active[0], 0, n)]
        total = sum(self.weights[c] for c in active)
        slices, off = [], 0
        for i, c in enumerate(active):
            cnt = n - off if i == len(active) - 1 else int(n * self.weights[c] / total)
            slices.append((c, off, cnt))
            off += cnt
        return [s for s in slices if s[2] > 0] or [(active[0], 0, n)]

    def allreduce(self, count, esize):
        """Plan for an allreduce of count elements."""
        nbytes = count * esize
        algo = {"ring": ALGO_RING, "rd": ALGO_RD}.get(self.algo)
        if algo is None:
            algo = ALGO_RD if nbytes < self.small else ALGO_RING
        if algo == ALGO_RD:
            return Plan([(0, 0, count)], algo)  # latency-bound: one rail, whole
        return Plan(self.split(count, esize), algo)

    def broadcast(self, count, esize):
        """Plan for a broadcast: a tree for small payloads, a pipelined chain for large."""
        if count * esize < self.small:
            return Plan([(0, 0, count)], ALGO_TREE)
        return Plan(self.split(count, esize), ALGO_CHAIN)

    def blocks(self, block_count, esize):
        """Plan for allgather / reduce_scatter / alltoall: how each block is cut."""
        return Plan(self.split(block_count, esize, unit_count=block_count), ALGO_RING)
