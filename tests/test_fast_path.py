"""The fast path of repeated blocking collectives (nezha/_core/fastpath.pxi): allreduce and
reduce (in place or not), broadcast, allgather, reduce_scatter and alltoall on the same
buffers, numpy arrays and torch CPU tensors (new tensor objects on the same memory every
call; bfloat16 and int64 among the dtypes), exact against numpy with new contents every
call, for 1 to 5 ranks over tcp (one rail), shm and the loop rails (two rails: failover on,
small collectives lazy); a change of dtype, size, op or root on the same addresses takes
the slow path (tests/workers/fast_worker.py). Faults during fast-path collectives:
tests/test_loop_faults.py (the "small" worker)."""
import importlib.util
import os

import pytest

from tests.spawn import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "workers", "fast_worker.py")

# loop: failover on; a rail silent for the default 60 ms on a loaded 2-core machine would
# vote and re-plan (dropping the entries), which the exact hit counts below do not allow
TRANSPORTS = {"tcp": {"NEZHA_RAILS": "tcp"}, "shm": {},
              "loop": {"NEZHA_RAILS": "loop", "NEZHA_LOOP_RAILS": "2",
                       "NEZHA_RAIL_TIMEOUT": "5"}}
CASES = [(1, "shm")] + [(n, t) for n in (2, 3, 4, 5) for t in sorted(TRANSPORTS)]
NUMPY_REFUSALS = {"read-only recvbuf": [1, "ValueError"], "non-native recvbuf": [1, "TypeError"],
                  "non-native allreduce recvbuf": [1, "TypeError"],
                  "float root": [2, "ValueError"], "AVG of ints": [1, "ValueError"]}
TORCH_REFUSALS = {"non-contiguous sendbuf": [1, "ValueError"],
                  "non-contiguous recvbuf": [1, "ValueError"],
                  "requires grad": [1, "TypeError"], "negative view": [1, "ValueError"],
                  "float root": [1, "ValueError"],
                  "AVG of ints": [1, "ValueError"],
                  # same memory and bytes, another type: the first call of each type misses
                  "bfloat16 then int16 on the same memory": [0, 1, 0, 1]}
NO_TORCH = importlib.util.find_spec("torch") is None


@pytest.mark.parametrize("n,transport", CASES, ids=[f"np{n}-{t}" for n, t in CASES])
def test_repeated_collectives_take_the_fast_path_and_stay_exact(n, transport):
    _check(n, transport, "numpy")


# torch tensors differ from numpy arrays in how a call finds its buffers (a new tensor object
# on the same memory every call), not in what the rank count changes (plans, entries: 4 and
# 5 ranks above); up to 3 ranks here, as 5 ranks importing torch cost ~15 s of CPU per case
TORCH_CASES = [(n, t) for n, t in CASES if n <= 3]


@pytest.mark.skipif(NO_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("n,transport", TORCH_CASES, ids=[f"np{n}-{t}" for n, t in TORCH_CASES])
def test_repeated_tensor_collectives_take_the_fast_path_and_stay_exact(n, transport):
    _check(n, transport, "torch")


def _check(n, transport, kind):
    env = dict(NEZHA_TIMEOUT="60", NEZHA_PROBE="off", OMP_NUM_THREADS="1",
               **TRANSPORTS[transport])
    results = spawn(n, kind, env=env, timeout=300, worker=WORKER, unset=("NEZHA_ALGO",))
    for code, res, out in results:
        assert code == 0 and res, out[-3000:]
        assert res["nfail"] == 0, res["failures"]
    res = results[0][1]
    assert res["failover"] == (transport == "loop" and n > 1)
    seen = set()
    for coll, dt, count, op, root, rep, hit in res["calls"]:
        # with failover a collective of no elements votes (failover.lazy_ok): never fast
        fast_ok = not (res["failover"] and count == 0)
        if rep == 0:  # dtype, size, op or root changed on the same addresses
            assert hit == 0, (coll, dt, count, op, root)
        elif rep == 1 and coll == "broadcast" and res["failover"]:
            # back to back a small broadcast is a lazy tree, then the allreduce that
            # follows one (Communicator._broadcast): each plan's first call may miss
            assert hit in (0, 1), (coll, dt, count, op, root, rep)
        else:
            assert hit == fast_ok, (coll, dt, count, op, root, rep)
        seen.add(coll)
    assert len(seen) == 8, seen
    # the slow path's refusals stand on buffers the fast path knows
    want = TORCH_REFUSALS if kind == "torch" else NUMPY_REFUSALS
    assert res["refusals"] == want, res["refusals"]
    # barriers: the first may miss (if no barrier ran before), every later one is fast
    # unless failover is on and a vote intervened; ordering is checked in the worker
    for _, r, _ in results:
        assert r["barriers"][1:] == [1] * 5, r["barriers"]
    # every rank counted the same calls as fast (the wire is the same either way)
    assert len({r["fast"] for _, r, _ in results}) == 1, [r["fast"] for _, r, _ in results]


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_entries_do_not_keep_the_callers_buffers(kind):
    """What the fast path keeps of a call holds addresses, not the caller's buffers: once
    the caller drops them they are freed (one rank, in process; every collective with a
    buffer, reduce in place and into recvbuf)."""
    import gc
    import weakref

    import numpy as np

    import nezha
    if kind == "torch":
        torch = pytest.importorskip("torch")
        make = lambda n: torch.arange(n, dtype=torch.int64)  # noqa: E731
    else:
        make = lambda n: np.arange(n, dtype=np.int64)  # noqa: E731
    comm = nezha.Communicator(rails="lo", config={"PROBE": "off"})
    try:
        calls = (("allreduce", lambda a, b: comm.allreduce(a, b)),
                 ("allreduce in place", lambda a, b: comm.allreduce(a)),
                 ("reduce", lambda a, b: comm.reduce(a, b, root=0)),
                 ("reduce in place", lambda a, b: comm.reduce(a, root=0)),
                 ("broadcast", lambda a, b: comm.broadcast(a, root=0)),
                 ("allgather", lambda a, b: comm.allgather(a, b)),
                 ("reduce_scatter", lambda a, b: comm.reduce_scatter(a, b)),
                 ("alltoall", lambda a, b: comm.alltoall(a, b)))
        for name, call in calls:
            a, b = make(13), make(13)
            before = comm.stats()["fast_path_calls"]
            for _ in range(3):
                call(a, b)
            assert comm.stats()["fast_path_calls"] - before == 2, name
            refs = [weakref.ref(a), weakref.ref(b)]
            del a, b
            gc.collect()
            assert [r() for r in refs] == [None, None], name
    finally:
        comm.close()
