"""One rank of a job of small allreduces over loop (TCP) rails + an INA service
(tests/test_ina_small.py): every result checked against the numpy oracle (tests/oracle.py);
prints RESULT {json}.

Modes:
  matrix  every INA dtype x (SUM, MIN, MAX, AVG, PROD) x sizes 0, 1, primes, the largest
          one datagram holds and one more, in place and not; which calls went whole to
          INA (the route must be the same on every rank).
  kill    small float32 SUMs in a row, half small integers (checked exactly) and half
          random fractions (rounding depends on the order of the additions: the digest of
          every result must be bitwise the same on every rank); the test kills the service
          at some collective of the job (Server.die_at), and with RANK0_DROP=i rank 0's
          client drops the result of its i-th call (a rank without a result while the
          others have it).
  faults  small SUMs while every rank's client drops, duplicates and loses results.
  fast    every INA dtype x op x sizes 0, 1, primes up to 1 KiB, in place and not, each
          called 4 times on the same buffers (new values copied in): from the 2nd call on
          they run on the fast path (FastPath._call_ina); every result checked, and how
          many calls ran on the fast path and on INA.

TEST_SAME_BUF=1: every call of `faults` and `kill` reuses one buffer per shape (the fast
path's case); the result reports the fast-path calls either way.
"""
import hashlib
import os
import sys
import time

import numpy as np

import nezha
from nezha.errors import RailSystemError
from nezha.types import DType, ReduceOp, numpy_dtype
from tests import bf16, oracle
from tests._result import report

INA_DTYPES = [DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16, DType.FLOAT64, DType.INT32,
              DType.INT64]
OPS = [ReduceOp.SUM, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.AVG, ReduceOp.PROD]
DATAGRAM = 1432  # the default largest small allreduce (costmodel.INA_SMALL_BYTES)


def wrap(a, dt):
    """bfloat16 has no numpy dtype: a view of the storage (tests/bf16.py)."""
    if dt != DType.BFLOAT16:
        return a
    return bf16.view(a)


SAME = os.environ.get("TEST_SAME_BUF") == "1"
_BUFS = {}  # (dtype, count, in place) -> the buffers every call of that shape reuses


def buffers(dt, count, inplace, same):
    """(sendbuf, recvbuf or None) as the communicator sees them: fresh, or (same) the ones
    the last call of this shape used, so the fast path keys on them."""
    key = (dt, count, inplace)
    if not same or key not in _BUFS:
        a = np.zeros(count, numpy_dtype(dt))
        got = None if inplace else np.zeros(count, numpy_dtype(dt))
        _BUFS[key] = (a, got, wrap(a, dt), None if inplace else wrap(got, dt))
    return _BUFS[key]


def fast_calls(comm):
    return comm.stats()["fast_path_calls"]


def one(comm, dt, op, count, seed, inplace, same=SAME):
    """One allreduce; (exact?, went to INA?)."""
    xs = [oracle.values(dt, count, q, op, seed) for q in range(comm.size)]
    want = oracle.reduce(dt, op, xs)
    a, got, wa, wgot = buffers(dt, count, inplace, same)
    np.copyto(a, xs[comm.rank])
    before = small(comm)
    if inplace:
        comm.allreduce(wa, op=op)
        got = a
    else:
        got.fill(0)
        comm.allreduce(wa, wgot, op=op)
        if not np.array_equal(a, xs[comm.rank]):
            return False, True
    ok = True
    try:
        oracle.assert_result(got, want, dt, op)
    except AssertionError:
        ok = False
    return ok, small(comm) > before


def small(comm):
    """Small allreduces this rank ran whole on INA (one rank: no INA rail at all)."""
    return comm._ina.small if comm._ina is not None else 0


