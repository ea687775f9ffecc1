"""One rank of tests/test_slice_step.py's exactness run: the planner set as the lab's 4 x 1
saw it at start-up (one rank per host; probed rates TEST_SLICE_MBPS, step TEST_SLICE_ALPHA,
whole-payload samples TEST_SLICE_HOP, a second slice TEST_SLICE_STEPS; the same on every
rank). Finds where the allreduce's (algorithm, rails) and the broadcast tree's rails change
between 512 B and 16 KiB (bisection to the element), runs every such point and one element
either side, each result exact against numpy. Prints RESULT {wrong, plans, points}."""
import json
import os

import numpy as np

import nezha
from nezha.planner import ALGO_NAMES
from tests._result import report

LO, HI = 512, 16 << 10


def shape(plan):
    return ALGO_NAMES[plan.algo], len({c for c, _, _ in plan.slices})


def changes(f, lo, hi, step):
    """Sizes (multiples of step, lo..hi) where f changes: the first size of each new value."""
    out, prev, size = [], f(lo), lo
    while size < hi:
        nxt = min(size * 2, hi)
        got = f(nxt)
        if got != prev:
            a, b = size, nxt
            while b - a > step:
                m = (a + b) // 2 // step * step
                a, b = (m, b) if f(m) == prev else (a, m)
            out.append(b)
            prev, size = f(b), b
            continue
        size = nxt
    return out


def main():
    comm = nezha.Communicator()
    r, n = comm.rank, comm.size
    p = comm.planner
    p.set_hosts(list(range(n)), 1.0)
    p.set_rail_rates(json.loads(os.environ["TEST_SLICE_MBPS"]), ring_payload=True)
    p.set_step_latency(float(os.environ["TEST_SLICE_ALPHA"]), "test")
    p.set_hop_samples(json.loads(os.environ["TEST_SLICE_HOP"]), "test")
    p.set_slice_step(float(os.environ["TEST_SLICE_STEPS"]), "test")
    ar = changes(lambda b: shape(p.allreduce(b // 4, 4)), LO, HI, 4)
    bc = changes(lambda b: shape(p.broadcast(b, 1)), LO, HI, 1)
    wrong, plans, k = [], [], 0
    for nbytes in sorted({x + d for x in ar for d in (-4, 0, 4)} | {1024, 2048, 4096}):
        for dt in (np.int32, np.float32, np.float64):
            if nbytes % np.dtype(dt).itemsize:
                continue
            cnt = nbytes // np.dtype(dt).itemsize
            base = (np.arange(cnt, dtype=np.int64) * 7 + k) % 1000
            k += 1
            buf = (base + r).astype(dt)
            want = (base * n + n * (n - 1) // 2).astype(dt)  # exact: small integers
            comm.allreduce(buf)
            pl = comm._st.last_plan
            plans.append(("allreduce", nbytes, np.dtype(dt).name, ALGO_NAMES[pl.algo],
                          [list(x) for x in pl.slices]))
            if not np.array_equal(buf, want):
                wrong.append(("allreduce", nbytes, np.dtype(dt).name))
    for nbytes in sorted({x + d for x in bc for d in (-1, 0, 1)} | {1024, 2048}):
        for root in range(n):
            want = ((np.arange(nbytes, dtype=np.int64) * 31 + root * 7 + k) % 251).astype(np.uint8)
            k += 1
            buf = want.copy() if r == root else np.zeros(nbytes, np.uint8)
            comm.broadcast(buf, root=root)
            pl = comm._st.last_plan
            plans.append(("broadcast", nbytes, root, ALGO_NAMES[pl.algo],
                          [list(x) for x in pl.slices]))
            if not np.array_equal(buf, want):
                wrong.append(("broadcast", nbytes, root))
    report(dict(wrong=wrong, plans=plans, points={"allreduce": ar, "broadcast": bc},
                model=p.piece_model, piece=p.describe_piece()))
    comm.close()


if __name__ == "__main__":
    main()
