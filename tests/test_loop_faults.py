"""Votes, repair and re-admission without the lab: ranks as processes of this test on the
loop rails (NEZHA_RAILS=loop: two TCP rails over loopback addresses), every endpoint behind
the fault layer (NEZHA_FAULTS), faults written into the shared table while collectives run.
No root, no namespaces; the same worker and checks as tests/test_failover.py."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from nezha.transports import fault
from tests.spawn import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "workers", "failover_worker.py")

# transports: tcp only, and shm between ranks 0 and 1 (one "host") with tcp to the others
TRANSPORTS = {"loop": {}, "loop+shm": {"NEZHA_RAILS": "loop,shm", "hosts": "0,0,1,2"},
              # two hosts of two ranks: hierarchical collectives
              "loop+shm-hier": {"NEZHA_RAILS": "loop,shm", "hosts": "0,0,1,1"}}


def _start(tmp_path, kind, transport, n=4, env_extra=None):
    table = fault.FaultTable.create(str(tmp_path / "faults"))
    stop = str(tmp_path / "stop")
    port = free_port()
    extra = dict(TRANSPORTS[transport])
    hosts = extra.pop("hosts", None)
    procs = []
    for r in range(n):
        env = dict(os.environ, PYTHONPATH=ROOT, RANK=str(r), WORLD_SIZE=str(n),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NEZHA_JOB_SECRET="cd" * 16,
                   NEZHA_RAILS="loop", NEZHA_FAULTS=table.path, NEZHA_READMIT="0.3",
                   NEZHA_TIMEOUT="30", NEZHA_CONNECT_TIMEOUT="60", TEST_READY_DIR=str(tmp_path),
                   # 4 ranks on 2 cores (and CI's load): a healthy rail can be silent for
                   # 60 ms; these tests are about what happens after, not how soon
                   NEZHA_RAIL_TIMEOUT="0.25", NEZHA_HEARTBEAT="0.02")
        env.update(extra, **(env_extra or {}))
        for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"):
            env.pop(k, None)
        if hosts:
            env["NEZHA_HOST_ID"] = "h" + hosts.split(",")[r]
        # output to a file, not a pipe: a rank logging more than a pipe holds (NEZHA_DEBUG)
        # would block in write() while the test waits for it
        with open(tmp_path / f"rank{r}.log", "w") as log:
            p = subprocess.Popen([sys.executable, WORKER, stop, kind], env=env,
                                 stdout=log, stderr=subprocess.STDOUT)
        p.log = tmp_path / f"rank{r}.log"
        procs.append(p)
    return table, stop, procs


def _finish(stop, procs, timeout=120):
    open(stop, "w").close()
    outs = []
    deadline = time.time() + timeout
    try:
        for p in procs:
            try:
                p.wait(timeout=max(1, deadline - time.time()))
                outs.append(p.log.read_text())
            except subprocess.TimeoutExpired:  # a hang: the stacks of every rank, then fail
                for q in procs:
                    if q.poll() is None:
                        q.send_signal(signal.SIGUSR1)
                time.sleep(1)
                for q in procs:
                    q.kill()
                    q.wait()
                stacks = "\n".join(q.log.read_text()[-6000:] for q in procs)
                pytest.fail(f"ranks hung after the stop file:\n{stacks}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    results = []
    for out in outs:
        got = [json.loads(line.split("RESULT ", 1)[1]) for line in out.splitlines()
               if "RESULT " in line]
        results.append(got[-1] if got else None)
    return results, "\n".join(o[-3000:] for o in outs)


WAIT_S = 60  # a fault's detection or a re-admission takes about a second, more under CI's load


class Ranks:
    """The running ranks as a test waits on them: the status each writes every 50 ms
    (failover_worker._status: collectives done, down and up events, every channel alive)."""

    def __init__(self, tmp_path, procs):
        self.dir, self.procs = tmp_path, procs

    def status(self):
        out = []
        for r in range(len(self.procs)):
            try:
                out.append(json.loads((self.dir / f"status.{r}").read_text()))
            except (OSError, ValueError):  # not written yet
                out.append(None)
        return out

    def wait(self, what, cond, timeout=WAIT_S):
        """Poll until cond(every rank's status) holds; fail naming what if a rank exits
        first or timeout passes. The statuses that held."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.status()
            if all(st) and cond(st):
                return st
            gone = [r for r, p in enumerate(self.procs) if p.poll() is not None]
            if gone or time.monotonic() > deadline:
                logs = "\n".join(p.log.read_text()[-1500:] for p in self.procs)
                why = f"rank(s) {gone} exited" if gone else f"not within {timeout} s"
                pytest.fail(f"waiting for {what}: {why}; status {st}\n{logs}")
            time.sleep(0.02)

    def exited(self, what, timeout=WAIT_S):
        """Wait until every rank has exited (each reports before it does)."""
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in self.procs):
            if time.monotonic() > deadline:
                pytest.fail(f"ranks still running {timeout} s after {what}: "
                            f"{[r for r, p in enumerate(self.procs) if p.poll() is None]}")
            time.sleep(0.02)


