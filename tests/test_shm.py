"""The shm transport: ranks of one host exchange through shared memory that no other job
can open and that nothing leaves behind (close, SIGKILL); corruption is an error."""
import os

import pytest

import nezha
from nezha.config import Config
from nezha.errors import InvalidUsageError
from nezha.transports import shm
from tests.spawn import spawn

pytestmark = pytest.mark.skipif(not os.path.isdir(shm.SHM_DIR), reason="no /dev/shm here")


def _result(results, r):
    rc, res, out = results[r]
    assert res is not None, out
    return res


def test_same_host_uses_shm_and_leaves_nothing():
    before = set(shm.leftovers())
    results = spawn(4, "ok")
    pids = []
    for r in range(4):
        res = _result(results, r)
        assert res["error"] is None, results[r][2]
        assert res["transports"] == ["shm"] * 3
        pids.append(res["pid"])
    assert set(shm.leftovers()) - before == set()


def test_host_id_splits_hosts():
    # ranks 0,1 on one "host", 2,3 on another: shm within, tcp across
    results = spawn(4, "ok", rank_env={r: {"NEZHA_HOST_ID": f"h{r // 2}"} for r in range(4)})
    want = {0: ["shm", "tcp", "tcp"], 1: ["shm", "tcp", "tcp"],
            2: ["tcp", "tcp", "shm"], 3: ["tcp", "tcp", "shm"]}
    for r in range(4):
        res = _result(results, r)
        assert res["error"] is None and res["transports"] == want[r], results[r][2]


def test_shm_can_be_turned_off():
    results = spawn(3, "ok", env={"NEZHA_RAILS": "tcp"})
    for r in range(3):
        assert _result(results, r)["transports"] == ["tcp", "tcp"]


def test_killed_rank_is_a_peer_error_and_leaves_nothing():
    before = set(shm.leftovers())
    results = spawn(3, "shm_kill", env={"NEZHA_TIMEOUT": "30"})
    for r in (0, 2):
        rc, res, out = results[r]
        assert res is not None and res["stage"] == "op", out
        assert res["error"] == "PeerError", out
        assert "rank 1" in res["msg"], out
        assert res["secs"] < 20, out  # an error, not the 30 s timeout
    assert results[1][0] == -9
    assert set(shm.leftovers()) - before == set()


def test_corrupted_ring_is_an_error_naming_the_peer():
    results = spawn(3, "shm_corrupt", env={"NEZHA_TIMEOUT": "20"})
    for r in range(3):
        rc, res, out = results[r]
        assert rc == 0 and res is not None and res["stage"] == "op", out  # no crash
        assert res["error"] in ("RailSystemError", "PeerUnreachable", "PeerError",
                                "NezhaError", "CollectiveMismatch"), out
    msg = _result(results, 1)["msg"]
    assert "rank 0" in msg, msg


def test_sweep_removes_names_of_dead_creators(tmp_path):
    uid = os.geteuid()
    dead = 2 ** 22 + 12345  # above pid_max's default: never a live process
    mine = os.getpid()
    for name in (f"nezha-{uid}-{dead}-abc-0-1", f"nezha-{uid}-{dead}-abc-0-1.b0",
                 f"nezha-{uid}-{mine}-abc-0-1", f"nezha-{uid + 1}-{dead}-x-0-1", "other"):
        (tmp_path / name).write_bytes(b"")
    gone = shm.sweep(str(tmp_path))
    assert sorted(gone) == [f"nezha-{uid}-{dead}-abc-0-1", f"nezha-{uid}-{dead}-abc-0-1.b0"]
    assert sorted(os.listdir(tmp_path)) == sorted(
        [f"nezha-{uid}-{mine}-abc-0-1", f"nezha-{uid + 1}-{dead}-x-0-1", "other"])


def test_segment_of_another_job_is_refused():
    from nezha._core.engine import ShmEndpoint
    base = f"nezha-{os.geteuid()}-{os.getpid()}-t{os.urandom(3).hex()}-0-1"
    bells = (f"{shm.SHM_DIR}/{base}.b0", f"{shm.SHM_DIR}/{base}.b1")
    ep = ShmEndpoint.create("/" + base, *bells, 1 << 16, b"a" * 32)
    try:
        with pytest.raises(PermissionError, match="not this job's"):
            ShmEndpoint.open("/" + base, *bells, 1 << 16, b"b" * 32)  # another secret
    finally:
        ep.close()
    assert not [n for n in shm.leftovers(os.getpid()) if base in n]


def test_unknown_rail_kind_names_the_kinds():
    with pytest.raises(InvalidUsageError) as exc:
        Config.load({"RAILS": "tcp,carrier-pigeon"})
    for kind in ("tcp", "shm"):
        assert kind in str(exc.value)


def test_tcp_is_required_for_now():
    with pytest.raises(InvalidUsageError, match="tcp"):
        nezha.Communicator(config={"RAILS": "shm"})


def test_dev_shm_too_small_falls_back_to_tcp():
    # rings larger than /dev/shm can hold: creation fails (ENOSPC, not a SIGBUS later) on
    # every creating rank, every rank falls back to tcp alike, and no name is left behind
    before = set(shm.leftovers())
    results = spawn(3, "ok", env={"NEZHA_SHM_BUFFER": "1T", "NEZHA_DEBUG": "WARN"})
    for r in range(3):
        res = _result(results, r)
        assert res["error"] is None and res["transports"] == ["tcp", "tcp"], results[r][2]
    assert "shared memory unusable" in results[0][2] + results[1][2]
    assert set(shm.leftovers()) - before == set()
