"""One rank of tests/test_fast_path.py: blocking collectives on the same buffers again and
again (the fast path, nezha/_core/fastpath.pxi), with new contents every call, against the
numpy oracle; between groups of calls the dtype, size, op or root changes on the same
addresses (the first call of a group must take the slow path). Prints RESULT {json}:
the failures, and per call whether it took the fast path.

    fast_worker.py [numpy|torch]   torch: the buffers are torch CPU tensors on the same
                                   memory, new tensor objects every call (bfloat16 too)"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import nezha  # noqa: E402
from nezha.types import DType, ReduceOp  # noqa: E402
from tests import oracle  # noqa: E402
from tests._result import report  # noqa: E402

TORCH = sys.argv[1:] == ["torch"]
DTYPES = ((DType.INT64, DType.BFLOAT16, DType.FLOAT32, DType.UINT8) if TORCH else
          (DType.INT32, DType.FLOAT64, DType.UINT8, DType.FLOAT16))
COUNTS = (0, 1, 97)   # elements per rank (per block for allgather, reduce_scatter, alltoall)
REPS = 3              # calls per group: the first one after a change misses, the others hit
COLLS = ("allreduce", "allreduce_inplace", "reduce", "reduce_inplace", "broadcast",
         "allgather", "reduce_scatter", "alltoall")
ROOTED = ("reduce", "reduce_inplace", "broadcast")


def _ops(coll, dt):
    if coll in ("broadcast", "allgather", "alltoall"):
        return [None]
    ops = oracle.ops_for(dt)
    last = [ReduceOp.AVG] if dt.is_float else [ReduceOp.BXOR]
    if coll == "reduce_inplace":
        return last
    return ops[:1] + last if coll == "reduce" else ops[:3] + last


def _view(store, nbytes, dt):
    """The buffer a call gets: a numpy view of store, or a new torch tensor on it."""
    if not TORCH:
        return store[:nbytes].view(oracle.numpy_dtype(dt))
    import torch
    return torch.from_numpy(store[:nbytes]).view(getattr(torch, dt.name.lower()))


def _groups(n):
    """(collective, dtype, count, op, root) in the order every rank runs them."""
    for coll in COLLS:
        for dt in DTYPES:
            for count in COUNTS:
                for op in _ops(coll, dt):
                    for root in (range(n) if coll in ROOTED else [-1]):
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
    before = recv.copy()
    sendb, recvb = _view(stores[0], send.nbytes, dt), _view(stores[1], recv.nbytes, dt)
    if coll == "allreduce":
        got = comm.allreduce(sendb, recvb, op=op)
        want = oracle.reduce(dt, op, inputs)
    elif coll == "allreduce_inplace":
        got = comm.allreduce(sendb, op=op)
        want = oracle.reduce(dt, op, inputs)
    elif coll in ("reduce", "reduce_inplace"):
        inplace = coll == "reduce_inplace"
        got = comm.reduce(sendb, None if inplace else recvb, op=op, root=root)
        if r != root:  # no result; neither buffer touched
            assert got is None, coll
            np.testing.assert_array_equal(send, inputs[r])
            np.testing.assert_array_equal(recv, before)
            return send, inputs[r], vop
        assert got is (sendb if inplace else recvb), coll
        if not inplace:
            np.testing.assert_array_equal(send, inputs[r])
        return (send if inplace else recv), oracle.reduce(dt, op, inputs), vop
    elif coll == "broadcast":
        got = comm.broadcast(sendb, root=root)
        want = inputs[root]
    elif coll == "allgather":
        got = comm.allgather(sendb, recvb)
        want = np.concatenate(inputs)
    elif coll == "reduce_scatter":
        got = comm.reduce_scatter(sendb, recvb, op=op)
        want = oracle.reduce(dt, op, inputs)[r * count:(r + 1) * count]
    else:
        got = comm.alltoall(sendb, recvb)
        want = np.concatenate([x[r * count:(r + 1) * count] for x in inputs])
    if coll not in ("allreduce_inplace", "broadcast"):
        assert got is recvb, coll
        np.testing.assert_array_equal(send, inputs[r])  # the input is left as it was
        return recv, want, vop
    assert got is sendb, coll
    return send, want, vop


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
    refusals = _tensor_refusals(comm, stores, failures) if TORCH else _refusals(comm, stores)
    send = stores[0][:4 * 97].view(np.int32)
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


def _refused(comm, cases):
    """{name: [fast calls of the known call the second time, the error's class or None]}:
    what the slow path refuses is refused on buffers the fast path knows as well."""
    refusals = {}
    for name, known, call in cases:
        known()
        before = comm.stats()["fast_path_calls"]
        known()  # the fast path knows these buffers now
        hit = comm.stats()["fast_path_calls"] - before
        try:
            call()
            refusals[name] = [hit, None]
        except (TypeError, ValueError) as exc:
            refusals[name] = [hit, type(exc).__name__]
    return refusals


def _refusals(comm, stores):
    n = comm.size
    send = stores[0][:4 * 97].view(np.int32)
    recv = stores[1][:4 * 97 * n].view(np.int32)
    gather = lambda: comm.allgather(send, recv)  # noqa: E731
    return _refused(comm, (
            ("read-only recvbuf", gather, lambda: comm.allgather(send, _readonly(recv))),
            ("non-native recvbuf", gather, lambda: comm.allgather(send, recv.view(">i4"))),
            ("non-native allreduce recvbuf", lambda: comm.allreduce(send, recv[:97]),
             lambda: comm.allreduce(send, recv[:97].view(">i4"))),
            # two: with failover back-to-back broadcasts alternate a lazy tree and the
            # allreduce after one (two entries), so each known() makes the same two calls
            ("float root", lambda: [comm.broadcast(send, root=0) for _ in range(2)],
             lambda: comm.broadcast(send, root=0.0)),
            ("AVG of ints", lambda: comm.allreduce(send),
             lambda: comm.allreduce(send, op=ReduceOp.AVG))))


def _tensor_refusals(comm, stores, failures):
    """As _refusals, for tensors: a non-contiguous view of known memory (same address and
    bytes: transposed, or every second element), a tensor that requires grad and a negative
    view are refused, not run fast; a view of known memory as another type of the same size (bfloat16 ->
    int16) misses and is exact."""
    import torch
    r, n = comm.rank, comm.size
    mem = torch.from_numpy(stores[0][:4 * 96]).view(torch.float32)
    out = torch.from_numpy(stores[1][:4 * 96 * n]).view(torch.float32)
    square = lambda: mem.view(8, 12)  # noqa: E731
    refusals = _refused(comm, (
        ("non-contiguous sendbuf", lambda: comm.allreduce(square()),
         lambda: comm.allreduce(square().t())),
        ("non-contiguous recvbuf", lambda: comm.allgather(mem[:12], out[:12 * n]),
         lambda: comm.allgather(mem[:12], out[:24 * n:2])),
        ("requires grad", lambda: comm.allreduce(mem),
         lambda: comm.allreduce(mem.view(96).requires_grad_())),
        # the imaginary part of a conjugate: one float at mem[1], whose memory holds -x
        ("negative view", lambda: comm.allreduce(mem[1:2]),
         lambda: comm.allreduce(torch.view_as_complex(mem[:2].view(1, 2)).conj().imag)),
        ("float root", lambda: comm.reduce(mem, root=0), lambda: comm.reduce(mem, root=0.0)),
        ("AVG of ints", lambda: comm.allreduce(mem.view(torch.int32)),
         lambda: comm.allreduce(mem.view(torch.int32), op=ReduceOp.AVG))))
    # same memory, same bytes, another element type: bfloat16 then int16
    bits = stores[0][:2 * 61].view(np.uint16)
    hits = []
    for dt, t in ((DType.BFLOAT16, torch.bfloat16), (DType.BFLOAT16, torch.bfloat16),
                  (DType.INT16, torch.int16), (DType.INT16, torch.int16)):
        inputs = [oracle.values(dt, 61, q, ReduceOp.SUM, 7) for q in range(n)]
        bits[:] = inputs[r].view(np.uint16)
        before = comm.stats()["fast_path_calls"]
        comm.allreduce(torch.from_numpy(stores[0][:2 * 61]).view(t))
        hits.append(comm.stats()["fast_path_calls"] - before)
        want = oracle.reduce(dt, ReduceOp.SUM, inputs).view(np.uint16)
        if not np.array_equal(bits, want):
            failures.append(f"{dt.name} after bfloat16 on the same memory: {bits[:8]} "
                            f"!= {want[:8]}")
    refusals["bfloat16 then int16 on the same memory"] = hits
    return refusals


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
