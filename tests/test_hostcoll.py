"""The host area (include/nezha/nezha_hostcoll.h): allreduces of ranks that all share one
host, reduced straight out of one shared segment. Exact against the oracle over dtypes, ops,
sizes around the chunk and rank counts; the fast path; disagreements, a straddled
threshold and a killed rank are errors on every rank, and nothing is left in /dev/shm."""
import os

import numpy as np
import pytest

from nezha._core.engine import HostArea
from nezha.errors import InvalidUsageError
from nezha.transports import hostcoll, shm
from nezha.types import DType, ReduceOp
from tests.spawn import spawn

pytestmark = pytest.mark.skipif(not os.path.isdir(shm.SHM_DIR), reason="no /dev/shm here")

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers", "hostcoll_worker.py")


def _spawn(n, scenario, env, timeout):
    return spawn(n, scenario, env=env, timeout=timeout, worker=WORKER)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_exact_over_dtypes_ops_sizes_and_the_fast_path(n):
    """4 KiB slots, so that the sizes (0, 1, 7, primes, not multiples of the rank count or of
    the slot) take one round, several, and a part of one; every call is made twice on the
    same buffers, so the second takes the fast path."""
    before = set(shm.leftovers())
    results = _spawn(n, "exact", {"NEZHA_SHM_COLL_CHUNK": "4096"}, 300)
    for rc, res, out in results:
        assert rc == 0 and res is not None and res["error"] is None, out[-3000:]
        assert res["nbad"] == 0, res["bad"]
        assert res["host"] and res["host_calls"] > 0, res
        assert res["plan"].startswith("Plan(host"), res["plan"]
        assert res["fast"] > 0, res          # repeated calls ran on the fast path
        assert res["engine_bytes"] == 0, res  # nothing went over the rings or tcp
    assert set(shm.leftovers()) - before == set()


def test_off_with_a_forced_algorithm_or_inf():
    for env in ({"NEZHA_ALGO": "ring"}, {"NEZHA_SHM_COLL": "inf"}):
        results = _spawn(2, "exact", dict(env, NEZHA_SHM_COLL_CHUNK="4096"), 300)
        for rc, res, out in results:
            assert rc == 0 and res is not None and res["error"] is None, out[-3000:]
            assert res["nbad"] == 0 and not res["host"] and res["engine_bytes"] > 0, res


def test_a_straddled_threshold_is_a_mismatch_not_a_timeout():
    """Rank 1's allreduce is below NEZHA_SHM_COLL (the rings), the others' above (the
    area): the rings announce what they run, so the ranks in the area see the difference at
    once, and their aborts reach rank 1."""
    results = _spawn(3, "straddle", {"NEZHA_SHM_COLL": "1k", "NEZHA_TIMEOUT": "30"}, 120)
    for rc, res, out in results:
        assert rc == 0 and res is not None, out
        assert res["error"] == "CollectiveMismatch", out
        assert res["secs"] < 15, res  # not the 30 s timeout
    detail = " ".join(res["msg"] for _, res, _ in results)
    assert "count" in detail and "rank 1" in detail, detail


def test_killed_rank_is_a_peer_error_and_leaves_nothing():
    before = set(shm.leftovers())
    results = _spawn(4, "kill", {"NEZHA_TIMEOUT": "30"}, 120)
    assert results[1][0] == -9
    for r in (0, 2, 3):
        rc, res, out = results[r]
        assert res is not None and res["error"] == "PeerError", out
        assert "rank 1" in res["msg"], res["msg"]
        assert res["secs"] < 10, res  # an error at once, not the 30 s timeout
    assert set(shm.leftovers()) - before == set()


def test_segment_of_another_job_is_refused():
    name = f"/nezha-{os.geteuid()}-{os.getpid()}-t{os.urandom(3).hex()}-host"
    mine = HostArea.map(name, 0, 2, 4096, b"a" * 32)
    try:
        with pytest.raises(PermissionError, match="not this job's"):
            HostArea.map(name, 1, 2, 4096, b"b" * 32)  # another job's secret
        with pytest.raises(PermissionError):
            HostArea.map(name, 1, 3, 4096, b"a" * 32)  # another layout
        other = HostArea.map(name, 1, 2, 4096, b"a" * 32)
        other.close()
    finally:
        mine.close()
        os.unlink(f"{shm.SHM_DIR}{name}")
    assert not [n for n in shm.leftovers(os.getpid()) if name[1:] in n]


@pytest.mark.parametrize("op, named", [(ReduceOp.BAND, "BAND"), (99, "op 99")])
def test_an_op_the_area_cannot_run_is_invalid_usage_naming_op_and_dtype(op, named):
    """The communicator refuses these before a call reaches the area; one that gets there
    anyway is refused by its kernels before anything is published: the caller's error,
    named (not "error -5"), and nothing waited for."""
    name = f"/nezha-{os.geteuid()}-{os.getpid()}-t{os.urandom(3).hex()}-host"
    area = HostArea.map(name, 0, 2, 4096, b"a" * 32)
    try:
        a = np.ones(1000, np.float32)
        with pytest.raises(InvalidUsageError, match=rf"\b{named} is not defined for float32"):
            hostcoll.HostColl(area, 0, 0).allreduce(a, a, DType.FLOAT32, op, 0, 2, 30.0)
    finally:
        area.close()
        os.unlink(f"{shm.SHM_DIR}{name}")
