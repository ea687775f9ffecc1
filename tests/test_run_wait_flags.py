"""What a run sleeps on is that run's own: an endpoint's want_in/want_out (the directions
nz_progress polls it for) must not outlive the run that set them.

A run that ends while an endpoint still waits (a channel set aside by failover, a deadline,
an error) left the flag set, and nz_build_queues reset only the queues. The next run polled
that endpoint although it had nothing to do there: for POLLOUT on a writable socket, or
POLLIN with bytes no op of this run reads, poll() returned at once, nothing moved, and the
loop polled again, for as long as the run waited (issue 14, session 26). With
NEZHA_PROGRESS_SCHED=auto/fifo the run is a SCHED_FIFO 1 progress thread, and two ranks
doing so kept both cores of a 2-core machine from every other rank's progress thread (same
priority: FIFO does not share the core): those never sent, and every rank waited to receive
until NEZHA_TIMEOUT (test_presnap's queued iallreduces across a stalled loop rail, 3 copies
at once: the stale flags were on the endpoints of the re-admitted rail).

Two engines in this process over socket pairs (as tests/enginefuzz.py), two channels.
Run 1: rank 0 alone on channel 0 waits to send (its endpoint stalled by the fault layer)
or to receive, until a deadline. Run 2: an allreduce of both ranks on channel 1, rank 1
joining 0.3 s late; rank 0 has nothing on channel 0 (the stall healed: its socket writable;
or bytes waiting there). Its polls are counted (Engine.run_polls): a sleeping run polls a
handful of times, the old loop thousands. Sums exact."""
import socket
import threading
import time

import numpy as np
import pytest

from nezha._core import engine as _eng
from nezha.types import DType, ReduceOp

N = 1000
# a run waiting 0.3 s polls a few times (it sleeps up to 1 s per poll); the loop polled
# tens of thousands of times in that wait
MAX_POLLS = 200


def _schedule(rank, seq, chan, out, a):
    s = _eng.Schedule(rank, 2, 2, _eng.COLL_ALLREDUCE, seq, int(DType.INT64),
                      int(ReduceOp.SUM), N, 0, 0, 7)
    _eng.rd_allreduce(s, chan, out.ctypes.data, a.ctypes.data, N)
    return s


@pytest.mark.timeout(60)
@pytest.mark.parametrize("waited", ["send", "receive"])
def test_a_run_does_not_poll_for_what_an_earlier_run_waited_for(waited):
    c0, c0_peer = socket.socketpair()  # channel 0: rank 0 <-> rank 1
    c1, c1_peer = socket.socketpair()  # channel 1
    socks = (c0, c0_peer, c1, c1_peer)
    for s in socks:
        s.setblocking(False)
    word = np.zeros(1, np.uint32)      # rank 0's fault word on channel 0
    e0 = _eng.Engine([None, _eng.FaultEndpoint(_eng.TcpEndpoint(c0), word, 0), None,
                      _eng.TcpEndpoint(c1)], 2, 2, [], 1 << 16)
    e1 = _eng.Engine([_eng.TcpEndpoint(c0_peer), None, _eng.TcpEndpoint(c1_peer), None],
                     2, 2, [], 1 << 16)
    keep = []
    try:
        for e in (e0, e1):
            e.set_spin(0)  # no busy-poll phase by design: every poll counted is a wait's
        # run 1: rank 0 alone on channel 0 until its deadline, waiting to send (stalled)
        # or to receive (nothing comes)
        if waited == "send":
            word[0] = _eng.FAULT_STALL_TX
        a, out = np.arange(N, dtype=np.int64), np.zeros(N, np.int64)
        s = _schedule(0, 1, 0, out, a)
        keep += [a, out, s]
        assert e0.start(s) == _eng.ERR_OK
        assert e0.progress(s, _eng.now_ns() + int(0.05e9)) == _eng.ERR_TIMEOUT
        word[0] = 0                       # healed: channel 0's socket takes bytes again
        if waited == "receive":
            c0_peer.send(b"\x01" * 64)    # bytes on channel 0 that run 2 does not read
        # run 2: an allreduce on channel 1, rank 1 0.3 s late
        a0 = np.arange(N, dtype=np.int64) * 3 + 1
        a1 = np.arange(N, dtype=np.int64) * 5 - 7
        out0, out1 = np.zeros(N, np.int64), np.zeros(N, np.int64)
        s0, s1 = _schedule(0, 2, 1, out0, a0), _schedule(1, 2, 1, out1, a1)
        keep += [a0, a1, out0, out1, s0, s1]
        rc1 = []

        def rank1():
            time.sleep(0.3)
            rc = e1.start(s1)
            rc1.append(e1.progress(s1, _eng.now_ns() + int(20e9)) if rc == _eng.ERR_OK else rc)

        t = threading.Thread(target=rank1, name="test-rank1", daemon=True)
        t.start()
        p0 = e0.run_polls()
        assert e0.start(s0) == _eng.ERR_OK
        rc0 = e0.progress(s0, _eng.now_ns() + int(20e9))
        polls = e0.run_polls() - p0
        t.join(30)
        assert not t.is_alive()
        assert rc0 == _eng.ERR_OK and rc1 == [_eng.ERR_OK], (rc0, rc1)
        assert np.array_equal(out0, a0 + a1) and np.array_equal(out1, a0 + a1)
        assert polls < MAX_POLLS, (f"{polls} polls while waiting 0.3 s for rank 1: the run "
                                   f"polled channel 0 for run 1's {waited}")
    finally:
        for s in socks:
            s.close()  # the engines' tcp endpoints do not own their sockets
        e0.close()
        e1.close()
