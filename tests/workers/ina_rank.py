"""One rank of an allreduce job over loop (TCP) rails + an INA service (tests/test_ina_rail.py):
checks every result against a numpy oracle; prints RESULT {json}."""
import os
import sys
import time

import numpy as np

import nezha
from nezha.types import ReduceOp
from tests._result import report

# float sums stay exact: small integers
DTYPES = [np.float32, np.float64, np.int32, np.int64]
OPS = {"sum": (ReduceOp.SUM, lambda xs: np.sum(xs, axis=0)),
       "min": (ReduceOp.MIN, lambda xs: np.min(xs, axis=0)),
       "max": (ReduceOp.MAX, lambda xs: np.max(xs, axis=0)),
       "prod": (ReduceOp.PROD, lambda xs: np.prod(xs, axis=0))}


def stop_agreed(comm, path):
    """True once any rank sees the stop file (agreed: every rank leaves its loop together)."""
    flag = np.array([float(os.path.exists(path))], np.float64)
    comm.allreduce(flag, op=ReduceOp.MAX)
    return flag[0] > 0


def inputs(r, n, dt, count, seed):
    """Every rank's input, the same on every rank (so each checks the whole result)."""
    return [np.random.default_rng([seed, q]).integers(-3, 4, count).astype(dt) for q in range(n)]


def check(comm, dt, opname, count, seed, inplace):
    op, fn = OPS[opname]
    xs = inputs(comm.rank, comm.size, dt, count, seed)
    want = fn(np.stack(xs)) if count else np.empty(0, dt)
    a = xs[comm.rank].copy()
    if inplace:
        comm.allreduce(a, op=op)
        got = a
    else:
        got = np.empty_like(a)
        comm.allreduce(a, got, op=op)
        if not np.array_equal(a, xs[comm.rank]):
            return False  # the input must be left alone
    return np.array_equal(got.astype(np.float64), want.astype(np.float64))


def main(mode):
    comm = nezha.Communicator()
    wrong, runs, seed = 0, 0, 0
    if mode == "matrix":
        for dt in DTYPES:
            for opname in ("sum", "min", "max", "prod"):
                for count in (0, 1, 7, 1000003 // np.dtype(dt).itemsize + 1):
                    for inplace in (True, False):
                        seed += 1
                        runs += 1
                        wrong += not check(comm, dt, opname, count, seed, inplace)
        # AVG of floats (exact: the sums are small integers, divided by the same size)
        for dt in (np.float32, np.float64):
            xs = inputs(comm.rank, comm.size, dt, 3 << 18, 99)
            a = xs[comm.rank].copy()
            comm.allreduce(a, op=ReduceOp.AVG)
            runs += 1
            wrong += not np.allclose(a, np.mean(np.stack(xs), axis=0), rtol=1e-6, atol=0)
    else:  # loop until the stop file: the test kills (and may restart) the service meanwhile
        stop = os.environ["TEST_STOP"]
        count = (3 << 20) // 4 + 5
        same = np.empty(count, np.float32)  # "same": one buffer, as a training loop has
        while not stop_agreed(comm, stop):
            seed += 1
            runs += 1
            if mode == "same":
                xs = inputs(comm.rank, comm.size, np.float32, count, seed)
                same[:] = xs[comm.rank]
                comm.allreduce(same)
                wrong += not np.array_equal(same, np.sum(np.stack(xs), axis=0))
            else:
                wrong += not check(comm, np.float32, "sum", count, seed, seed % 2 == 0)
            if comm.rank == 0:
                with open(os.environ["TEST_PROGRESS"], "w") as f:
                    f.write(str(runs))
    ina = comm._ina
    res = dict(runs=runs, wrong=wrong, offloads=ina.offloads if ina else -1,
               failures=ina.failures if ina else -1, alive=bool(ina and ina.alive),
               window=ina.client.window if ina and ina.client else -1,
               window_why=ina.window_why if ina else "", rtt_ns=ina.rtt_ns if ina else 0)
    comm.close()
    report(res)


if __name__ == "__main__":
    main(sys.argv[1])