def fault_cycle(table, ranks, cut, runs=5):
    """cut() writes a fault; wait until every rank has rerouted (a channel dead in its
    planner) and run `runs` collectives so; heal; wait until every rank has re-admitted it
    (all alive, one more up event) and run `runs` collectives on every rail."""
    up = [s["up"] for s in ranks.wait("the ranks' first status", lambda st: True)]
    cut()
    st = ranks.wait("every rank rerouting around the fault",
                    lambda st: not any(s["alive"] for s in st))
    done = [s["done"] for s in st]
    ranks.wait(f"{runs} collectives per rank on the rails left",
               lambda st: all(s["done"] >= d + runs for s, d in zip(st, done)))
    table.heal()
    st = ranks.wait("every rank re-admitting the healed rail",
                    lambda st: all(s["alive"] and s["up"] > u for s, u in zip(st, up)))
    done = [s["done"] for s in st]
    # alive at the end too (a rail down again right after its re-admission, session 20:
    # a reset rail flapped while its fault lasted, re-admitted within ms by a vote that
    # counted heartbeats from before the failure, and these waits could take a flap's
    # statuses for the reroute and the re-admission; fixed in session 21,
    # test_a_reset_rail_stays_down_until_healed)
    ranks.wait(f"{runs} collectives per rank on every rail",
               lambda st: all(s["done"] >= d + runs and s["alive"] for s, d in zip(st, done)))


def _ready(tmp_path, procs, timeout=90):
    """Wait until every rank has run a few collectives (or one has exited)."""
    deadline = time.time() + timeout
    while time.time() < deadline and any(p.poll() is None for p in procs):
        if all((tmp_path / f"ready.{r}").exists() for r in range(len(procs))):
            return
        time.sleep(0.05)


def _run(tmp_path, kind, transport, inject, env_extra=None):
    table, stop, procs = _start(tmp_path, kind, transport, env_extra=env_extra)
    try:
        _ready(tmp_path, procs)
        inject(table, Ranks(tmp_path, procs))
    finally:
        table.heal()
        results, out = _finish(stop, procs)
    return results, out


# Stall, reset (a dropped connection) and close (the peer looks gone), flat and hierarchical.
# A reset or close once left a rank voting forever in a lazy collective it had finished
# (with a channel set aside after its last byte) while the others waited for it in the next.
FAULT_CASES = [pytest.param(t, b) for b in ("stall", "reset", "close")
               for t in ("loop", "loop+shm", "loop+shm-hier")]


