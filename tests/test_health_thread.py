"""The health thread, in-process (two ranks as threads over two loop rails, as in
tests/test_hygiene.py): the window of Engine.heard_rails (nz_heard_rails) that
Failover._heard_lately relies on, and stopping the thread from several threads at once
(teardown by the caller and by the guard thread; nz_health_stop, Communicator._teardown)."""
import os
import threading
import time

import numpy as np
import pytest

import nezha
from tests.test_hygiene import pair as hygiene_pair

CONFIG = {"RAILS": "loop", "LOOP_RAILS": "2", "CONNECT_TIMEOUT": "10",
          "RAIL_TIMEOUT": "0.25", "HEARTBEAT": "0.02"}
ALL = 0b11  # both loop rails
CONFIG_RAIL_TIMEOUT = float(CONFIG["RAIL_TIMEOUT"])


def pair(body, config=CONFIG, timeout=30.0):
    """tests/test_hygiene.py's pair with body(comm, sync) (sync: a 2-party barrier, every
    wait timed out): returns what each body returned, re-raises a rank's exception."""
    out, errs = [None, None], [None, None]
    sync = threading.Barrier(2, timeout=timeout)

    def each(comm):
        try:
            out[comm.rank] = body(comm, sync)
        except BaseException as exc:  # noqa: BLE001 - raised again below
            errs[comm.rank] = exc
            sync.abort()  # the other rank must not wait for this one

    hygiene_pair(each, config=config)
    for e in errs:  # the first real error, not the BrokenBarrierError it caused
        if e is not None and not isinstance(e, threading.BrokenBarrierError):
            raise e
    for e in errs:
        if e is not None:
            raise e
    return out


@pytest.mark.timeout(90)
def test_heard_rails_window():
    """Rank 1 stops its health thread (its sockets stay open, so nothing is closed: only
    silence). Rank 0 must then answer by the window it is given, not by the rail timeout
    (0.25 s): this fails if nz_heard_rails ignored quiet_ns. Failover._heard_lately (the
    rails a vote that would leave none may take back) uses the peer-lost wait, max(1 s,
    2 x RAIL_TIMEOUT) = 1 s here; a closed connection is never heard, whatever the window."""
    def body(comm, sync):
        nrails = len(comm._mesh.rails)
        assert nrails == 2
        eng = comm._engine
        sync.wait()
        if comm.rank == 1:
            eng.close()       # no more heartbeats from rank 1
            sync.wait()       # rank 0 looked at the silence
            sync.wait()       # rank 0 looked again later
            comm._mesh.close()  # now its control connections close
            sync.wait()
            return None
        # both health threads run: everything heard, by any window the heartbeats meet
        assert eng.heard_rails(nrails, 0, 0.0) == ALL
        assert comm._fo._heard_lately(nrails) == ALL
        time.sleep(0.6)       # rank 1 silent 0.6 s: > RAIL_TIMEOUT, < the peer-lost wait
        got = dict(default=eng.heard_rails(nrails, 0, 0.0),
                   short=eng.heard_rails(nrails, 0, 0.0, 0.25),
                   long=eng.heard_rails(nrails, 0, 0.0, 30.0),
                   steady=eng.heard_rails(nrails, 0, 3600.0, 30.0),
                   lately=comm._fo._heard_lately(nrails))
        sync.wait()
        assert got == dict(default=0, short=0, long=ALL, steady=0, lately=ALL), got
        time.sleep(0.6)       # 1.2 s: past the peer-lost wait
        lately = comm._fo._heard_lately(nrails)
        long = eng.heard_rails(nrails, 0, 0.0, 30.0)
        sync.wait()
        assert (lately, long) == (0, ALL)
        sync.wait()           # rank 1 closed its control connections
        end = time.monotonic() + 10
        while time.monotonic() < end and not all(
                eng.rail_silence(r, 1)[1] for r in range(nrails)):
            time.sleep(0.02)
        assert all(eng.rail_silence(r, 1)[1] for r in range(nrails)), "closes not seen"
        assert eng.heard_rails(nrails, 0, 0.0, 3600.0) == 0  # closed: never heard
        return None

    pair(body)


