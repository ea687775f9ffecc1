"""Error paths: bad arguments fail before anything is sent; disagreements, dead peers and
strangers become clear errors on every rank, never a hang or a wrong result."""
import array
import socket
import threading

import numpy as np
import pytest

import nezha
from nezha.bootstrap import auth
from nezha.rails.tcp.connect import establish
from tests.spawn import spawn


@pytest.fixture(scope="module")
def solo():
    c = nezha.Communicator(rails="lo")
    yield c
    c.close()


# ---- argument checks (one rank is enough: they fire before any byte moves) --------------

def test_readonly_buffer(solo):
    a = np.ones(10, np.float32)
    a.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        solo.allreduce(a)
    with pytest.raises(ValueError, match="read-only"):
        solo.allreduce(bytes(8))
    out = np.zeros(10, np.float32)
    solo.allreduce(a, out)  # a read-only input is fine out of place
    assert (out == 1).all()


def test_noncontiguous_buffer(solo):
    a = np.ones((10, 10), np.float32)[:, 1]
    with pytest.raises(ValueError, match="not contiguous"):
        solo.allreduce(a)
    with pytest.raises(ValueError, match="not contiguous"):
        solo.allreduce(memoryview(np.ones(10, np.int32))[::2])


def test_bad_arguments(solo):
    with pytest.raises(TypeError, match="unsupported dtype"):
        solo.allreduce(np.ones(3, np.complex64))
    with pytest.raises(TypeError, match="not a buffer"):
        solo.allreduce([1, 2, 3])
    with pytest.raises(ValueError, match="integer types only"):
        solo.allreduce(np.ones(3, np.float32), op=nezha.BXOR)
    with pytest.raises(ValueError, match="floating types only"):
        solo.allreduce(np.ones(3, np.int32), op=nezha.AVG)
    with pytest.raises(ValueError, match="unknown reduction op"):
        solo.allreduce(np.ones(3, np.int32), op=42)
    with pytest.raises(ValueError, match="elements"):
        solo.allreduce(np.ones(3, np.int32), np.ones(4, np.int32))
    with pytest.raises(TypeError, match="dtype"):
        solo.allreduce(np.ones(3, np.int32), np.ones(3, np.int64))
    with pytest.raises(ValueError, match="root"):
        solo.broadcast(np.ones(3), root=1)
    with pytest.raises(ValueError, match="overlap"):
        x = np.ones(10, np.int32)
        solo.allreduce(x[:6], x[4:])
    with pytest.raises(ValueError, match="needs"):
        solo.allgather(np.ones(3, np.int32), np.ones(4, np.int32))
    with pytest.raises(ValueError, match="this rank"):
        solo.send(np.ones(3), 0)
    # nothing was sent, so the communicator still works
    a = array.array("i", [5, 6])
    solo.allreduce(a)
    assert list(a) == [5, 6]


def test_unknown_interface():
    with pytest.raises(nezha.InvalidUsageError, match=r"no interface matches 'nosuchnic0'.*lo \("):
        nezha.Communicator(rails="nosuchnic0")


# ---- disagreements between ranks --------------------------------------------------------

def _errors(results):
    return [res for _, res, _ in results]


@pytest.mark.parametrize("scenario,what", [
    ("count_mismatch", "count"), ("op_mismatch", "op"), ("dtype_mismatch", "dtype"),
    ("coll_mismatch", "collective")])
def test_mismatch_raises_on_every_rank(scenario, what):
    results = spawn(4, scenario, env={"NEZHA_TIMEOUT": "30"})
    for rc, res, out in results:
        assert rc == 0 and res is not None, out
        assert res["error"] == "CollectiveMismatch", out
        assert "#0" in res["msg"] and "rank" in res["msg"], res["msg"]
    detail = [res["msg"] for res in _errors(results) if "aborted" not in res["msg"]]
    assert detail, "no rank named the difference"
    assert any(f"differs in {what}" in m for m in detail), detail


