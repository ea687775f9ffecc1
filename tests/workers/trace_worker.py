"""One rank of tests/test_op_trace.py: hierarchical allreduces with the engine's op trace
on (Engine.trace_ops), exact against numpy, and what the trace recorded; prints RESULT."""
import numpy as np

import nezha
from tests._result import report


def main():
    comm = nezha.Communicator()
    r, n, eng = comm.rank, comm.size, comm._engine
    doc = {"wrong": [], "traces": {}, "error": None, "hosts": comm.planner.hosts}
    try:
        assert eng.op_times() == {"t0": 0, "ops": []}  # off: nothing recorded
        eng.trace_ops(50, 1 << 20)
        for cnt in (0, 1, 7, 100003):  # 100003 int64 over 64 KiB chunks: many ops
            base = (np.arange(cnt) % 97).astype(np.int64)
            a = base + r
            comm.allreduce(a)
            if not np.array_equal(a, base * n + n * (n - 1) // 2):
                doc["wrong"].append(cnt)
            doc["traces"][str(cnt)] = eng.op_times()
        eng.trace_ops(0, 0)  # off again
        comm.allreduce(np.ones(100003, np.int64))
        doc["after_off"] = eng.op_times()
    except Exception as e:  # reported, not raised: the test names it
        doc["error"] = repr(e)
    comm.close()
    report(doc)


if __name__ == "__main__":
    main()
