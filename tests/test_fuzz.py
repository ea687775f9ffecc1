"""Fuzzing: an authenticated, hostile peer (tests/fuzzpeer.py) against a real rank
(tests/workers/fuzz_victim.py, a process of its own; two real ranks of three in
test_fuzz_three_ranks), and garbage datagrams against the INA service. Every case must end
in "ok" or a nezha exception on the real rank, within a bound of its timeout, with the
guard bytes around its buffers intact; the rank must not die.

Seeded (TEST_FUZZ_SEED, default 18) and bounded: TEST_FUZZ_SECONDS per test (default 6;
the long mode is e.g. TEST_FUZZ_SECONDS=1800). TEST_FUZZ_ASAN=build/asan runs the real
rank on the engine built with ASan and UBSan (`make asan`). Counts per outcome class are
printed (pytest -s) and appended to TEST_FUZZ_REPORT if set (docs/hardening.md)."""
import collections
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests import fuzzpeer

ROOT = fuzzpeer.ROOT
SECRET = fuzzpeer.SECRET
SEED = int(os.environ.get("TEST_FUZZ_SEED", "18"))
SECONDS = float(os.environ.get("TEST_FUZZ_SECONDS", "6"))
TIMEOUT = fuzzpeer.TIMEOUT    # the real rank's NEZHA_TIMEOUT in a case
CONNECT = fuzzpeer.CONNECT    # its NEZHA_CONNECT_TIMEOUT
# a case must end within this (a hang otherwise): the run's deadline, the vote's, the wait
# for a peer's abort message, and the set-up
BOUND = CONNECT + 4 * TIMEOUT + 3.0


def asan_env():
    """Environment that runs the victim on the sanitizer build, if asked for."""
    return fuzzpeer.asan_env(os.environ.get("TEST_FUZZ_ASAN"))


@pytest.fixture
def victim(tmp_path):
    v = fuzzpeer.Victim(tmp_path / "victim.log", SECRET, os.environ.get("TEST_FUZZ_ASAN"))
    yield v
    v.close()


def run_fuzz(victim, seconds, seed, rails=None, kinds=None, max_cases=None, others=(),
             min_cases=3):
    """Cases until seconds pass and at least min_cases ran (a loaded machine must not cut a
    run to one slow case: a stall case alone can outlast the budget); returns (Counter of
    outcomes by kind, cases, worst secs). others: real ranks 1..N-2 of an N-rank job (the
    peer is rank N-1)."""
    counts = collections.Counter()
    worst = 0.0
    t_end = time.monotonic() + seconds
    i = 0
    while ((time.monotonic() < t_end or i < min_cases)
           and (max_cases is None or i < max_cases)):
        case = fuzzpeer.case_for(seed, i, rails, kinds, TIMEOUT, CONNECT, len(others) + 2)
        res, why = fuzzpeer.run_case(victim, case, SECRET, others)
        if why is not None and why.startswith(("crash", "hang")):
            stacks = "\n".join(v.stacks() for v in [victim, *others])
            pytest.fail(f"{why} in case {case} (seed {seed}):\n{stacks}")
        assert why is None, (why, case, res)
        worst = max(worst, res["secs"])
        counts[(case["kind"], res["outcome"])] += 1
        i += 1
    return counts, i, worst


def report(name, counts, n, worst, seconds):
    by_outcome = collections.Counter()
    for (_, out), k in counts.items():
        by_outcome[out] += k
    line = dict(test=name, seed=SEED, cases=n, seconds=round(seconds, 1), worst_case_s=worst,
                outcomes=dict(by_outcome), asan=bool(os.environ.get("TEST_FUZZ_ASAN")),
                by_kind={f"{k}:{o}": v for (k, o), v in sorted(counts.items())})
    print("FUZZ " + json.dumps(line))
    if os.environ.get("TEST_FUZZ_REPORT"):
        with open(os.environ["TEST_FUZZ_REPORT"], "a") as f:
            f.write(json.dumps(line) + "\n")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("rails", [1, 2])
def test_fuzz_wire(victim, rails):
    """Mutated and random data streams, control and vote frames, peer death, one rail
    (no failover) and two (failover and votes)."""
    t0 = time.monotonic()
    counts, n, worst = run_fuzz(victim, SECONDS, SEED + rails, rails=rails, min_cases=5)
    report(f"wire-{rails}rail", counts, n, worst, time.monotonic() - t0)


@pytest.mark.timeout(600)
def test_fuzz_votes_and_control(victim):
    """Only control and vote frames out of order, for unknown votes and collectives."""
    t0 = time.monotonic()
    counts, n, worst = run_fuzz(victim, SECONDS / 2, SEED + 7, rails=2, kinds=[
        "ctrl-status", "ctrl-status", "ctrl-status-first", "ctrl-abort", "ctrl-biglen",
        "ctrl-unknown", "die-vote"])
    report("votes", counts, n, worst, time.monotonic() - t0)


@pytest.mark.timeout(600)
def test_fuzz_three_ranks(victim, tmp_path):
    """Rank 2 of 3 hostile, ranks 0 and 1 real: the same mutations, control and vote frames
    where a vote has three voters; both real ranks must end as one rank must."""
    other = fuzzpeer.Victim(tmp_path / "victim1.log", SECRET, os.environ.get("TEST_FUZZ_ASAN"))
    try:
        t0 = time.monotonic()
        counts, n, worst = run_fuzz(victim, min(SECONDS / 2, 4), SEED + 11, others=[other])
    finally:
        other.close()
    report("3-ranks", counts, n, worst, time.monotonic() - t0)


