"""One rank of tests/test_bcast_tree.py::test_lazy_broadcasts_keep_no_copy_of_the_zeros:
lazy broadcasts (a tree, the allreduce of zeros after one, a hierarchical one where the
layout has several ranks a host) of sizes up to 256 KiB, each twice on the same buffer
(the second through the fast path), every root. After each: the result exact against
numpy, and what the rank keeps as the call's input (RunState.pending) reported: on a rank
other than the root, whether it is the library's zeros themselves (no copy: the bytes a
rank not the root adds are zeros, never written) and zero; on the root a copy of its input
apart from its buffer."""
import sys

import numpy as np

import nezha
from nezha.buffers import address
from nezha.planner import ALGO_NAMES
from tests._result import report

SIZES = [1, 13, 1021, 4096, 8209, 65536, 262139, 262144]


def data(nbytes, root, k):
    return ((np.arange(nbytes, dtype=np.int64) * 31 + root * 7 + k) % 251 + 1).astype(np.uint8)


def main():
    comm = nezha.Communicator()
    r, n = comm.rank, comm.size
    wrong, kept, k = [], [], 0
    for nbytes in SIZES:
        for root in range(n):
            buf = np.empty(nbytes, np.uint8)
            for rep in range(3):  # the first planned, then the fast path; back to back
                want = data(nbytes, root, k)
                k += 1
                buf[:] = want if r == root else 0
                f0 = comm.stats()["fast_path_calls"]
                comm.broadcast(buf, root=root)
                fast = comm.stats()["fast_path_calls"] > f0
                algo = ALGO_NAMES[comm._st.last_plan.algo]
                p = comm._st.pending
                snap = None if p is None or p[0] != comm._st.ncoll - 1 else p[4]
                if r != root and not np.array_equal(buf, want):
                    wrong.append((nbytes, root, rep, algo))
                if snap is None:
                    kept.append((nbytes, root, rep, algo, fast, "none"))
                    continue
                z = comm._spares._named.get("zeros")
                is_zeros = z is not None and address(snap) == address(z)
                kind = ("zeros" if is_zeros else "copy") if r != root else (
                    "copy" if address(snap) != address(buf) and np.array_equal(
                        snap.view(np.uint8)[:nbytes], want) else "bad")
                if r != root and snap.view(np.uint8)[:nbytes].any():
                    kind = "nonzero"
                kept.append((nbytes, root, rep, algo, fast, kind))
                if r == root:
                    buf[:] = 0  # the caller's again: a re-run must send the kept copy
            comm.barrier()
    report(dict(wrong=wrong, kept=kept, rank=r))
    comm.close()


if __name__ == "__main__":
    sys.exit(main())
