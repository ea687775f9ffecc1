"""One rank of tests/test_hostcoll.py: allreduces of every dtype and op, sizes around the
chunk, in place and not, checked against the oracle; prints RESULT {json}."""
import os
import sys
import time

import numpy as np

import nezha
from nezha.types import DType
from tests import bf16, oracle
from tests._result import report


def _wrap(storage, dt):
    """bfloat16 on the storage's bits (tests/bf16.py)."""
    if dt != DType.BFLOAT16:
        return storage
    return bf16.view(storage)


def exact(comm, sizes, reps):
    r, n = comm.rank, comm.size
    bad = []
    dtypes = [d for d in DType if d != DType.BFLOAT16 or bf16.available()]
    for dt in dtypes:
        for op in oracle.ops_for(dt):
            for count in sizes:
                inputs = [oracle.values(dt, count, k, op) for k in range(n)]
                want = oracle.reduce(dt, op, inputs)
                for inplace in (False, True):
                    a = inputs[r].copy()
                    out = a if inplace else np.full_like(a, 0x55)
                    for _ in range(reps):  # the second call takes the fast path
                        np.copyto(a, inputs[r])
                        comm.allreduce(_wrap(a, dt), None if inplace else _wrap(out, dt),
                                       op=op)
                        try:
                            oracle.assert_result(out, want, dt, op)
                        except AssertionError:
                            bad.append([dt.name, op.name, count, inplace])
    return bad


def main(scenario):
    t0 = time.monotonic()
    comm = nezha.Communicator()
    try:
        if scenario == "exact":
            chunk = int(os.environ.get("NEZHA_SHM_COLL_CHUNK", "4096"))
            sizes = [0, 1, 7, chunk // 8 - 1, chunk // 2 + 3, 3 * chunk // 4 + 1, 10007]
            bad = exact(comm, sizes, 2)
            st = comm.stats()
            report(dict(error=None, bad=bad[:10], nbad=len(bad), plan=st["last_plan"],
                        host=comm._host is not None,
                        host_calls=comm._host.calls if comm._host else 0,
                        fast=st["fast_path_calls"], engine_bytes=sum(
                            v["bytes_sent"] for v in st["rails"].values())))
        elif scenario == "straddle":
            # sizes on either side of NEZHA_SHM_COLL: rank 1 on the rings, the rest here
            comm.allreduce(np.ones(100 if comm.rank == 1 else 1000, np.float32))
            report(dict(error=None))
        elif scenario == "kill":
            for i in range(1000):
                if comm.rank == 1 and i == 3:
                    os.kill(os.getpid(), 9)
                comm.allreduce(np.ones(1 << 20, np.float32))
                t0 = time.monotonic()
        comm.close()
    except nezha.NezhaError as exc:
        report(dict(error=type(exc).__name__, msg=str(exc), secs=time.monotonic() - t0))


if __name__ == "__main__":
    main(sys.argv[1])
