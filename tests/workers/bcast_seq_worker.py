"""One rank of tests/test_bcast_tree.py: small broadcasts in sequences (back to back, between
allreduces and barriers, queued, on kept buffers), every root, sizes at the boundaries;
every result checked against numpy exactly. Prints RESULT {wrong, algos, ...}: algos is the
(algorithm, bytes) of each blocking broadcast, ("other", 0) for what ran between (the test
checks every rank ran the same ones)."""
import json
import os
import sys

import numpy as np

import nezha
from nezha.planner import ALGO_NAMES
from tests._result import report
from tests._tree import force_tree

# bytes: none, one, primes, the 4 B-16 KiB boundaries (and one past each)
SIZES = [0, 1, 3, 4, 5, 13, 97, 1021, 4095, 4096, 4097, 8191, 8192, 8209, 16383, 16384, 16385]


def data(nbytes, root, k):
    """Root's bytes of call k (never zero everywhere: a stale zero buffer must show)."""
    return ((np.arange(nbytes, dtype=np.int64) * 31 + root * 7 + k) % 251 + 1).astype(np.uint8)


def main():
    comm = nezha.Communicator()
    force_tree(comm)  # TEST_TREE (tests/_tree.py)
    r, n = comm.rank, comm.size
    if os.environ.get("TEST_TREE_PRIOR"):  # the channels' prior alike on every rank
        m = comm.planner.model
        m.nominal = [float(x) for x in json.loads(os.environ["TEST_TREE_PRIOR"])]
        m.static = True  # the prior stays these rates (no measured rho replaces them)
        m.buckets.clear()
        m.version += 1
    wrong, algos, k, rails, cuts = [], [], 0, set(), []

    def bcast(nbytes, root, buf=None, dt=np.uint8):
        nonlocal k
        want = data(nbytes, root, k).view(np.uint8)
        k += 1
        if buf is None:
            buf = np.empty(nbytes, np.uint8)
        buf[:] = want if r == root else 0
        comm.broadcast(buf.view(dt) if nbytes % np.dtype(dt).itemsize == 0 else buf, root=root)
        algos.append((ALGO_NAMES[comm._st.last_plan.algo] if n > 1 else "none", nbytes))
        rails.add(len({c for c, _, _ in comm._st.last_plan.slices}))
        cuts.append((nbytes // np.dtype(dt).itemsize if nbytes % np.dtype(dt).itemsize == 0
                     else nbytes, [list(x) for x in comm._st.last_plan.slices],
                     comm.planner.model.prior_shares([True] * comm.planner.nchan)))
        if r == root:
            buf[:] = 0  # the caller owns it again: a re-run must use the copy kept
        if r != root and not np.array_equal(buf, want):
            wrong.append((k - 1, nbytes, root, algos[-1][0]))

    for nbytes in SIZES:
        for root in range(n):
            bcast(nbytes, root)                       # after an allreduce or a broadcast
            bcast(nbytes, (root + 1) % n)             # right after one
            bcast(nbytes, (root + 2) % n)             # and a third
            a = np.full(3, r, np.int64)
            comm.allreduce(a)
            algos.append(("other", 0))
            if not (a == n * (n - 1) // 2).all():
                wrong.append(("allreduce", nbytes, root))
            bcast(nbytes, root, dt=np.int32)
            comm.barrier()
            algos.append(("other", 0))
            bcast(nbytes, root)
        # queued: planned one after another when they run, as blocking ones are
        bufs = [np.empty(nbytes, np.uint8) for _ in range(3)]
        wants = []
        for j, b in enumerate(bufs):
            root = j % n
            wants.append(data(nbytes, root, k))
            k += 1
            b[:] = wants[-1] if r == root else 0
        reqs = [comm.ibroadcast(b, root=j % n) for j, b in enumerate(bufs)]
        algos.append(("other", 0))  # not looked at
        for j, q in enumerate(reqs):
            q.wait(60)
            if not np.array_equal(bufs[j], wants[j]):
                wrong.append(("queued", nbytes, j))
        # kept buffers (the fast path): the root turning, back to back and after a barrier
        kept = np.empty(nbytes, np.uint8)
        for j in range(2 * n):
            bcast(nbytes, j % n, kept)
            if j % 3 == 2:
                comm.barrier()
                algos.append(("other", 0))
    st = comm.stats()
    report(dict(wrong=wrong, algos=algos, rails=sorted(rails), cuts=cuts, fast=st["fast_path_calls"], votes=st["votes"],
                events=len(st["events"])))
    comm.close()


if __name__ == "__main__":
    sys.exit(main())
