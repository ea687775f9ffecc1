"""The health thread, in-process (two ranks as threads over two loop rails, as in
tests/test_hygiene.py): the window of Engine.heard_rails (nz_heard_rails) that
Failover._heard_lately relies on, and stopping the thread from several threads at once
(teardown by the caller and by the guard thread; nz_health_stop, Communicator._teardown)."""
import os
import threading
import time

import pytest

import nezha
from nezha.bootstrap.env import EnvBootstrap
from tests.spawn import free_port

SECRET = bytes.fromhex("5e" * 32)
CONFIG = {"RAILS": "loop", "LOOP_RAILS": "2", "CONNECT_TIMEOUT": "10",
          "RAIL_TIMEOUT": "0.25", "HEARTBEAT": "0.02"}
ALL = 0b11  # both loop rails


def pair(body, config=CONFIG, timeout=30.0):
    """Ranks 0 and 1 in two threads, body(comm, sync) each (sync: a 2-party barrier);
    returns what each body returned. Re-raises a rank's exception; every wait times out."""
    port, out, errs = free_port(), [None, None], [None, None]
    sync = threading.Barrier(2, timeout=timeout)

    def rank(r):
        comm = None
        try:
            boot = EnvBootstrap(r, 2, "127.0.0.1", port, SECRET, local_rank=r, timeout=10)
            comm = nezha.Communicator(boot, timeout=5.0, config=config)
            out[r] = body(comm, sync)
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            errs[r] = exc
            sync.abort()  # the other rank must not wait for this one
        finally:
            if comm is not None:
                comm.close()

    ts = [threading.Thread(target=rank, args=(r,), name=f"test-rank{r}") for r in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout + 30)
        assert not t.is_alive(), f"{t.name} hung"
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
