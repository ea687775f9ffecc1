"""One rank of tests/test_fast_path.py: blocking collectives on the same buffers again and
again (the fast path, nezha/_core/fastpath.pxi), with new contents every call, against the
numpy oracle; between groups of calls the dtype, size, op or root changes on the same
addresses (the first call of a group must take the slow path). Prints RESULT {json}:
the failures, and per call whether it took the fast path."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import nezha  # noqa: E402
from nezha.types import DType, ReduceOp  # noqa: E402
from tests import oracle  # noqa: E402
from tests._result import report  # noqa: E402

DTYPES = (DType.INT32, DType.FLOAT64, DType.UINT8, DType.FLOAT16)
COUNTS = (0, 1, 97)   # elements per rank (per block for allgather, reduce_scatter, alltoall)
REPS = 3              # calls per group: the first one after a change misses, the others hit
COLLS = ("allreduce", "allreduce_inplace", "broadcast", "allgather", "reduce_scatter",
         "alltoall")


def _ops(coll, dt):
    if coll in ("broadcast", "allgather", "alltoall"):
        return [None]
    ops = oracle.ops_for(dt)
    return ops[:3] + ([ReduceOp.AVG] if dt.is_float else [ReduceOp.BXOR])


def _groups(n):
    """(collective, dtype, count, op, root) in the order every rank runs them."""
    for coll in COLLS:
        for dt in DTYPES:
            for count in COUNTS:
                for op in _ops(coll, dt):
                    for root in (range(n) if coll == "broadcast" else [-1]):
                        yield coll, dt, count, op, root


def _call(comm, stores, coll, dt, count, op, root, seed):
    """Run one call on the stores' memory; (what came out, what numpy says it must be)."""
    r, n = comm.rank, comm.size
    npdt = oracle.numpy_dtype(dt)
    vop = op if op is not None else ReduceOp.SUM
    send_n = count * n if coll in ("reduce_scatter", "alltoall") else count
    recv_n = {"allgather": count * n, "reduce_scatter": count, "alltoall": count * n}.get(
        coll, count)
    inputs = [oracle.values(dt, send_n, q, vop, seed) for q in range(n)]
    send = stores[0][: send_n * npdt.itemsize].view(npdt)
    recv = stores[1][: recv_n * npdt.itemsize].view(npdt)
    send[:] = inputs[r]
    recv[:] = 0x55
    if coll == "allreduce":
        got = comm.allreduce(send, recv, op=op)
        want = oracle.reduce(dt, op, inputs)
    elif coll == "allreduce_inplace":
        got = comm.allreduce(send, op=op)
        want = oracle.reduce(dt, op, inputs)
    elif coll == "broadcast":
        got = comm.broadcast(send, root=root)
        want = inputs[root]
    elif coll == "allgather":
        got = comm.allgather(send, recv)
        want = np.concatenate(inputs)
    elif coll == "reduce_scatter":
        got = comm.reduce_scatter(send, recv, op=op)
        want = oracle.reduce(dt, op, inputs)[r * count:(r + 1) * count]
    else:
        got = comm.alltoall(send, recv)
        want = np.concatenate([x[r * count:(r + 1) * count] for x in inputs])
    if coll not in ("allreduce_inplace", "broadcast"):
        assert got is recv, coll
        np.testing.assert_array_equal(send, inputs[r])  # the input is left as it was
    else:
        assert got is send, coll
    return got, want, vop


def main():
    comm = nezha.Communicator()
    r, n = comm.rank, comm.size
    big = 8 * max(COUNTS) * n
    stores = (np.zeros(big, np.uint8), np.zeros(big, np.uint8))
    failures, calls = [], []
    for g, (coll, dt, count, op, root) in enumerate(_groups(n)):
        for rep in range(REPS):
            before = comm.stats()["fast_path_calls"]
            try:
                got, want, vop = _call(comm, stores, coll, dt, count, op, root, g * REPS + rep)
                oracle.assert_result(got, want, dt, vop)
            except AssertionError as exc:
                failures.append(f"{coll} {dt.name} count {count} op {op} root {root} "
                                f"rep {rep}: {str(exc)[:300]}")
            calls.append([coll, int(dt), count, -1 if op is None else int(op), root, rep,
                          comm.stats()["fast_path_calls"] - before])
    # what the slow path refuses is refused on buffers the fast path knows as well
    send = stores[0][:4 * 97].view(np.int32)
    recv = stores[1][:4 * 97 * n].view(np.int32)
    refusals = {}
    gather = lambda: comm.allgather(send, recv)  # noqa: E731
    for name, known, call in (
            ("read-only recvbuf", gather, lambda: comm.allgather(send, _readonly(recv))),
            ("non-native recvbuf", gather, lambda: comm.allgather(send, recv.view(">i4"))),
            ("non-native allreduce recvbuf", lambda: comm.allreduce(send, recv[:97]),
             lambda: comm.allreduce(send, recv[:97].view(">i4"))),
            ("float root", lambda: comm.broadcast(send, root=0),
             lambda: comm.broadcast(send, root=0.0)),
            ("AVG of ints", lambda: comm.allreduce(send),
             lambda: comm.allreduce(send, op=ReduceOp.AVG))):
        known()
        before = comm.stats()["fast_path_calls"]
        known()  # the fast path knows these buffers now
        hit = comm.stats()["fast_path_calls"] - before
        try:
            call()
            refusals[name] = [hit, None]
        except (TypeError, ValueError) as exc:
            refusals[name] = [hit, type(exc).__name__]
    # a numpy integer root is the slow path's (type checked there): same result
    send[:] = np.arange(97) + r
    comm.broadcast(send, root=np.int64(n - 1))
    if not np.array_equal(send, np.arange(97) + n - 1):
        failures.append("broadcast with a numpy integer root")
    barriers = _barriers(comm, failures)
    st = comm.stats()
    report(dict(failures=failures[:20], nfail=len(failures), calls=calls, refusals=refusals,
                failover=st["failover"], barriers=barriers, votes=st["votes"],
                fast=st["fast_path_calls"]))
    comm.close()


def _barriers(comm, failures):
    """Barriers (the second and later take the fast path, keyed by the communicator's empty
    array): no rank leaves one before every rank has entered it. The ranks share one host,
    so CLOCK_MONOTONIC orders their events; ranks enter late by turns. Returns the fast
    calls per barrier."""
    import time
    r, n = comm.rank, comm.size
    times, hits = np.zeros(2 * 6), []
    for i in range(6):
        if r == i % n:
            time.sleep(0.02)  # this rank enters last (or alone)
        times[2 * i] = time.monotonic()
        before = comm.stats()["fast_path_calls"]
        comm.barrier()
        hits.append(comm.stats()["fast_path_calls"] - before)
        times[2 * i + 1] = time.monotonic()
    every = comm.allgather(times, np.zeros(2 * 6 * n))
    every = every.reshape(n, 6, 2)
    for i in range(6):
        if every[:, i, 1].min() < every[:, i, 0].max():
            failures.append(f"barrier {i}: a rank left before the last one entered")
    return hits


def _readonly(a):
    v = a.view()
    v.flags.writeable = False
    return v


if __name__ == "__main__":
    main()
