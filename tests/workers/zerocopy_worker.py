"""One rank of tests/test_zerocopy.py: collectives with zero-copy sends (NEZHA_ZEROCOPY=on,
NEZHA_ZEROCOPY_MIN from the environment) against the numpy oracle, at sizes around the
threshold and well above it, then back-to-back collectives that refill the same buffers
at once (a send still read by the kernel after the call returned would carry the next
call's bytes). After every call no zero-copy send may be left in flight. Prints RESULT
{json}: the failures and the zero-copy counters. Argument "off": one allreduce without
zero-copy."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import nezha  # noqa: E402
from nezha.types import DType, ReduceOp  # noqa: E402
from tests import oracle  # noqa: E402
from tests._result import report  # noqa: E402

COLLS = ("allreduce", "allreduce_inplace", "reduce", "broadcast", "allgather",
         "reduce_scatter", "alltoall")


def _sizes(thr):
    """Bytes per rank buffer: 0, tiny, around the threshold, a prime-ish count of elements
    above it, and large (several segments, many zero-copy sends per channel)."""
    return [0, 4, thr - 4, thr, thr + 4, 3 * thr + 12, (1 << 20) + 28, 4 << 20]


def _call(comm, coll, dt, count, seed, send_store, recv_store):
    r, n = comm.rank, comm.size
    npdt = oracle.numpy_dtype(dt)
    op = ReduceOp.SUM
    send_n = count * n if coll in ("reduce_scatter", "alltoall") else count
    recv_n = {"allgather": count * n, "reduce_scatter": count, "alltoall": count * n}.get(
        coll, count)
    inputs = [oracle.values(dt, send_n, q, op, seed) for q in range(n)]
    send = send_store[: send_n * npdt.itemsize].view(npdt)
    recv = recv_store[: recv_n * npdt.itemsize].view(npdt)
    send[:] = inputs[r]
    recv[:] = 0
    root = seed % n
    if coll == "allreduce":
        comm.allreduce(send, recv)
        return recv, oracle.reduce(dt, op, inputs)
    if coll == "allreduce_inplace":
        comm.allreduce(send)
        return send, oracle.reduce(dt, op, inputs)
    if coll == "reduce":
        comm.reduce(send, recv, root=root)
        return (recv, oracle.reduce(dt, op, inputs)) if r == root else (send, inputs[r])
    if coll == "broadcast":
        comm.broadcast(send, root=root)
        return send, inputs[root]
    if coll == "allgather":
        comm.allgather(send, recv)
        return recv, np.concatenate(inputs)
    if coll == "reduce_scatter":
        comm.reduce_scatter(send, recv)
        return recv, oracle.reduce(dt, op, inputs)[r * count:(r + 1) * count]
    comm.alltoall(send, recv)
    return recv, np.concatenate([x[r * count:(r + 1) * count] for x in inputs])


def _in_flight(comm):
    z = comm.stats()["zerocopy"]
    return 0 if z is None else z["in_flight"]


def off():
    """NEZHA_ZEROCOPY unset: a large allreduce copies, and there are no counters."""
    comm = nezha.Communicator()
    inputs = [oracle.values(DType.INT32, 1 << 18, q, ReduceOp.SUM, 7) for q in range(comm.size)]
    buf = inputs[comm.rank].copy()
    comm.allreduce(buf)
    ok = bool(np.array_equal(buf, oracle.reduce(DType.INT32, ReduceOp.SUM, inputs)))
    st = comm.stats()
    comm.close()
    report(dict(failures=[] if ok else ["allreduce"], nfail=int(not ok), zerocopy=st["zerocopy"]))


def main():
    comm = nezha.Communicator()
    n = comm.size
    thr = int(os.environ["NEZHA_ZEROCOPY_MIN"])
    sizes = _sizes(thr)
    big = max(sizes) * n + 64
    send_store, recv_store = np.zeros(big, np.uint8), np.zeros(big, np.uint8)
    failures, seed = [], 0
    for coll in COLLS:
        for dt in (DType.INT32, DType.FLOAT32):
            for nbytes in sizes:
                count = nbytes // dt.itemsize
                if coll in ("allgather", "reduce_scatter", "alltoall"):
                    count = max(0, count // n)  # per-rank blocks: the whole buffer ~ nbytes
                for rep in range(2):
                    seed += 1
                    try:
                        got, want = _call(comm, coll, dt, count, seed, send_store, recv_store)
                        oracle.assert_result(got, want, dt, ReduceOp.SUM)
                    except AssertionError as exc:
                        failures.append(f"{coll} {dt.name} {nbytes} B rep {rep}: "
                                        f"{str(exc)[:300]}")
                    left = _in_flight(comm)
                    if left:
                        failures.append(f"{coll} {dt.name} {nbytes} B rep {rep}: {left} "
                                        "zero-copy sends still in flight after the call")
    # back to back, no barrier: each call refills the buffer the previous one sent from
    buf = np.zeros((4 << 20) // 4, np.int32)
    for k in range(30):
        inputs = [oracle.values(DType.INT32, buf.size, q, ReduceOp.SUM, 1000 + k)
                  for q in range(n)]
        buf[:] = inputs[comm.rank]
        comm.allreduce(buf)
        if not np.array_equal(buf, oracle.reduce(DType.INT32, ReduceOp.SUM, inputs)):
            failures.append(f"back-to-back allreduce {k}: wrong result")
    st = comm.stats()
    comm.close()
    report(dict(failures=failures[:20], nfail=len(failures), zerocopy=st["zerocopy"]))


if __name__ == "__main__":
    off() if sys.argv[1:] == ["off"] else main()