@pytest.mark.timeout(120)
def test_vote_naming_a_dead_channel_is_not_a_spin(victim):
    """Regression (found by the fuzz run under ASan): a STATUS frame saying "slice 0
    unfinished" in rank 0's striped collective, then silence. The engine set channel 0 aside
    and then counted it as news on every pass, looping without looking at the deadline: a
    hang at 100 % CPU instead of an error (include/nezha/nezha_engine.h, nz_check_silence)."""
    case = dict(case=0, coll="allreduce_oop", dtype="float64", count=267560, kind="vote-slice0",
                rails=2, seed=1, then="silent", heartbeat=True, port=0,
                timeout=TIMEOUT, connect_timeout=CONNECT)
    victim.start(case)
    peer = fuzzpeer.FuzzPeer(victim.listening(BOUND), SECRET, 2, CONNECT)
    try:
        fuzzpeer.play(peer, case, time.monotonic() + 3 * TIMEOUT)
        res = victim.result(BOUND)
    finally:
        peer.close()
    if res == "hang" or res is None:
        pytest.fail(f"the real rank {'hung' if res else 'died'}:\n{victim.stacks()}")
    print("REGRESSION", res)
    assert res["outcome"] in ("NezhaTimeout", "PeerError", "RailSystemError", "PeerUnreachable"), res
    assert res["guards"] and res["secs"] < BOUND, res


@pytest.mark.timeout(600)
def test_fuzz_bootstrap(victim):
    """A rank that passes the rendezvous's handshake, then sends nonsense or dies."""
    t0 = time.monotonic()
    counts, n, worst = run_fuzz(victim, min(SECONDS / 2, 4), SEED + 9, kinds=["die-boot"],
                                max_cases=None if SECONDS > 6 else 8)
    report("bootstrap", counts, n, worst, time.monotonic() - t0)


# ---- the INA service ------------------------------------------------------------------

@pytest.mark.timeout(600)
def test_fuzz_ina_service(tmp_path):
    """Garbage, truncated and mutated datagrams, and valid-looking ones with wrong tokens, at
    `nezha ina serve`: it stays up and still serves a real job exactly."""
    import numpy as np
    from nezha.rails.ina import InaClient
    ready = tmp_path / "ready"
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.update(asan_env())
    errf = open(tmp_path / "ina.log", "w")
    srv = subprocess.Popen([sys.executable, "-m", "nezha", "ina", "serve", "--addr", "127.0.0.1",
                            "--port", "0", "--slots", "64", "--quota", "32",
                            "--ready-file", str(ready), "--stats", "0"],
                           env=env, stdout=errf, stderr=subprocess.STDOUT,
                           cwd=str(tmp_path))  # not ./nezha: PYTHONPATH decides
    try:
        t_end = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < t_end and srv.poll() is None:
            time.sleep(0.05)
        assert ready.exists(), (tmp_path / "ina.log").read_text()
        port = int(ready.read_text().split()[1])
        secret = bytes(range(32))
        rng = random.Random(SEED)
        t0 = time.monotonic()
        sent = 0
        real = InaClient(("127.0.0.1", port), secret=secret, rank=0, size=1, tag=b"fz",
                         timeout=5.0)
        # a genuine registration's header gives the layout to mutate
        token = real._c.token
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        import struct
        hdr = struct.Struct("<IBBBBQHHIIIHH")
        rounds = 0
        while time.monotonic() - t0 < min(SECONDS / 2, 4) or rounds < 2:
            for _ in range(300):
                kind = rng.randrange(6)
                if kind == 0:
                    d = os.urandom(rng.randrange(0, 1600))
                else:
                    h = hdr.pack(0x315A494E, rng.randrange(8), rng.randrange(16), rng.randrange(16),
                                 rng.randrange(4), token if kind in (1, 2) else rng.randrange(2**64),
                                 # the job's token only with ranks it does not have
                                 rng.randrange(65536), rng.randrange(1, 4) if kind in (1, 2)
                                 else rng.randrange(4), rng.randrange(2**32),
                                 rng.randrange(8), rng.randrange(2**32), rng.randrange(65536),
                                 0)
                    body = os.urandom(rng.choice([0, 4, 100, 1408, 1500]))
                    d = (h + body)[: rng.randrange(1, len(h) + len(body) + 1)] if kind == 3 else h + body
                s.sendto(d, ("127.0.0.1", port))
                sent += 1
            rounds += 1
            assert srv.poll() is None, (tmp_path / "ina.log").read_text()
            buf = np.arange(1000, dtype=np.float32)
            real.allreduce(buf)  # a job of one rank: the sum is its own data
            assert np.array_equal(buf, np.arange(1000, dtype=np.float32))
        real.close()
        s.close()
        print("FUZZ " + json.dumps(dict(test="ina", datagrams=sent,
                                        seconds=round(time.monotonic() - t0, 1))))
        if os.environ.get("TEST_FUZZ_REPORT"):
            with open(os.environ["TEST_FUZZ_REPORT"], "a") as f:
                f.write(json.dumps(dict(test="ina", datagrams=sent,
                                        seconds=round(time.monotonic() - t0, 1))) + "\n")
        assert srv.poll() is None, (tmp_path / "ina.log").read_text()
    finally:
        srv.terminate()
        try:
            srv.wait(10)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
        errf.close()
    assert srv.returncode in (0, -signal.SIGTERM), (tmp_path / "ina.log").read_text()
