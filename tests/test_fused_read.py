"""A small message's header and data are read in one transport read (nz_recv_fused,
include/nezha/nezha_engine.h): two engines over a socket pair, the sender's whole stream in
the socket before the receiver starts. Results exact against numpy; a header that differs
still fails the run as a mismatch and leaves the receiver's buffer untouched; larger
messages read the first NZ_FUSE_MAX bytes with the header and the rest straight."""
import socket

import numpy as np
import pytest

from nezha._core import engine as _eng
from nezha.types import DType, ReduceOp

FUSE_MAX = 4096  # NZ_FUSE_MAX


def _pair():
    a, b = socket.socketpair()
    for s in (a, b):
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    e0 = _eng.Engine([None, _eng.TcpEndpoint(a)], 2, 1, [], 1 << 16)
    e1 = _eng.Engine([_eng.TcpEndpoint(b), None], 2, 1, [], 1 << 16)
    return (a, b), e0, e1


def _sched(rank, coll, count, dtype=DType.INT32, seq=5):
    return _eng.Schedule(rank, 2, 1, coll, seq, int(dtype), int(ReduceOp.SUM), count, 1, 0, 7)


def _run(e, s, secs=5.0):
    rc = e.start(s)
    if rc == _eng.ERR_OK:
        rc = e.progress(s, _eng.now_ns() + int(secs * 1e9))
    return rc


@pytest.mark.parametrize("count", [1, 2, 7, 256, 1000, FUSE_MAX // 4, FUSE_MAX // 4 + 1, 5000])
def test_a_tree_message_is_one_read_up_to_the_fuse_size(count):
    socks, e0, e1 = _pair()
    try:
        src = (np.arange(count, dtype=np.int64) * 7919 % 100003).astype(np.int32)
        out = np.full(count, -1, np.int32)
        s1, s0 = _sched(1, _eng.COLL_BROADCAST, count), _sched(0, _eng.COLL_BROADCAST, count)
        _eng.tree_broadcast(s1, 0, 1, src.ctypes.data, count, True)   # root 1 sends
        _eng.tree_broadcast(s0, 0, 1, out.ctypes.data, count, True)   # rank 0 receives
        assert _run(e1, s1) == _eng.ERR_OK  # a root's sends: done once handed over
        assert _run(e0, s0) == _eng.ERR_OK
        assert np.array_equal(out, src)
        reads = e0.endpoint_reads()[1]
        nbytes = 4 * count
        # the header with the data (up to NZ_FUSE_MAX of it) in one read; more in a second
        assert reads == (1 if nbytes <= FUSE_MAX else 2), (count, reads)
        assert e0.endpoint_bytes()[1][1] == 32 + nbytes
    finally:
        for e in (e0, e1):
            e.close()
        for s in socks:
            s.close()


@pytest.mark.parametrize("count", [1, 3, 64, 1000])
def test_a_reduced_message_is_one_read_and_exact(count):
    """rd allreduce of 2 ranks: each receives the other's header then data to reduce (the
    data goes through the staging area)."""
    socks, e0, e1 = _pair()
    try:
        a0 = np.arange(1, count + 1, dtype=np.int32)
        a1 = (np.arange(count, dtype=np.int32) * 3 - 5)
        o0, o1 = np.zeros(count, np.int32), np.zeros(count, np.int32)
        s0, s1 = (_sched(r, _eng.COLL_ALLREDUCE, count) for r in (0, 1))
        _eng.rd_allreduce(s0, 0, o0.ctypes.data, a0.ctypes.data, count)
        _eng.rd_allreduce(s1, 0, o1.ctypes.data, a1.ctypes.data, count)
        # rank 1 sends first (its receive then waits); rank 0 finds all of it there
        assert e1.start(s1) == _eng.ERR_OK
        rc1 = e1.progress(s1, _eng.now_ns() + int(0.05e9))
        assert rc1 in (_eng.ERR_OK, _eng.ERR_TIMEOUT)
        assert _run(e0, s0) == _eng.ERR_OK
        assert np.array_equal(o0, a0 + a1)
        assert e0.endpoint_reads()[1] == 1
        if rc1 != _eng.ERR_OK:  # rank 1 goes on where it stopped: rank 0's bytes are there
            assert e1.progress(s1, _eng.now_ns() + int(5e9)) == _eng.ERR_OK
        assert np.array_equal(o1, a0 + a1)
        assert e1.endpoint_reads()[0] == 1
    finally:
        for e in (e0, e1):
            e.close()
        for s in socks:
            s.close()


@pytest.mark.parametrize("count", [1, 100])
def test_a_header_that_differs_fails_and_writes_nothing(count):
    socks, e0, e1 = _pair()
    try:
        src = np.full(count, 9, np.int32)
        out = np.full(count, -1, np.int32)
        s1 = _sched(1, _eng.COLL_BROADCAST, count, seq=6)  # another collective's number
        s0 = _sched(0, _eng.COLL_BROADCAST, count, seq=5)
        _eng.tree_broadcast(s1, 0, 1, src.ctypes.data, count, True)
        _eng.tree_broadcast(s0, 0, 1, out.ctypes.data, count, True)
        assert _run(e1, s1) == _eng.ERR_OK
        assert _run(e0, s0) == _eng.ERR_MISMATCH
        assert np.array_equal(out, np.full(count, -1, np.int32))
    finally:
        for e in (e0, e1):
            e.close()
        for s in socks:
            s.close()
