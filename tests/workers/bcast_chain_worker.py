"""One rank of tests/test_bcast_tree.py's split chain: the planner set as the lab's 4 x 1 sees
it (one rank per host, the probed rates TEST_CHAIN_MBPS, the step TEST_CHAIN_ALPHA; the
same on every rank), broadcasts from every root at the sizes around where the model splits
the chain over both rails (found here by bisection) and at 16/32 KiB; every result exact
against numpy. Prints RESULT {wrong, plans, split_at}: plans [(bytes, algo, slices)]."""
import json
import os
import sys

import numpy as np

import nezha
from nezha.planner import ALGO_CHAIN, ALGO_NAMES
from tests._result import report


def data(nbytes, root, k):
    return ((np.arange(nbytes, dtype=np.int64) * 31 + root * 7 + k) % 251 + 1).astype(np.uint8)


def chain_rails(p, nbytes):
    plan = p.broadcast(nbytes, 1)
    return len({c for c, _, _ in plan.slices}) if plan.algo == ALGO_CHAIN else 0


def main():
    comm = nezha.Communicator()
    r, n = comm.rank, comm.size
    p = comm.planner
    p.set_hosts(list(range(n)), 1.0)  # one rank per host, as the lab's 4 x 1
    p.set_rail_rates(json.loads(os.environ["TEST_CHAIN_MBPS"]), ring_payload=True)
    p.set_step_latency(float(os.environ["TEST_CHAIN_ALPHA"]), "test")
    lo, hi = 16 << 10, 64 << 10  # the chain on one rail at lo, on two at hi (bisect between)
    split_at = None
    if chain_rails(p, lo) == 1 and chain_rails(p, hi) == 2:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if chain_rails(p, mid) == 2 else (mid, hi)
        split_at = hi
    sizes = [16383, 16384, 16385, 32767, 32768, 32769]
    if split_at:
        sizes += [split_at - 1, split_at, split_at + 1]
    wrong, plans, k = [], [], 0
    for nbytes in sizes:
        for dt in (np.uint8, np.float32):
            if nbytes % np.dtype(dt).itemsize:
                continue
            for root in range(n):
                want = data(nbytes, root, k)
                k += 1
                buf = want.copy() if r == root else np.zeros(nbytes, np.uint8)
                comm.broadcast(buf.view(dt), root=root)
                pl = comm._st.last_plan
                plans.append((nbytes, ALGO_NAMES[pl.algo], [list(x) for x in pl.slices]))
                if not np.array_equal(buf, want):
                    wrong.append((nbytes, np.dtype(dt).name, root))
    report(dict(wrong=wrong, plans=plans, split_at=split_at, model=p.piece_model,
                piece=p.describe_piece()))
    comm.close()


if __name__ == "__main__":
    sys.exit(main())
