"""Peer death at every phase (bootstrap, connect, mid-collective, mid-vote, re-admission) and a
stopped peer (SIGSTOP, then SIGCONT): 3 ranks over two loop rails (failover on), one of them
killed (SIGKILL, by itself, at the phase: tests/workers/death_worker.py). Every other rank
must raise a PeerError naming the dead rank within its timeout; results stay exact.
The table of phase -> error per rank -> seconds is printed (pytest -s) and in
docs/hardening.md. Earlier tests cover the mid-collective kill with one rail
(test_errors.py), on loop rails (test_loop_faults.py) and in the lab (test_failover.py)."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from nezha.bootstrap import auth
from nezha.errors import PeerError
from nezha.rails.tcp.connect import establish
from nezha.transports import fault
from tests.spawn import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "workers", "death_worker.py")
TIMEOUT, CONNECT = 10.0, 5.0
_STARTED = []  # every worker this module started: the fixture below reaps them


@pytest.fixture(autouse=True)
def reap_workers():
    """A failed assert (ready() false) or pytest-timeout leaves ranks running: they loop on
    collectives until TEST_STOP and would spin on the CPU for the rest of the session."""
    yield
    while _STARTED:
        p = _STARTED.pop()
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)  # a SIGSTOPped rank still dies of SIGKILL; be plain
            p.kill()
            p.wait()
        if not p.logf.closed:
            p.logf.close()


def start(tmp_path, phase, doomed, n=3, extra=None):
    table = fault.FaultTable.create(str(tmp_path / "faults"))
    port = free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, PYTHONPATH=ROOT, RANK=str(r), WORLD_SIZE=str(n),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NEZHA_JOB_SECRET="7d" * 16,
                   NEZHA_RAILS="loop", NEZHA_FAULTS=table.path, NEZHA_READMIT="0.3",
                   NEZHA_TIMEOUT=str(TIMEOUT), NEZHA_CONNECT_TIMEOUT=str(CONNECT),
                   NEZHA_RAIL_TIMEOUT="0.25", NEZHA_HEARTBEAT="0.02", TEST_PHASE=phase,
                   TEST_DOOMED=str(doomed), TEST_DIR=str(tmp_path),
                   TEST_STOP=str(tmp_path / "stop"))
        env.update(extra or {})
        for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "LOCAL_RANK"):
            env.pop(k, None)
        log = open(tmp_path / f"rank{r}.log", "w")
        p = subprocess.Popen([sys.executable, WORKER], env=env, stdout=log,
                             stderr=subprocess.STDOUT)
        p.logf, p.logpath = log, tmp_path / f"rank{r}.log"
        procs.append(p)
        _STARTED.append(p)
    return table, procs


def ready(tmp_path, procs, ranks, timeout=60):
    end = time.time() + timeout
    while time.time() < end and all(p.poll() is None for p in procs):
        if all((tmp_path / f"ready.{r}").exists() for r in ranks):
            return True
        time.sleep(0.05)
    return False


def finish(tmp_path, procs, timeout=60):
    """Wait for every rank (a hang fails the test); {rank: RESULT} of those that printed."""
    end = time.time() + timeout
    out = {}
    try:
        for r, p in enumerate(procs):
            try:
                p.wait(max(1, end - time.time()))
            except subprocess.TimeoutExpired:
                (tmp_path / "stop").write_text("")
                pytest.fail(f"rank {r} hung:\n" + "\n".join(
                    q.logpath.read_text()[-3000:] for q in procs))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.logf.close()
    for r, p in enumerate(procs):
        lines = [ln for ln in p.logpath.read_text().splitlines() if ln.startswith("RESULT ")]
        if lines:
            out[r] = json.loads(lines[-1][7:])
    return out


def show(phase, results):
    print("DEATH " + json.dumps({"phase": phase, "ranks": {
        r: [res["error"], res.get("secs"), (res.get("msg") or "")[:160]]
        for r, res in sorted(results.items())}}))


PHASES = [("bootstrap", 2), ("connect", 1), ("collective", 2), ("vote", 1), ("readmit", 1)]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("phase,doomed", PHASES)
def test_peer_death_at_every_phase(tmp_path, phase, doomed):
    table, procs = start(tmp_path, phase, doomed)
    others = [r for r in range(3) if r != doomed]
    if phase == "readmit":
        assert ready(tmp_path, procs, range(3)), [p.logpath.read_text()[-2000:] for p in procs]
        table.cut(1, [doomed], others)   # rail 1 down for the doomed rank ...
        time.sleep(1.0)
        table.heal()                     # ... and back: its re-admission is where it dies
    results = finish(tmp_path, procs)
    show(phase, results)
    assert procs[doomed].returncode == -signal.SIGKILL, results
    for r in others:
        res = results.get(r)
        assert res is not None, procs[r].logpath.read_text()[-3000:]
        assert res["wrong"] == 0, res
        # PeerError everywhere: a rank waiting for the dead one's connections (connect,
        # re-admission) probes its listener / sees its control connections close, instead
        # of a NezhaTimeout after NEZHA_CONNECT_TIMEOUT (nezha/rails/tcp/connect.py)
        assert res["error"] == "PeerError", res
        assert f"rank {doomed}" in res["msg"], res
        if phase in ("connect", "readmit"):
            assert res["peer"] == doomed, res
        limit = CONNECT if res["stage"] == "init" else TIMEOUT
        assert res["secs"] < limit + 3, res   # within the timeout (a hang bound, not a timing)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("rails", [1, 2])
def test_stopped_peer_times_out_and_resumes_uncorrupted(tmp_path, rails):
    """SIGSTOP rank 2 mid-run: ranks 0 and 1 raise a NezhaTimeout within the timeout naming
    it (one rail: after NEZHA_TIMEOUT, here 3 s; two rails: failover finds it unreachable on
    every rail first, PeerUnreachable, a NezhaTimeout and a RailSystemError), or the
    PeerError of rank 0's abort; after SIGCONT rank 2 raises too (the others are gone) and
    no rank saw a wrong result."""
    table, procs = start(tmp_path, "none", 2, extra={"NEZHA_LOOP_RAILS": str(rails),
                                                     "NEZHA_TIMEOUT": "3"})
    assert ready(tmp_path, procs, range(3)), [p.logpath.read_text()[-2000:] for p in procs]
    procs[2].send_signal(signal.SIGSTOP)
    t0 = time.time()
    try:
        for p in procs[:2]:
            p.wait(TIMEOUT + 20)
    finally:
        procs[2].send_signal(signal.SIGCONT)
    stopped_for = time.time() - t0
    results = finish(tmp_path, procs)
    show(f"sigstop-{rails}rail", results)
    for r in (0, 1):
        res = results[r]
        assert res["wrong"] == 0 and res["error"] in (
            ("NezhaTimeout", "PeerError") if rails == 1 else
            ("NezhaTimeout", "PeerUnreachable", "PeerError")), res
        assert "rank 2" in res["msg"], res
        assert res["secs"] < TIMEOUT + 3, res
    res = results[2]
    assert res["wrong"] == 0 and res["error"] is not None, res  # an error, not a wrong sum
    assert stopped_for < TIMEOUT + 20


def start_clean(tmp_path, **extra):
    """3 ranks on two loop rails that stop together (TEST_AGREE_STOP) once ready."""
    table, procs = start(tmp_path, "none", 2, extra={"NEZHA_LOOP_RAILS": "2",
                                                     "TEST_AGREE_STOP": "1", **extra})
    assert ready(tmp_path, procs, range(3)), [p.logpath.read_text()[-2000:] for p in procs]
    return table, procs


def stop_clean(tmp_path, procs, name):
    """Stop the ranks; every one must end without error or wrong result: their RESULTs."""
    (tmp_path / "stop").write_text("")
    results = finish(tmp_path, procs)
    show(name, results)
    for r in range(3):
        res = results.get(r)
        assert res is not None, procs[r].logpath.read_text()[-3000:]
        assert res["error"] is None and res["wrong"] == 0, res
    return [results[r] for r in range(3)]


@pytest.mark.timeout(120)
def test_short_stop_gives_up_no_rail(tmp_path):
    """A rank stopped for longer than NEZHA_RAIL_TIMEOUT but less than the peer-lost wait
    (what a rank starved of CPU looks like, with more ranks than cores) is silent on every
    rail at once: no rail may be given up for it (include/nezha/nezha_engine.h,
    nz_rail_silent). Before that rule, this set both rails aside and ended in
    RailSystemError or a re-admission."""
    table, procs = start_clean(tmp_path)
    for _ in range(2):
        procs[2].send_signal(signal.SIGSTOP)
        time.sleep(0.5)           # RAIL_TIMEOUT 0.25 s < 0.5 s < peer lost 1 s
        procs[2].send_signal(signal.SIGCONT)
        time.sleep(0.5)
    for res in stop_clean(tmp_path, procs, "sigstop-0.5s"):
        assert res["downs"] == 0, res


@pytest.mark.timeout(120)
def test_last_rail_takes_back_a_healed_one(tmp_path):
    """Rail 1 is cut and given up; it heals, but re-admission (NEZHA_READMIT) is far off;
    then rail 0, the last one in use, is cut. The vote that would leave no rail takes back
    the one every rank hears right now (nezha/failover.py, _mark_dead) instead of ending
    the job with RailSystemError; results stay exact."""
    table, procs = start_clean(tmp_path, NEZHA_READMIT="60")
    table.cut(1, [2], [0, 1])
    time.sleep(1.5)               # rail 1 given up (silence 0.25 s)
    table.heal()
    time.sleep(0.5)               # its heartbeats are heard again
    table.cut(0, [2], [0, 1])     # the last rail in use
    time.sleep(2.5)               # silence, then the peer-lost wait (1 s), then the vote
    table.heal()
    time.sleep(0.5)
    for res in stop_clean(tmp_path, procs, "last-rail"):
        assert res["downs"] >= 2 and res["ups"] >= 1, res



SECRET = b"p" * 32


def _listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s, s.getsockname()[1]


@pytest.mark.timeout(60)
def test_waiting_rank_probes_a_gone_peer():
    """establish's probe: rank 0 waits for rank 1's connection; rank 1 listened, then went
    (its listener closed): a PeerError naming it well before the connect timeout."""
    lst0, _ = _listener()
    gone, port = _listener()
    gone.close()
    t0 = time.monotonic()
    with pytest.raises(PeerError) as ei:
        establish(0, SECRET, [lst0], {}, {(1, 0, auth.PURPOSE_DATA)}, 10,
                  {1: "host pid 1"}, gone_if_refused=True,
                  probes={1: ("127.0.0.1", port, None)})
    assert time.monotonic() - t0 < 3
    assert ei.value.peer == 1 and "rank 1 (host pid 1) no longer listens" in str(ei.value)
    lst0.close()


@pytest.mark.timeout(60)
def test_gone_callback_names_the_peer_first_heard_last():
    """establish's gone callback (the communicator's: every control connection closed)."""
    lst0, _ = _listener()
    with pytest.raises(PeerError) as ei:
        establish(0, SECRET, [lst0], {}, {(1, 0, auth.PURPOSE_DATA),
                                          (2, 0, auth.PURPOSE_DATA)}, 10,
                  gone=lambda p: ("closed every control connection", False) if p == 2 else None)
    assert ei.value.peer == 2 and "rank 2 (?) closed every control connection" in str(ei.value)
    lst0.close()


@pytest.mark.timeout(60)
def test_gone_callback_names_the_silent_peer_before_one_that_aborted():
    """Rank 1 aborted (on account of rank 2) and closed; rank 2 was killed and is seen gone
    a little later, within the grace: rank 2 is the one named (the CI failure of
    test_peer_death_at_every_phase[readmit-1], where the lower rank that aborted was named)."""
    lst0, _ = _listener()
    t0 = time.monotonic()

    def gone(p):
        if p == 1:
            return ("closed every control connection, after its abort: rank 2 died", True)
        if p == 2 and time.monotonic() - t0 > 0.03:
            return ("closed every control connection", False)
        return None

    with pytest.raises(PeerError) as ei:
        establish(0, SECRET, [lst0], {}, {(1, 0, auth.PURPOSE_DATA),
                                          (2, 0, auth.PURPOSE_DATA)}, 10, gone=gone)
    msg = str(ei.value)
    assert ei.value.peer == 2, msg
    assert msg.index("rank 2 (?)") < msg.index("rank 1 (?) too"), msg
    assert "gave up" not in msg, msg
    lst0.close()


@pytest.mark.timeout(60)
def test_probe_of_a_live_peer_is_dropped_quietly(capfd):
    """A live peer's listener answers the probe; the peer's own establish drops the bare
    connection without a warning, and every real connection still gets through."""
    lst0, port0 = _listener()
    lst1, port1 = _listener()
    out = {}

    def run(name, *a, **k):
        try:
            out[name] = establish(*a, **k)
        except Exception as exc:  # noqa: BLE001 - reported by the asserts below
            out[name] = exc

    t1 = threading.Thread(target=run, args=("1", 1, SECRET, [lst1], {},
                                            {(2, 0, auth.PURPOSE_DATA)}, 10))
    t0 = threading.Thread(target=run, args=("0", 0, SECRET, [lst0], {},
                                            {(1, 0, auth.PURPOSE_DATA)}, 10),
                          kwargs=dict(gone_if_refused=True,
                                      probes={1: ("127.0.0.1", port1, None)}))
    t1.start()
    t0.start()
    time.sleep(1.0)   # probes at 0.2 and 0.6 s: rank 1's establish accepts them
    late = establish(2, SECRET, [], {(1, 0, auth.PURPOSE_DATA): ("127.0.0.1", port1, None)},
                     set(), 10)
    t1.join(15)
    up = establish(1, SECRET, [], {(0, 0, auth.PURPOSE_DATA): ("127.0.0.1", port0, None)},
                   set(), 10)
    t0.join(15)
    assert list(out["1"]) == [(2, 0, auth.PURPOSE_DATA)], out
    assert list(out["0"]) == [(1, 0, auth.PURPOSE_DATA)], out
    err = capfd.readouterr().err
    assert "closed a connection" not in err and "lost an incoming" not in err, err
    for d in (out["0"], out["1"], late, up):
        for s in d.values():
            s.close()
    lst0.close()
    lst1.close()
