"""One rank of an error-path scenario (see tests/test_errors.py); prints RESULT {json}."""
import os
import signal
import sys
import time

import numpy as np

import nezha
from tests._result import report as _report


def report(**kw):
    _report(kw)


def main(scenario):
    t0 = time.monotonic()
    try:
        comm = nezha.Communicator()
    except nezha.NezhaError as exc:
        report(stage="init", error=type(exc).__name__, msg=str(exc), secs=time.monotonic() - t0)
        return
    r, n = comm.rank, comm.size
    try:
        if scenario == "ok":
            a = np.arange(1001, dtype=np.int64) * (r + 1)
            comm.allreduce(a)
            assert (a == np.arange(1001) * (n * (n + 1) // 2)).all()
            b = np.zeros(7, np.float32) if r else np.arange(7, dtype=np.float32)
            comm.broadcast(b)
            assert (b == np.arange(7)).all()
            report(stage="done", error=None, local_rank=comm.local_rank, size=n, pid=os.getpid(),
                   transports=[comm._mesh.transport(p) for p in range(n) if p != r])
            comm.close()
            return
        t0 = time.monotonic()
        if scenario == "count_mismatch":
            comm.allreduce(np.ones(100 + (r == 1), np.float32))
        elif scenario == "op_mismatch":
            comm.allreduce(np.ones(100, np.int32), op=nezha.MAX if r == 0 else nezha.SUM)
        elif scenario == "dtype_mismatch":
            comm.allreduce(np.ones(100, np.float64 if r == n - 1 else np.float32))
        elif scenario == "coll_mismatch":
            if r == 2:
                comm.broadcast(np.ones(100, np.float32))
            else:
                comm.allreduce(np.ones(100, np.float32))
        elif scenario == "kill":
            for i in range(1000):
                if r == 2 and i == 3:
                    os.kill(os.getpid(), signal.SIGKILL)
                comm.allreduce(np.ones(200000, np.float32))
                t0 = time.monotonic()
        elif scenario == "hang_fast":
            a = np.ones(1000, np.float32)
            for _ in range(3):  # the same buffer again: the fast path (fastpath.pxi)
                comm.allreduce(a)
            comm.timeout = 2.0  # lowered after those calls: the fast path must see it too
            t0 = time.monotonic()
            if r == 1:
                time.sleep(8)
            comm.allreduce(a)
        elif scenario == "shm_corrupt":
            a = np.ones(4096, np.float32)
            comm.allreduce(a)  # connected and used once
            if r == 0:
                comm._mesh.shm.eps[(1, 0)].corrupt()  # what rank 1 reads from rank 0
            for _ in range(3):
                comm.allreduce(np.ones(1 << 16, np.float32))
        elif scenario == "shm_kill":
            # rank 1 dies in the middle of a large allreduce carried over shared memory
            report(stage="running", pid=os.getpid(), transports=[
                comm._mesh.transport(p) for p in range(n) if p != r])
            for i in range(1000):
                if r == 1 and i == 2:
                    os.kill(os.getpid(), signal.SIGKILL)
                comm.allreduce(np.ones(1 << 20, np.float32))
                t0 = time.monotonic()
        elif scenario == "hang":
            if r == 1:
                time.sleep(8)
            comm.allreduce(np.ones(1000, np.float32))
        # a rank that saw no error itself learns of the others' at its next operation
        comm.barrier()
        report(stage="done", error=None)
    except nezha.NezhaError as exc:
        report(stage="op", error=type(exc).__name__, msg=str(exc), secs=time.monotonic() - t0)


if __name__ == "__main__":
    main(sys.argv[1])