@pytest.mark.parametrize("transport,bits", FAULT_CASES)
def test_results_exact_across_repeated_faults(tmp_path, transport, bits):
    """One rank at a time loses a rail to every peer (stalled, reset or closed), three times;
    every collective stays exact, the rail is rerouted and re-admitted."""
    mode = {"stall": fault.STALL, "reset": fault.RESET, "close": fault.CLOSE}[bits]

    def inject(table, ranks):
        for k in range(3):
            rank = 1 + k % 3
            fault_cycle(table, ranks, lambda: table.cut(
                k % 2, [rank], [p for p in range(4) if p != rank], mode))

    results, out = _run(tmp_path, "all", transport, inject)
    assert all(results), out
    for r in results:
        assert r["error"] is None and r["wrong"] == 0 and r["done"] > 8, (r, out)
    events = [e for r in results for e in r["events"]]
    assert sum(e["event"] == "down" for e in results[0]["events"]) >= 2, events
    assert sum(e["event"] == "up" for e in results[0]["events"]) >= 2, events
    # re-admitted only NEZHA_READMIT (0.3 s) after its failure: a rail that came back
    # sooner (heard before it failed) failed again at once, a dozen times a fault (session 21)
    flaps = [e for e in events if e["event"] == "up" and (e["down_s"] or 1) < 0.24]
    assert not flaps, flaps
    assert all(results[0]["alive"].values()), results[0]["alive"]


@pytest.mark.parametrize("bits", ["reset", "close"])
def test_a_reset_rail_stays_down_until_healed(tmp_path, bits):
    """Rank 1's rail 0 reset (or closed) to every peer for 1 s: each rank gives it up once,
    re-admits it once after the heal (NEZHA_READMIT after its failure, on connections of a
    later generation) and it stays up for 20 collectives. Before session 21 it came back at
    the next vote, milliseconds after its failure (its heartbeats, silent for less than the
    rail timeout, still counted as heard steadily) and failed again at once, a dozen times
    per fault: this failed with down, up, down, up... on every rank."""
    mode = {"reset": fault.RESET, "close": fault.CLOSE}[bits]
    marks = {}

    def inject(table, ranks):
        up = [s["up"] for s in ranks.wait("the ranks' first status", lambda st: True)]
        marks["cut"] = time.time()
        table.cut(0, [1], [0, 2, 3], mode)
        ranks.wait("every rank rerouting around the fault",
                   lambda st: not any(s["alive"] for s in st))
        time.sleep(1.0)  # the old flapping lasted the rail timeout (0.25 s) after the cut
        marks["heal"] = time.time()
        table.heal()
        st = ranks.wait("every rank re-admitting the healed rail",
                        lambda st: all(s["alive"] and s["up"] > u for s, u in zip(st, up)))
        done = [s["done"] for s in st]
        ranks.wait("20 collectives per rank on every rail",
                   lambda st: all(s["done"] >= d + 20 and s["alive"] for s, d in zip(st, done)))

    results, out = _run(tmp_path, "all", "loop", inject)
    assert all(results), out
    for r in results:
        assert r["error"] is None and r["wrong"] == 0, (r, out)
        ev = [e for e in r["events"] if e["event"] in ("down", "up") and e["channel"] == "loop0"]
        assert [e["event"] for e in ev] == ["down", "up"], (marks, ev)
        down, up = ev
        assert marks["cut"] < down["time"] < marks["heal"] < up["time"], (marks, ev)
        assert up["gen"] > down["gen"], ev
        assert all(r["alive"].values()), r["alive"]


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_small_lazy_collectives_survive_a_deaf_rank(tmp_path, transport):
    """A rank that stops hearing one rail leaves some ranks a collective behind the others
    (small collectives return without a vote): they re-run it together, all exact."""
    def inject(table, ranks):
        for k in range(3):
            fault_cycle(table, ranks, lambda: table.deafen(k % 2, [3 - k % 2], 4), runs=40)

    results, out = _run(tmp_path, "small", transport, inject)
    assert all(results), out
    for r in results:
        assert r["error"] is None and r["wrong"] == 0 and r["done"] > 100, (r, out)
        assert r["fast"] > r["done"] // 16, r  # repeated calls took the fast path
    assert sum(e["event"] == "down" for e in results[0]["events"]) >= 2, results[0]["events"]
    assert all(results[0]["alive"].values()), results[0]["alive"]


def _cut(table, k, bits):
    """The k-th of a series of faults: rank 3 (then 2) deaf on rail k % 2, or rank 1 + k % 3
    stalled or reset on rail k % 2 to every peer."""
    if bits == "deaf":
        table.deafen(k % 2, [3 - k % 2], 4)
    else:
        rank = 1 + k % 3
        table.cut(k % 2, [rank], [p for p in range(4) if p != rank],
                  {"stall": fault.STALL, "reset": fault.RESET}[bits])


