"""One rank of tests/test_algo_boundaries.py: every flat allreduce algorithm (rd, rab, ring,
forced in turn on every rank alike) at the boundary sizes, checked against the numpy
oracle, and the algorithm NEZHA_ALGO=auto picks per size; prints RESULT {json}."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import nezha  # noqa: E402
from nezha.planner import ALGO_NAMES  # noqa: E402
from nezha.types import DType, ReduceOp  # noqa: E402
from tests import oracle  # noqa: E402
from tests._result import report  # noqa: E402

DTYPES = (DType.INT32, DType.FLOAT32, DType.INT64)
OPS = (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PROD)


def main():
    comm = nezha.Communicator()
    r, n = comm.rank, comm.size
    counts = sorted(set(json.loads(os.environ["ALGO_TEST_COUNTS"])))
    algos = os.environ.get("ALGO_TEST_ALGOS", "rd,rab,ring").split(",")
    failures, keep, i, striped = [], [], 0, set()
    for algo in algos:
        comm.planner.algo = algo  # the same on every rank, between two collectives
        for count in counts:
            dt, op = DTYPES[i % len(DTYPES)], OPS[i % len(OPS)]
            i += 1
            inputs = [oracle.values(dt, count, q, op, seed=i) for q in range(n)]
            expected = oracle.reduce(dt, op, inputs)
            send = inputs[r].copy()
            recv = np.full_like(send, 0x55)
            comm.allreduce(send, recv, op=op)
            keep += [send, recv]  # fresh addresses for every call (no cached schedule)
            plan = comm._st.last_plan
            ran = ALGO_NAMES[plan.algo] if plan is not None else None
            if plan is not None and len(plan.slices) > 1:
                striped.add(ran)
            if n > 1 and ran != algo:
                failures.append(f"{algo} forced, {ran} ran (count={count})")
            try:
                oracle.assert_result(recv, expected, dt, op)
                np.testing.assert_array_equal(send, inputs[r])
            except AssertionError as exc:
                failures.append(f"{algo} {dt.name} {op.name} count={count}: {str(exc)[:300]}")
    # the same buffers again and again: the plan cache and the compiled fast path rerun
    # the schedule built once
    for algo in algos:
        comm.planner.algo = algo
        x, y = np.empty(3001, np.int64), np.empty(3001, np.int64)
        for rep in range(4):
            x[:] = np.arange(3001) * (r + 1) + rep
            comm.allreduce(x, y)
            want = np.arange(3001) * (n * (n + 1) // 2) + rep * n
            if not np.array_equal(y, want):
                failures.append(f"{algo} repeated call {rep} wrong")
        keep += [x, y]
    comm.planner.algo = "auto"
    sizes = json.loads(os.environ.get("ALGO_TEST_PICK", "[]"))
    picks = {coll: [comm.algorithm_for(s, coll) for s in sizes]
             for coll in ("allreduce", "broadcast", "allgather", "reduce_scatter")}
    report(dict(rank=r, failures=failures, picks=picks, calls=i, striped=sorted(striped)))
    comm.close()


if __name__ == "__main__":
    main()
