"""One rank of a reduce_scatter / allgather job over loop (TCP) rails + an INA service
(tests/test_ina_rail.py): checks every result exactly against numpy; prints RESULT {json}.

matrix: dtypes x ops x block sizes (0, 1, a prime, one large enough to offload);
loop: reduce_scatters and allgathers until the stop file (the test kills the service)."""
import os
import sys

import numpy as np

import nezha
from nezha import costmodel
from nezha.types import ReduceOp
from tests._result import report
from tests.workers.ina_rank import stop_agreed

DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64]
OPS = {ReduceOp.SUM: lambda x: np.sum(x, axis=0), ReduceOp.MIN: lambda x: np.min(x, axis=0),
       ReduceOp.MAX: lambda x: np.max(x, axis=0), ReduceOp.PROD: lambda x: np.prod(x, axis=0)}


def inputs(n, dt, count, seed):
    """Every rank's input, the same on every rank (small integers: float sums exact)."""
    return [np.random.default_rng([seed, q]).integers(-3, 4, count).astype(dt) for q in range(n)]


def want_reduced(xs, dt, op):
    x = np.stack(xs)
    if op == ReduceOp.AVG:  # the exact sum divided once (service and engine alike), in float32
        acc = np.float64 if dt == np.float64 else np.float32
        return (np.sum(x.astype(acc), axis=0) / acc(len(xs))).astype(dt)
    return OPS[op](x).astype(dt)


def check_rs(comm, dt, op, block, seed):
    n, r = comm.size, comm.rank
    xs = inputs(n, dt, n * block, seed)
    send = xs[r].copy()
    out = np.full(block, 9, dt)
    comm.reduce_scatter(send, out, op=op)
    want = want_reduced(xs, dt, op)[r * block:(r + 1) * block]
    return np.array_equal(send, xs[r]) and out.tobytes() == want.tobytes()


def check_ag(comm, dt, block, seed):
    n, r = comm.size, comm.rank
    xs = inputs(n, dt, block, seed)
    out = np.full(n * block, 9, dt)
    comm.allgather(xs[r].copy(), out)
    return out.tobytes() == np.concatenate(xs).tobytes() if block else out.size == 0


def main(mode):
    if mode == "matrix":
        # every large call must split: the matrix checks split results, not the route (the
        # time rule leaves a call to TCP alone when INA on a loaded loopback is slow)
        costmodel.OFFLOAD_EXPLORE = 1
    comm = nezha.Communicator()
    n = comm.size
    wrong, runs, seed, expect = 0, 0, 0, 0
    if mode == "matrix":
        for dt in DTYPES:
            es = np.dtype(dt).itemsize
            big = (1 << 20) // (n * es) + 3   # n blocks: over 2 x NEZHA_INA_MIN_BYTES in all
            ops = list(OPS) + ([ReduceOp.AVG] if np.dtype(dt).kind == "f" else [])
            for block in (0, 1, 13, big):
                if block == big:  # offloaded in part: every op but PROD, and the allgather
                    expect += sum(op != ReduceOp.PROD for op in ops) + 1
                for op in ops:
                    seed += 1
                    runs += 1
                    wrong += not check_rs(comm, dt, op, block, seed)
                seed += 1
                runs += 1
                wrong += not check_ag(comm, dt, block, seed)
        # non-blocking, two in flight at once (they run in order on the progress thread)
        block = (1 << 20) // (n * 4) + 11
        xs, ys = inputs(n, np.float32, n * block, 501), inputs(n, np.int64, block, 502)
        out_rs, out_ag = np.zeros(block, np.float32), np.zeros(n * block, np.int64)
        reqs = [comm.ireduce_scatter(xs[comm.rank], out_rs, op=ReduceOp.MAX),
                comm.iallgather(ys[comm.rank], out_ag)]
        for q in reqs:
            q.wait()
        runs, expect = runs + 2, expect + 2
        wrong += not np.array_equal(
            out_rs, np.max(np.stack(xs), axis=0)[comm.rank * block:(comm.rank + 1) * block])
        wrong += not np.array_equal(out_ag, np.concatenate(ys))
        # a dtype INA cannot reduce: allgather still offloads (nothing is reduced)
        runs += 1
        expect += 1
        wrong += not check_ag(comm, np.uint8, (3 << 19) // n + 1, 777)
    else:
        stop = os.environ["TEST_STOP"]
        block = (3 << 20) // (4 * n) + 5
        while not stop_agreed(comm, stop):
            seed += 1
            runs += 1
            wrong += not check_rs(comm, np.float32, ReduceOp.SUM, block, seed)
            if mode == "loop_ag":
                wrong += not check_ag(comm, np.int32, block, seed)
            if comm.rank == 0:
                with open(os.environ["TEST_PROGRESS"], "w") as f:
                    f.write(str(runs))
    ina = comm._ina
    res = dict(runs=runs, wrong=wrong, expect=expect, offloads=ina.offloads if ina else -1,
               failures=ina.failures if ina else -1, kept=ina.kept if ina else -1, alive=bool(ina and ina.alive),
               kinds=sorted(ina.rate_ina) if ina else [])
    comm.close()
    report(res)


if __name__ == "__main__":
    main(sys.argv[1])