# small collectives striped over both rails: flat (the ring, forced: rd keeps an allreduce
# whole) and hierarchical (2 hosts x 2 ranks, the 4 x 2 lab's 64 KiB case of issue 17)
STRIPED = {"loop": {"NEZHA_MIN_RAIL_PIECE": "16", "NEZHA_ALGO": "ring"},
           "loop+shm-hier": {"NEZHA_MIN_RAIL_PIECE": "16", "NEZHA_ALGO": "hier"}}


@pytest.mark.parametrize("transport,bits", [("loop", "deaf"), ("loop", "stall"),
                                            ("loop", "reset"), ("loop+shm-hier", "deaf")])
def test_small_striped_collectives_are_lazy_and_survive_faults(tmp_path, transport, bits):
    """Small collectives striped over both rails (NEZHA_MIN_RAIL_PIECE=16 B) return without
    a vote (session 20: only one-slice ones did). A rail cut under one (a deaf rank, a
    stalled or reset link) leaves ranks a collective behind with a slice unfinished: they
    re-run it with the ranks ahead and finish the other where it is. Every result exact:
    allreduce (AVG on floats too), allgather, reduce_scatter, alltoall, broadcast, reduce,
    and the same on kept buffers (the fast path, which striped lazy calls now take)."""
    def inject(table, ranks):
        for k in range(3):
            fault_cycle(table, ranks, lambda: _cut(table, k, bits), runs=40)

    results, out = _run(tmp_path, "small", transport, inject, STRIPED[transport])
    assert all(results), out
    for r in results:
        assert r["error"] is None and r["wrong"] == 0 and r["done"] > 100, (r, out)
    assert sum(e["event"] == "down" for e in results[0]["events"]) >= 2, results[0]["events"]
    assert all(results[0]["alive"].values()), results[0]["alive"]


def _deafen_at_each_pause(tmp_path):
    """(dir, inject): at each of 4 pauses of the ranks (failover_worker._pause, files in
    dir, apart from the ranks' ready.{rank}) rank 3 (then 2) goes deaf on rail k % 2 while
    they run what follows the pause, is healed 0.8 s later and re-admitted."""
    d = tmp_path / "inject"
    d.mkdir()

    def inject(table, ranks):
        for k in range(4):
            (d / f"arm.{k}").write_text("")
            deadline = time.time() + 60
            while not all((d / f"paused.{k}.{r}").exists() for r in range(4)):
                assert time.time() < deadline, f"the ranks did not pause ({k})"
                time.sleep(0.02)
            table.deafen(k % 2, [3 - k % 2], 4)
            (d / f"go.{k}").write_text("")
            time.sleep(0.8)
            table.heal()
            time.sleep(1.5)  # the rail is re-admitted
        ranks.wait("every rail alive at the end", lambda st: all(s["alive"] for s in st))

    return d, inject


def test_ranks_behind_in_a_striped_small_collective_are_helped(tmp_path):
    """Small allgathers and reduce_scatters striped over both rails (recursive doubling of
    blocks, NEZHA_MIN_RAIL_PIECE=16 B). Each fault is set while the ranks wait
    (failover_worker._pause), then they run one such collective: rank 3 (then 2) goes deaf
    on one rail, so ranks 0 and 2 (1 and 3) finish it and return (lazy: no vote), the
    others cannot finish that rail's slice. They are helped: all four re-run that slice
    over a fresh connection (a "rerun" event on rank 0), the ranks behind finish the other
    slice where it was; every result exact (also an AVG allreduce of floats and a sum,
    whole on one rail). Before session 20 a striped one voted at its end: no rank was ever
    behind in one (no allgather or reduce_scatter "rerun" event: this test failed)."""
    d, inject = _deafen_at_each_pause(tmp_path)
    env = {"NEZHA_MIN_RAIL_PIECE": "16", "TEST_INJECT_DIR": str(d), "TEST_PAUSE_MIX": "1"}
    results, out = _run(tmp_path, "small", "loop", inject, env)
    assert all(results), out
    for r in results:
        assert r["error"] is None and r["wrong"] == 0, (r, out)
    reruns = {e["collective"] for e in results[0]["events"] if e["event"] == "rerun"}
    assert {"allgather", "reduce_scatter"} <= reruns, (results[0]["events"], out)
    assert all(results[0]["alive"].values()), results[0]["alive"]