def matrix(comm):
    wrong = runs = seed = 0
    route = []
    for dt in INA_DTYPES:
        most = DATAGRAM // dt.itemsize
        for op in OPS:
            if op == ReduceOp.AVG and not dt.is_float:
                continue
            for count in (0, 1, 2, 3, 7, 13, 31, 97, most, most + 1):
                for inplace in (True, False):
                    seed += 1
                    runs += 1
                    ok, ina = one(comm, dt, op, count, seed, inplace)
                    wrong += not ok
                    route.append(int(ina))
                    # what must go where: whole to INA exactly when 1..one datagram of a
                    # reduction the service does (PROD is routed to the TCP rails)
                    if ina != (comm.size > 1 and 0 < count <= most and op != ReduceOp.PROD):
                        wrong += 1
                        print(f"route of {dt.name} {op.name} x {count}: ina={ina}", flush=True)
    # TCP + INA in one job: large ones split between the TCP rails and the service, each
    # followed by a small one whole on the service
    for dt in (DType.FLOAT32, DType.INT64, DType.BFLOAT16):
        for inplace in (True, False):
            for count in ((1 << 20) // dt.itemsize + 3, 5):
                seed += 1
                runs += 1
                ok, ina = one(comm, dt, ReduceOp.SUM, count, seed, inplace)
                wrong += not ok
                route.append(int(ina))
    return dict(runs=runs, wrong=wrong, ina=sum(route),
                offloads=comm._ina.offloads if comm._ina is not None else 0,
                route=hashlib.sha256(bytes(route)).hexdigest()[:16])


def fast(comm):
    """Repeated calls on the same buffers: the fast path's results, checked, and its route:
    the 2nd to 4th call of every shape that goes to INA run on the fast path."""
    wrong = runs = seed = 0
    route = []
    fast0 = fast_calls(comm)
    for dt in INA_DTYPES:
        most = DATAGRAM // dt.itemsize
        for op in OPS[:4]:
            if op == ReduceOp.AVG and not dt.is_float:
                continue
            for count in sorted({min(c, most) for c in (0, 1, 2, 3, 5, 13, 31, 61, 127, 251)}):
                for inplace in (True, False):
                    for k in range(4):
                        seed += 1
                        runs += 1
                        f0 = fast_calls(comm)
                        ok, ina = one(comm, dt, op, count, seed, inplace, same=True)
                        wrong += not ok
                        route.append(int(ina) + 2 * (fast_calls(comm) > f0))
                        if ina != (comm.size > 1 and count > 0):
                            wrong += 1
                            print(f"route of {dt.name} {op.name} x {count}: ina={ina}",
                                  flush=True)
    return dict(runs=runs, wrong=wrong, ina=sum(r & 1 for r in route),
                fast_ina=sum(r == 3 for r in route), fast=fast_calls(comm) - fast0,
                route=hashlib.sha256(bytes(route)).hexdigest()[:16])


def kill(comm):
    iters = int(os.environ["TEST_ITERS"])
    drop = int(os.environ.get("RANK0_DROP", "0")) if comm.rank == 0 else 0
    client = comm._ina.client
    if client.stats()["collectives"] != 0:  # the test's die_at counts from the first call
        raise SystemExit(f"rank {comm.rank}: INA collectives before the loop")
    pause = float(os.environ.get("TEST_PAUSE", "0"))
    wrong, digest, count = 0, hashlib.sha256(), 200
    a = np.empty(count, np.float32)
    for i in range(1, iters + 1):
        time.sleep(pause)  # gives the test time to restart the service
        rng = np.random.default_rng([i, comm.rank])
        new = np.concatenate([rng.integers(-4, 5, count // 2).astype(np.float32),
                              rng.random(count - count // 2, np.float32)])
        if SAME:
            np.copyto(a, new)
        else:
            a = new
        ints = sum(np.random.default_rng([i, q]).integers(-4, 5, count // 2).astype(np.float32)
                   for q in range(comm.size))
        if drop and i == drop:
            client.set_faults(drop_result_every=1)  # this rank gets no result of call i
        try:
            comm.allreduce(a)
        except RailSystemError as e:  # without failover: the end of the job, said clearly
            res = dict(runs=i, wrong=wrong, error=str(e), fast=fast_calls(comm))
            comm.close()
            return res
        if drop and i == drop:
            client.set_faults()
        wrong += not np.array_equal(a[:count // 2], ints)
        digest.update(a.tobytes())
    ina = comm._ina
    return dict(runs=iters, wrong=wrong, digest=digest.hexdigest(), small=ina.small,
                small_failures=ina.small_failures, alive=bool(ina.alive),
                events=[e["event"] for e in comm._events], fast=fast_calls(comm))


def faults(comm):
    """Every rank drops, duplicates, and loses results of its datagrams (the client's fault
    hook, each rank on its own beat): SUMs of small integers, checked exactly; a datagram
    counted twice would show."""
    client = comm._ina.client
    client.set_faults(drop_every=3 + comm.rank, dup_every=2, drop_result_every=4 + comm.rank)
    client.set_rto(1.0, 20.0)  # the loopback's round trip is far below the default 5 ms
    wrong = runs = 0
    before = small(comm)
    for i in range(60):
        for dt in (DType.FLOAT32, DType.INT64, DType.FLOAT16):
            j = i % 4 if SAME else i  # SAME: 4 shapes per dtype, each called 15 times
            count = 1 + (j * 37) % (DATAGRAM // dt.itemsize)
            ok, ina = one(comm, dt, ReduceOp.SUM, count, 1000 + i, i % 2 == 0)
            runs += 1
            wrong += not (ok and ina)
    st = client.stats()
    client.set_faults()
    return dict(runs=runs, wrong=wrong, ina=small(comm) - before,
                dropped=st["fault_dropped"], duplicated=st["fault_duplicated"],
                results_dropped=st["fault_results_dropped"], retrans=st["retrans"],
                fast=fast_calls(comm))


def main(mode):
    comm = nezha.Communicator()
    res = {"matrix": matrix, "kill": kill, "faults": faults, "fast": fast}[mode](comm)
    comm.close()
    report(res)


if __name__ == "__main__":
    main(sys.argv[1])
