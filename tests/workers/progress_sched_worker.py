"""One rank of tests/test_progress_sched.py (two loop rails: failover on, as in the lab):
NEZHA_PROGRESS_SCHED=fifo (or auto) makes the progress thread real-time; where that is
refused fifo warns, auto does not, and both keep the default policy. Scenarios: fifo,
refused (fifo refused), auto, auto-refused, other. Prints RESULT {json}: the checks that failed (empty
when all held) and the progress thread's policy."""
import os
import sys
import threading

import numpy as np

import nezha
from tests._result import report

N = 300_007  # int64: 2.3 MiB, striped over both rails


def _inp(r, k):
    return (np.arange(N, dtype=np.int64) % 101) * (k + 1) + r


def _tids():
    return [int(t) for t in os.listdir("/proc/self/task")]


def _policy(tid):
    try:
        return os.sched_getscheduler(tid)
    except OSError:  # the thread ended meanwhile
        return None


def main(scenario):
    if scenario.endswith("refused"):  # as for a user without CAP_SYS_NICE or RLIMIT_RTPRIO
        def refuse(*a):
            raise PermissionError(1, "Operation not permitted")
        os.sched_setscheduler = refuse
    comm = nezha.Communicator()
    bad, policy = [], None
    try:
        r, n = comm.rank, comm.size
        xs = [_inp(r, k) for k in range(3)]
        for req in [comm.iallreduce(x) for x in xs]:  # through the progress thread
            req.wait(60)
        for k, x in enumerate(xs):
            if not np.array_equal(x, sum(_inp(q, k) for q in range(n))):
                bad.append(f"iallreduce {k}: wrong result")
        prog = [t for t in threading.enumerate() if t.name == "nezha-progress"]
        policy = os.sched_getscheduler(prog[0].native_id) if prog else None
        want = os.SCHED_FIFO if scenario in ("fifo", "auto") else os.SCHED_OTHER
        if policy != want:
            bad.append(f"progress thread policy {policy}, want {want}")
        if policy == os.SCHED_FIFO and os.sched_getparam(prog[0].native_id).sched_priority != 1:
            bad.append("progress thread real-time priority is not 1")
        # with it the health thread (a pthread of the engine) at 2, above the progress
        # threads that would starve its heartbeats; nothing else of this process real-time
        rt = sorted(os.sched_getparam(t).sched_priority for t in _tids()
                    if _policy(t) == os.SCHED_FIFO)
        if rt != ([1, 2] if want == os.SCHED_FIFO else []):
            bad.append(f"real-time threads' priorities {rt}")
        if os.sched_getscheduler(0) != os.SCHED_OTHER:  # the caller's thread is left alone
            bad.append("the calling thread's policy changed")
        x = _inp(r, 5)
        comm.allreduce(x)  # blocking, in this thread, after the progress thread's runs
        if not np.array_equal(x, sum(_inp(q, 5) for q in range(n))):
            bad.append("allreduce after: wrong result")
    finally:
        report(dict(bad=bad, policy=policy))
        comm.close()


if __name__ == "__main__":
    main(sys.argv[1])