@pytest.mark.parametrize("bits", ["deaf", "stall", "reset"])
def test_fast_path_collectives_survive_faults(tmp_path, bits):
    """Faults while the ranks repeat allreduce, broadcast, allgather, reduce_scatter and
    alltoall on the same buffers (the fast path, fastpath.pxi: a run it cannot finish goes
    on in the executor): every result exact, the rail re-admitted, most calls fast."""
    def inject(table, ranks):
        for k in range(3):
            fault_cycle(table, ranks, lambda: _cut(table, k, bits), runs=40)

    results, out = _run(tmp_path, "kept", "loop", inject)
    assert all(results), out
    for r in results:
        assert r["error"] is None and r["wrong"] == 0 and r["done"] > 100, (r, out)
        assert r["fast"] > r["done"], r  # five collectives a call, most of them fast
    assert sum(e["event"] == "down" for e in results[0]["events"]) >= 2, results[0]["events"]
    assert all(results[0]["alive"].values()), results[0]["alive"]


@pytest.mark.parametrize("bits,tree", [("deaf", ""), ("stall", ""), ("reset", ""),
                                       ("deaf", "striped-flat"), ("reset", "striped-flat"),
                                       ("stall", "striped")])
def test_small_broadcasts_survive_faults(tmp_path, bits, tree):
    """Faults while the ranks run small broadcasts three in a row, the root turning (a lazy
    tree whose root and inner ranks return once their sends are handed to the rail, then the
    allreduce that follows such a tree, then a tree; failover_worker.bcasts), some on kept
    buffers (the fast path), the roots' buffers overwritten after each call, then an
    allgather striped over both rails (a cut of the rail the broadcasts do not use is met
    there): every result exact, the rail re-admitted. tree: the trees striped over both
    rails and/or in one round (TEST_TREE, tests/_tree.py): a cut meets a slice of each."""
    def inject(table, ranks):
        for k in range(3):
            fault_cycle(table, ranks, lambda: _cut(table, k, bits), runs=40)

    results, out = _run(tmp_path, "bcast", "loop", inject, {"NEZHA_MIN_RAIL_PIECE": "16",
                                                            "TEST_TREE": tree})
    assert all(results), out
    for r in results:
        assert r["error"] is None and r["wrong"] == 0 and r["done"] > 100, (r, out)
    assert sum(e["event"] == "down" for e in results[0]["events"]) >= 2, results[0]["events"]
    assert all(results[0]["alive"].values()), results[0]["alive"]


@pytest.mark.parametrize("tree", ["", "striped-flat"])
def test_ranks_two_behind_a_lazy_tree_are_helped(tmp_path, tree):
    """The fault is set while the ranks wait (failover_worker._pause), then they run an
    allreduce, a small broadcast from rank k (a lazy tree), the one after it and an
    allreduce. Rank 3 (then 2) deaf on one rail: the rank it feeds and it cannot finish the
    allreduce, while the others finish it and the tree (its root returns at once) and wait
    in the next: two collectives ahead. They re-run the allreduce from the copy kept for it
    (RunState.pending_prev), then the tree from the root's kept copy over a fresh connection
    ("rerun" events for both on rank 0); every result exact. On main there was no lazy tree
    (a small broadcast ran as an allreduce): no broadcast was ever re-run for a rank behind
    (this failed)."""
    d, inject = _deafen_at_each_pause(tmp_path)
    env = {"TEST_INJECT_DIR": str(d), "TEST_PAUSE_CAUGHT": "bcast", "TEST_TREE": tree}
    results, out = _run(tmp_path, "small", "loop", inject, env)
    assert all(results), out
    for r in results:
        assert r["error"] is None and r["wrong"] == 0, (r, out)
    reruns = [e["collective"] for e in results[0]["events"] if e["event"] == "rerun"]
    assert "broadcast" in reruns and "allreduce" in reruns, (results[0]["events"], out)
    assert all(results[0]["alive"].values()), results[0]["alive"]