@pytest.mark.timeout(90)
def test_readmission_steadiness_starts_over_at_a_failure():
    """The steadiness that re-admission asks for (heard_rails with a steady window, the
    NEZHA_READMIT vote) counts from the rail's failure here (Engine.restart_steady, called
    when failover closes a channel) and breaks on a silence going on now. Session 21: a rail
    whose data connections were reset came back at the next vote, milliseconds later, and
    failed again at once, a dozen times before its silence reached the rail timeout
    (tests/test_loop_faults.py). Before, restart_steady did not exist and a peer silent for
    0.15 s counted as heard steadily (since[] learns of a gap only once the peer is heard)."""
    def body(comm, sync):
        nrails = len(comm._mesh.rails)
        eng = comm._engine
        sync.wait()
        if comm.rank == 1:
            sync.wait()       # rank 0 saw rail 0 fail and come back
            eng.close()       # no more heartbeats from rank 1 (its sockets stay open)
            sync.wait()
            return None
        # heard without a gap for 0.3 s (a loaded machine may delay a heartbeat: poll)
        assert _until(lambda: eng.heard_rails(nrails, 0, 0.3) == ALL), "never steady"
        eng.restart_steady(0)  # rail 0 failed here
        t0 = time.monotonic()
        assert eng.heard_rails(nrails, 0, 0.3) == 0b10      # steady again only later
        assert eng.heard_rails(nrails, 0, 0.0) == ALL       # but heard all along
        assert _until(lambda: eng.heard_rails(nrails, 0, 0.3) == ALL), "rail 0 not back"
        assert time.monotonic() - t0 >= 0.3
        sync.wait()
        time.sleep(0.15)      # rank 1 silent: more than 3 heartbeats (a gap), going on
        got = (eng.heard_rails(nrails, 0, 0.3, 30.0), eng.heard_rails(nrails, 0, 0.0, 30.0))
        sync.wait()
        assert got == (0, ALL), got
        return None

    pair(body)