def test_killed_rank_is_an_error_on_all_others():
    results = spawn(4, "kill", env={"NEZHA_TIMEOUT": "30"})
    assert results[2][0] != 0  # it was killed
    for r in (0, 1, 3):
        rc, res, out = results[r]
        assert res is not None, out
        # a peer error (not a timeout): the dead rank is named, with its rail (shm: all
        # ranks on one host run the allreduce in the host area)
        assert res["error"] == "PeerError", out
        assert "rank 2" in res["msg"] or "aborted" in res["msg"], res["msg"]
        assert "rail shm" in res["msg"] or "aborted" in res["msg"], res["msg"]


def test_stuck_rank_times_out_with_names():
    results = spawn(3, "hang", env={"NEZHA_TIMEOUT": "2"})
    for r in (0, 2):
        rc, res, out = results[r]
        assert res["error"] in ("NezhaTimeout", "PeerError"), out
        assert "allreduce #0" in res["msg"], res["msg"]
    # rank 0 waits on the stuck rank 1 and says so, in its own timeout or in the abort it got
    assert "from rank 1" in results[0][1]["msg"].split("aborted")[0] or \
        "receive bytes 0..32 from rank 1" in results[0][1]["msg"], results[0][1]["msg"]


def test_stuck_rank_times_out_on_the_fast_path():
    """A repeated allreduce (fast path) honours a timeout lowered after the first calls:
    with the 30 s one it would simply succeed when the stuck rank wakes up after 8 s."""
    results = spawn(3, "hang_fast", env={"NEZHA_TIMEOUT": "30"})
    for r in (0, 2):
        rc, res, out = results[r]
        assert res["error"] in ("NezhaTimeout", "PeerError"), out
        assert "allreduce #3" in res["msg"], res["msg"]


def test_env_bootstrap_without_mpi():
    results = spawn(3, "ok")
    for rc, res, out in results:
        assert rc == 0 and res and res["error"] is None, out
    assert sorted(res["local_rank"] for _, res, _ in results) == [0, 1, 2]


# ---- authentication ---------------------------------------------------------------------

def test_wrong_job_secret():
    results = spawn(3, "ok", env={"NEZHA_CONNECT_TIMEOUT": "4"},
                    rank_env={1: {"NEZHA_JOB_SECRET": "11" * 16}})
    rc, res, out = results[1]
    assert res["error"] in ("AuthenticationError", "NezhaTimeout"), out
    for r in (0, 2):
        rc, res, out = results[r]
        assert res["stage"] == "init" and res["error"] in ("NezhaTimeout", "AuthenticationError",
                                                           "PeerError"), out
    assert any(res["error"] == "AuthenticationError" for _, res, _ in results)


def test_stranger_bytes_never_reach_a_buffer():
    secret = b"k" * 32
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(8)
    port = lst.getsockname()[1]
    out = {}

    def acceptor():
        out["socks"] = establish(0, secret, [lst], {}, {(1, 0, auth.PURPOSE_DATA)}, 10)

    t = threading.Thread(target=acceptor)
    t.start()
    # a stranger sending junk, and one who knows the protocol but not the secret
    junk = socket.create_connection(("127.0.0.1", port))
    junk.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 100)
    impostor = socket.create_connection(("127.0.0.1", port))
    hello = auth.hello(1, 0, auth.PURPOSE_DATA)
    impostor.sendall(hello)
    challenge = impostor.recv(auth.CHALLENGE)
    impostor.sendall(b"\0" * auth.PROOF + b"payload that must not arrive")
    # the real peer
    real = establish(1, secret, [], {(0, 0, auth.PURPOSE_DATA): ("127.0.0.1", port, None)},
                     set(), 10)
    t.join(15)
    assert len(challenge) == auth.CHALLENGE
    socks = out["socks"]
    assert list(socks) == [(1, 0, auth.PURPOSE_DATA)]
    # the accepted socket is the real peer's: what it sends is what arrives
    real[(0, 0, auth.PURPOSE_DATA)].sendall(b"hello from rank 1")
    acc = socks[(1, 0, auth.PURPOSE_DATA)]
    acc.setblocking(True)
    acc.settimeout(5)
    assert acc.recv(100) == b"hello from rank 1"
    # the strangers were cut off
    for s in (junk, impostor):
        s.settimeout(5)
        try:
            assert s.recv(100) == b""
        except ConnectionResetError:
            pass
    for s in list(socks.values()) + list(real.values()) + [junk, impostor, lst]:
        s.close()