def test_ranks_behind_a_lazy_hier_broadcast_are_helped(tmp_path):
    """2 hosts x 2 ranks, hierarchical broadcasts striped over both rails (NEZHA_ALGO=hier,
    NEZHA_MIN_RAIL_PIECE=16 B) of 1 KiB-256 KiB, caught by a fault set while the ranks wait
    (failover_worker._pause, _caught "hbcast"): rank 3 (then 2) deaf on one rail, so the
    ranks of host 1 cannot finish that rail's slice while those of host 0 finish the
    broadcast and return (lazy: no closing vote since session 29). They are helped: all
    four re-run the slice over a fresh connection, the root sending the copy it kept (it
    zeroed its buffer after the call); every result exact against numpy. Until session 29
    a hierarchical broadcast ended with a vote (~1 ms at 2 x 4): no rank was ever behind
    in one, and this failed with no broadcast "rerun" event."""
    d, inject = _deafen_at_each_pause(tmp_path)
    env = {"NEZHA_ALGO": "hier", "NEZHA_MIN_RAIL_PIECE": "16", "TEST_INJECT_DIR": str(d),
           "TEST_PAUSE_CAUGHT": "hbcast"}
    results, out = _run(tmp_path, "small", "loop+shm-hier", inject, env)
    assert all(results), out
    for r in results:
        assert r["error"] is None and r["wrong"] == 0, (r, out)
    reruns = [e["collective"] for e in results[0]["events"] if e["event"] == "rerun"]
    assert "broadcast" in reruns, (results[0]["events"], out)
    assert all(results[0]["alive"].values()), results[0]["alive"]


def test_last_rail_lost_is_an_error(tmp_path):
    """Rank 2 stalled on both rails: every rank raises, naming rank 2, well before the
    collective timeout."""
    def inject(table, ranks):
        for rail in (0, 1):
            table.cut(rail, [2], [0, 1, 3])
        ranks.exited("rank 2 lost both rails")

    t0 = time.time()
    results, out = _run(tmp_path, "allreduce", "loop", inject)
    assert all(results), out
    for r in results:
        assert r["error"] in ("RailSystemError", "PeerUnreachable", "PeerError", "NezhaTimeout"), (r, out)
        assert r["wrong"] == 0 and r["t"] - t0 < 25, r
    text = " ".join(r["msg"] for r in results)
    assert "rank 2" in text and "every rail" in text, text


def test_corrupted_header_is_an_error_naming_peer_and_rail(tmp_path):
    """A collective header corrupted on the wire is a mismatch: no wrong sum, no hang; the
    rank that received it names the collective, its sequence number, the peer and the rail,
    and every rank raises."""
    def inject(table, ranks):
        table.set(1, 2, 0, fault.CORRUPT)  # rank 1's next header to rank 2 on rail 0
        ranks.exited("a corrupted header")

    results, out = _run(tmp_path, "allreduce", "loop", inject, {"NEZHA_FAILOVER": "n"})
    assert all(results), out
    for r in results:
        assert r["error"] is not None and r["wrong"] == 0, (r, out)
    got = next(r for r in results if r["error"] == "CollectiveMismatch")
    assert "rank 1" in got["msg"] and "loop0" in got["msg"] and "#" in got["msg"], got


def test_killed_rank_is_an_error(tmp_path):
    table, stop, procs = _start(tmp_path, "allreduce", "loop")
    try:
        _ready(tmp_path, procs)
        procs[3].kill()
        procs[3].wait()
        results, out = _finish(stop, procs[:3], timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(results), out
    for r in results:
        assert r["error"] == "PeerError" and "rank 3" in r["msg"] and r["wrong"] == 0, r