def _until(cond, timeout=10.0):
    """Poll cond every 10 ms until it holds (True) or timeout passes (False)."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def _native_tids():
    """Threads of this process that Python did not start (the C health threads, and any
    a library such as OpenBLAS started)."""
    py = {t.native_id for t in threading.enumerate()}
    return {int(t) for t in os.listdir("/proc/self/task")} - py


def _gone(tid, wait=0.2):
    """Thread tid has left /proc within wait seconds (a joined thread's task is reaped just
    after pthread_join returns; one still running stays for up to its poll interval)."""
    end = time.monotonic() + wait
    while os.path.exists(f"/proc/self/task/{tid}"):
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


# 0.5 s heartbeats: a stopped health thread ends only when its poll() returns, up to
# 0.5 s later, so concurrent stoppers really overlap in nz_health_stop
SLOW = dict(CONFIG, HEARTBEAT="0.5", RAIL_TIMEOUT="2")
STOPPERS = 4


def _together(fns, timeout=20.0):
    """Run fns in threads released at once; returns [(result or exception, seconds)]."""
    go = threading.Barrier(len(fns), timeout=timeout)
    out = [None] * len(fns)

    def run(i):
        try:
            go.wait()
            t0 = time.monotonic()
            out[i] = (fns[i](), time.monotonic() - t0)
        except BaseException as exc:  # noqa: BLE001 - the test asserts on it
            out[i] = (exc, None)

    ts = [threading.Thread(target=run, args=(i,), name=f"test-stop{i}", daemon=True)
          for i in range(len(fns))]  # daemon: one that hangs must not hold pytest's exit
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout + 10)
    assert not any(t.is_alive() for t in ts), "a stopper hung"
    return out


@pytest.mark.timeout(120)
def test_health_thread_stopped_from_threads_at_once():
    """Engine.close (nz_health_stop, without the GIL) from several threads at once: every
    call returns, and only once the health thread has ended. Before f046ff5 each caller
    that saw `started` joined: glibc fails the second concurrent pthread_join with EINVAL,
    so that caller went on (to close the fds and free what the thread uses) while the
    thread still ran, and a join after the first had ended could join whichever thread
    reused the descriptor (the fuzzer's rank 0 hung there)."""
    base = _native_tids()

    def body(comm, sync):
        sync.wait()
        mine = _native_tids() - base  # both ranks' health threads
        sync.wait()
        if comm.rank == 1:
            comm._engine.close()  # one health thread left: rank 0's
            sync.wait()
            sync.wait()
            return None
        sync.wait()
        left = _native_tids() - base
        assert len(mine) == 2 and len(left) == 1 and left < mine, (mine, left)
        tid = left.pop()
        res = _together([lambda: (comm._engine.close(), _gone(tid))[1]] * STOPPERS)
        sync.wait()
        return tid, res

    (tid, res), _ = pair(body, config=SLOW)
    assert all(r is True for r, _ in res), res  # each returned after the thread had ended
    assert not os.path.exists(f"/proc/self/task/{tid}")


@pytest.mark.timeout(120)
def test_communicator_closed_from_threads_at_once():
    """close() from two threads while the guard's path (_fail, as _guard_look does on an
    error) tears the communicator down too: all return well within the timeout, none
    raises, and the communicator's threads (health, guard) end."""
    base, old = _native_tids(), set(threading.enumerate())  # earlier tests' guards may linger

    def body(comm, sync):
        sync.wait()
        mine = _native_tids() - base
        guard = [t for t in threading.enumerate() if t.name == "nezha-guard" and t not in old]
        sync.wait()
        if comm.rank == 1:
            sync.wait()
            return None
        assert len(mine) == 2 and len(guard) == 2, (mine, guard)
        res = _together([comm.close, comm.close,
                         lambda: comm._fail(nezha.NezhaError("test: the guard's error"))])
        sync.wait()
        return mine, guard, res

    (mine, guard, res), _ = pair(body, config=SLOW)
    assert all(r is None and s < 10 for r, s in res), res
    end = time.monotonic() + 10  # rank 1's close too; the guards wake within 1 s
    for t in guard:
        t.join(max(0.0, end - time.monotonic()))
    while time.monotonic() < end and _native_tids() & mine:
        time.sleep(0.05)
    assert not _native_tids() & mine, "a health thread outlived close"
    assert not any(t.is_alive() for t in guard), "a guard thread outlived close"


@pytest.mark.timeout(120)
def test_second_close_waits_for_the_first():
    """A close() from a second thread while the first is still settling (voting for a rank
    behind, which takes a while): the first holds the run (busy) until it has torn down, and
    the second waited for busy alone, so it waited forever."""
    def body(comm, sync):
        sync.wait()
        if comm.rank == 1:
            sync.wait()
            return None
        settle = comm._fo.settle

        def slow_settle():  # as a vote in settle would: the GIL free, the run ours
            time.sleep(0.5)
            settle()

        comm._fo.settle = slow_settle
        first = threading.Thread(target=comm.close, name="test-close1", daemon=True)
        first.start()
        time.sleep(0.1)   # the first is in settle now
        res = _together([comm.close], timeout=10.0)
        first.join(10)
        sync.wait()
        return res, first.is_alive()

    (res, first_alive), _ = pair(body, config=SLOW)
    assert not first_alive
    assert all(r is None and s < 5 for r, s in res), res


@pytest.mark.timeout(90)
@pytest.mark.parametrize("stalled", ["first", "every-but-one"])
def test_vote_copy_lost_is_sent_again_on_a_poke(tmp_path, stalled):
    """A vote's STATUS goes once per peer, on the first live rail (nz_vote). Rank 1's
    control endpoint towards rank 0 on rail 0 drops what it sends (a one-way stall shorter
    than the rail timeout): rank 1 has rank 0's copy and leaves the vote, rank 0 has not
    got rank 1's. Rank 0 must poke rank 1 and get its copy again over rail 1, answered by
    rank 1's health thread while rank 1 waits elsewhere. Without the resend and poke rank 0
    waits out the vote's deadline (NezhaTimeout); with copies on every rail (the old way)
    no resend is counted."""
    from nezha._core import engine as _eng
    from nezha.transports import fault
    path = str(tmp_path / "faults")
    table = fault.FaultTable.create(path)
    config = dict(CONFIG, FAULTS=path, RAIL_TIMEOUT="5")
    if stalled == "every-but-one":
        config["LOOP_RAILS"] = "3"

    def body(comm, sync):
        fo = comm._fo
        fo._vote(None, comm._st.ncoll, 0, 0)       # both connected and voting
        sync.wait()
        if comm.rank == 1:
            nrails = len(comm._mesh.rails)
            for r in range(nrails - 1):            # only the last rail carries rank 1's copy
                table.set(1, 0, fault.CTRL + r, _eng.FAULT_STALL_TX)
        sync.wait()
        table_seen, _ = fo._vote(None, comm._st.ncoll, 0, 0)
        sync.wait()                                # rank 1 waits here while rank 0 votes on
        table.heal()
        sync.wait()
        return table_seen, comm._engine.vote_counts()

    (t0, c0), (t1, c1) = pair(body, config=config)
    assert t0 == t1                                # every rank decides from the same table
    assert c0[0] >= 1, c0                          # rank 0 sent again and poked
    assert c1[1] >= 1, c1                          # rank 1 answered


# polls a second of heartbeats asks for: its own beats, and one wake-up per frame from
# each of the 2 rails (0.02 s apart), ~150; a busy loop polls hundreds of thousands
POLLS_PER_S = 1000


def _polls_over(eng, fn):
    p0 = eng.health_counts()[0]
    fn()
    return eng.health_counts()[0] - p0


@pytest.mark.timeout(90)
def test_health_thread_sleeps_while_another_reader_holds_an_endpoint():
    """Rank 0 holds its control endpoint to rank 1 on rail 0 for 1 s (Engine.hold_ctrl_read:
    as the engine holds it while it reads there, descheduled in the middle) while rank 1's
    heartbeats arrive on it. The health thread must leave that endpoint to its reader and
    sleep; before, its read was refused (trylock), the socket stayed readable and it polled
    again at once: a busy loop for as long as the reader held it, which at SCHED_FIFO 2 on a
    crowded machine kept the reader (lower priority, same core) from ever finishing
    (session 23: a DDP job's health threads spun a core each and the job never ended)."""
    def body(comm, sync):
        eng = comm._engine
        sync.wait()
        if comm.rank == 1:
            sync.wait()
            return None
        held = []
        polls = _polls_over(eng, lambda: held.append(eng.hold_ctrl_read(0 * comm.size + 1, 1.0)))
        ok = eng.heard_rails(2, 0, 0.0, 30.0)
        sync.wait()
        return held, polls, ok

    (held, polls, ok), _ = pair(body)
    assert held == [True]
    assert polls < POLLS_PER_S, f"{polls} polls in 1 s: the health thread spun"
    assert ok == ALL  # both rails still heard: the hold delayed nothing for long



@pytest.mark.timeout(90)
def test_heartbeats_go_on_while_another_writer_holds_an_endpoint():
    """Rank 0 holds its control endpoint to rank 1 on rail 0 for 1 s for writing
    (Engine.hold_ctrl_write: as a thread sending a vote or an abort there holds it,
    descheduled in the middle). Rank 0's health thread must skip that heartbeat and go on:
    before, it waited for the lock, and no heartbeat went out on any rail for as long as
    the writer held it (at SCHED_FIFO 2, behind an ordinary writer kept off the cores by
    real-time progress threads: false silences on every rail). Checked by counts: rank 0
    polls, skips, and rank 1 hears rank 0 on rail 1 within the rail timeout mid-hold."""
    def body(comm, sync):
        eng = comm._engine
        sync.wait()
        if comm.rank == 1:
            sync.wait()                       # rank 0 holds from here
            time.sleep(0.6)
            quiet = eng.rail_silence(1, 0)    # rail 1 from rank 0, mid-hold
            sync.wait()
            return quiet
        held = []
        hold = threading.Thread(target=lambda: held.append(_hold(eng, 1, 1.0, write=True)),
                                name="test-hold", daemon=True)
        c0 = eng.health_counts()
        hold.start()
        sync.wait()
        hold.join(10)
        c1 = eng.health_counts()
        sync.wait()
        return held, c1[0] - c0[0], c1[2] - c0[2]

    (held, polls, skipped), (secs, closed) = pair(body)
    assert held == [True]
    assert skipped >= 1, "no heartbeat skipped: the writer's hold went unnoticed"
    assert polls >= 10, f"{polls} polls in 1 s: the health thread waited for the writer"
    assert not closed and secs < CONFIG_RAIL_TIMEOUT, f"rail 1 silent {secs:.2f} s mid-hold"


def _hold(eng, i, seconds, write=False):
    """Engine.hold_ctrl_read (or _write), again until the lock was free (the health thread
    may be reading there, or sending a heartbeat, that instant)."""
    end = time.monotonic() + 5
    while not (eng.hold_ctrl_write if write else eng.hold_ctrl_read)(i, seconds):
        assert time.monotonic() < end, "never free"
        time.sleep(0.001)
    return True


@pytest.mark.timeout(90)
def test_run_sleeps_while_another_reader_holds_an_endpoint():
    """Rank 0's allreduce waits ~0.8 s for rank 1 while rank 0's control endpoint to rank 1
    on rail 0 is held for 1 s (as the health thread holds it while it reads there, descheduled in
    the middle) and rank 1's heartbeats arrive on it. The run (failover: it reads control
    endpoints itself) must leave that endpoint to its reader and sleep; before, its read was
    refused, the fd stayed ready and it polled again at once. With NEZHA_PROGRESS_SCHED=fifo
    that run is SCHED_FIFO 1 above an ordinary health thread: on a busy core the holder never
    got to finish, and its heartbeats stopped (session 23's false silence, a likely cause).
    Nothing is read there for 1 s: a rail timeout of 2 s keeps that from being a silence."""
    def body(comm, sync):
        eng = comm._engine
        a = np.arange(300_000, dtype=np.int64) + comm.rank  # striped over both rails
        sync.wait()
        if comm.rank == 1:
            time.sleep(0.8)
            comm.allreduce(a)
            return a
        hold = threading.Thread(target=_hold, args=(eng, 1, 1.0), name="test-hold", daemon=True)
        hold.start()
        time.sleep(0.05)
        p0 = eng.run_polls()
        comm.allreduce(a)
        polls = eng.run_polls() - p0
        hold.join(10)
        return a, polls

    (a0, polls), a1 = pair(body, config=dict(CONFIG, RAIL_TIMEOUT="2"))
    want = np.arange(300_000, dtype=np.int64) * 2 + 1
    assert np.array_equal(a0, want) and np.array_equal(a1, want)
    assert polls < POLLS_PER_S, f"{polls} polls in ~1 s: the run spun"


@pytest.mark.timeout(90)
def test_peer_gone_idle_health_thread_sleeps_and_next_collective_raises():
    """Rank 1 vanishes without a goodbye (its health thread stopped, then every socket
    closed, as at os._exit) while rank 0 is idle: over the next second rank 0's health
    thread polls no more than heartbeats ask for (every endpoint to rank 1 is closed, none
    is polled again), and rank 0's next allreduce raises a PeerError naming rank 1 within
    seconds instead of waiting for NEZHA_TIMEOUT."""
    def body(comm, sync):
        eng = comm._engine
        sync.wait()
        if comm.rank == 1:
            eng.close()
            comm._mesh.close()
            sync.wait()
            return None
        sync.wait()
        assert _until(lambda: all(eng.rail_silence(r, 1)[1] for r in range(2))), "closes not seen"
        polls = _polls_over(eng, lambda: time.sleep(1.0))
        t0 = time.monotonic()
        with pytest.raises(nezha.PeerError) as err:
            comm.allreduce(np.arange(1000, dtype=np.int64))
        return polls, time.monotonic() - t0, err.value

    (polls, secs, exc), _ = pair(body)  # the communicators' timeout: 5 s
    assert polls < POLLS_PER_S, f"{polls} polls in 1 s: the health thread spun"
    assert exc.peer == 1 and "rank 1" in str(exc), exc
    assert secs < 3, secs
