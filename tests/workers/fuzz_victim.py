"""The real rank of the fuzz tests (tests/test_fuzz.py): rank 0 of a 2-rank job whose rank 1
is the fuzz peer (tests/fuzzpeer.py); with "ranks" N > 2 in the case, rank "rank" (0..N-2)
of an N-rank job whose last rank is the fuzz peer (the others are victims too). It stays up
across cases: each line on stdin is one case (JSON); for each it builds a communicator, runs
one collective on a buffer with a guard region on each side, and prints one line
'CASE {json}' with the outcome: "ok", the nezha exception's class, or "UNCLEAN <type>" for
anything else; whether the guards held; seconds. A crash shows as the process ending
without a line. Before it, 'LISTEN <case> <port>' once the rendezvous listens (port 0 in the
case: the system picks one) and 'DONE <case>' once the collective has returned or raised,
before the communicator is closed (tests/fuzzpeer.py).

    fuzz_victim.py            (stdin: {"case", "port", "rails", "coll", "count", "dtype",
                               "timeout"[, "rank", "ranks"]} per line; "quit" ends it)
"""
import json
import os
import sys
import time
import traceback

import numpy as np

import nezha  # from PYTHONPATH: the tree, or the sanitizer build (make asan)
import nezha._core.engine
from nezha.bootstrap.env import EnvBootstrap

GUARD = 4096
PAT = 0xA5
SECRET = bytes.fromhex(os.environ.get("NEZHA_JOB_SECRET", "f0" * 32))


def guarded(nbytes):
    """(whole array, user view of nbytes in the middle) with GUARD pattern bytes each side."""
    whole = np.full(nbytes + 2 * GUARD, PAT, np.uint8)
    return whole, whole[GUARD:GUARD + nbytes]


def guards_ok(whole):
    return bool((whole[:GUARD] == PAT).all() and (whole[-GUARD:] == PAT).all())


def run(case):
    n, dt = case["count"], np.dtype(case["dtype"])
    boot_t = case.get("connect_timeout", 5.0)
    t0 = t_start = time.monotonic()
    t_setup = None
    comm = None
    bufs = []
    outcome, msg = "ok", ""
    try:
        rank, size = case.get("rank", 0), case.get("ranks", 2)
        boot = EnvBootstrap(rank, size, "127.0.0.1", case["port"], SECRET,
                            local_rank=rank if size > 2 else 0, timeout=boot_t)
        if boot.listener is not None:  # rank 0; port 0: the system's choice
            boot.port = boot.listener.getsockname()[1]
        print(f"LISTEN {case['case']} {boot.port}", flush=True)
        comm = nezha.Communicator(boot, timeout=case["timeout"], config={
            "RAILS": "loop", "LOOP_RAILS": str(case["rails"]), "CONNECT_TIMEOUT": str(boot_t),
            "RAIL_TIMEOUT": str(case.get("rail_timeout", 0.25)), "HEARTBEAT": "0.02"})
        t0 = time.monotonic()
        t_setup = t0 - t_start
        coll = case["coll"]
        es = dt.itemsize
        if coll == "allreduce":
            wa, a = guarded(n * es)
            bufs.append(wa)
            a.view(dt)[:] = 1
            comm.allreduce(a.view(dt))
        elif coll == "allreduce_oop":
            wa, a = guarded(n * es)
            wb, b = guarded(n * es)
            bufs += [wa, wb]
            a.view(dt)[:] = 1
            comm.allreduce(a.view(dt), b.view(dt))
        elif coll == "allgather":
            wa, a = guarded(n * es)
            wb, b = guarded(size * n * es)
            bufs += [wa, wb]
            comm.allgather(a.view(dt), b.view(dt))
        elif coll == "reduce_scatter":
            wa, a = guarded(size * n * es)
            wb, b = guarded(n * es)
            bufs += [wa, wb]
            a.view(dt)[:] = 1
            comm.reduce_scatter(a.view(dt), b.view(dt))
        elif coll == "alltoall":
            wa, a = guarded(size * n * es)
            wb, b = guarded(size * n * es)
            bufs += [wa, wb]
            comm.alltoall(a.view(dt), b.view(dt))
        elif coll == "recv":
            wa, a = guarded(n * es)
            bufs.append(wa)
            comm.recv(a.view(dt), size - 1)  # from the fuzz peer
        elif coll == "barrier":
            comm.barrier()
        else:
            raise ValueError(coll)
    except nezha.NezhaError as exc:
        outcome, msg = type(exc).__name__, str(exc)[:300]
    except Exception as exc:  # noqa: BLE001 - what the harness is here to find
        outcome, msg = f"UNCLEAN {type(exc).__name__}", traceback.format_exc()[-1500:]
    t1 = time.monotonic()
    secs = t1 - t0
    print(f"DONE {case['case']}", flush=True)  # the peer may stop now (before our close)
    try:
        if comm is not None:
            comm.close()
    except nezha.NezhaError:
        pass
    except Exception as exc:  # noqa: BLE001
        outcome, msg = f"UNCLEAN close {type(exc).__name__}", traceback.format_exc()[-1500:]
    return dict(case=case["case"], outcome=outcome, msg=msg, secs=round(secs, 3),
                setup_s=None if t_setup is None else round(t_setup, 3),
                close_s=round(time.monotonic() - t1, 3),
                guards=all(guards_ok(w) for w in bufs), engine=nezha._core.engine.__file__)


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        if line == "quit":
            break
        res = run(json.loads(line))
        print("CASE " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
