"""One rank of tests/test_split_rounding.py: allgather (rd, ring, direct), reduce_scatter and allreduce split
over two channels at the sizes where Planner.split's unit changes (planner.split_unit), with
the channels' prior set alike on every rank to SPLIT_TEST_PRIOR (e.g. [4, 1]: 400 + 100),
each result against numpy; prints RESULT {json} with every plan's slices."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import nezha  # noqa: E402
from nezha.costmodel import bucket_of  # noqa: E402
from nezha.planner import ALGO_NAMES  # noqa: E402
from tests._result import report  # noqa: E402


def main():
    comm = nezha.Communicator()
    r, n = comm.rank, comm.size
    counts = json.loads(os.environ["SPLIT_TEST_COUNTS"])
    prior = json.loads(os.environ["SPLIT_TEST_PRIOR"])
    m = comm.planner.model
    m.nominal = [float(x) for x in prior]  # the same on every rank, before any split
    m.buckets.clear()
    m.version += 1
    failures, plans, keep, i = [], [], [], 0
    for algo in ("rd", "ring", "direct"):  # direct: allgather only (the others auto)
        comm.planner.algo = algo
        for count in counts:
            i += 1
            rng = np.random.default_rng(1000 * i + r)
            mine = rng.integers(-1000, 1000, count, dtype=np.int64).astype(np.int32)
            every = [np.random.default_rng(1000 * i + q).integers(-1000, 1000, count,
                     dtype=np.int64).astype(np.int32) for q in range(n)]
            out = np.full(n * count, 0x55, np.int32)
            shares = m.shares(bucket_of("allgather", count * 4), [True, True])  # as split reads them
            comm.allgather(mine, out)
            ag = comm._st.last_plan
            if not np.array_equal(out, np.concatenate(every)):
                failures.append(f"allgather {algo} count={count}")
            big = np.concatenate([e * (b + 1) for b, e in enumerate(every)])  # n blocks

            def rs_input(q):
                g = np.random.default_rng(7000 * i + q)
                return g.integers(-99, 99, n * count, dtype=np.int64).astype(np.int32)
            rs_in = rs_input(r)
            rs_all = [rs_input(q) for q in range(n)]
            got = np.full(count, 0x55, np.int32)
            comm.reduce_scatter(rs_in, got)
            want = np.sum(rs_all, axis=0, dtype=np.int32)[r * count:(r + 1) * count]
            if not np.array_equal(got, want):
                failures.append(f"reduce_scatter {algo} count={count}")
            ar = np.full(n * count, 0x55, np.int32)
            comm.allreduce(big, ar)
            if not np.array_equal(ar, big * n):
                failures.append(f"allreduce count={n * count}")
            keep += [mine, out, rs_in, got, big, ar]
            plans.append([algo, count, ALGO_NAMES.get(ag.algo), [list(s) for s in ag.slices],
                          [float(x) for x in shares]])
    report(dict(rank=r, failures=failures, plans=plans))
    comm.close()


if __name__ == "__main__":
    main()
