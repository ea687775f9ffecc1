"""The engine: schedules of send/receive/reduce ops run over every rail without the GIL."""
# Vocabulary (docs/glossary.md): a *channel* is one lane of one rail (a rail with
# NEZHA_SOCKET_NCONNS=2 has two channels); endpoint index = channel * size + peer.
# A *slice* is the part of a collective's buffer that one channel carries; each builder
# below lays out one algorithm for one slice. Builders run once per collective per
# channel (never per chunk): the pipelining happens inside the C loop.

from cpython.buffer cimport (PyBUF_ANY_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_GetBuffer)
from cpython.bytes cimport PyBytes_FromStringAndSize
from posix.unistd cimport close, usleep
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset

from nezha._core.libnezha cimport *
from nezha._core.reduce cimport nezha_avg_finish

import numpy as np

include "transport.pxi"

COLL_ALLREDUCE = 1
COLL_BROADCAST = 2
COLL_REDUCE = 3
COLL_ALLGATHER = 4
COLL_REDUCE_SCATTER = 5
COLL_ALLTOALL = 6
COLL_BARRIER = 7
COLL_SENDRECV = 8

ERR_OK = NZ_OK
ERR_TIMEOUT = NZ_ERR_TIMEOUT
ERR_CLOSED = NZ_ERR_CLOSED
ERR_SOCKET = NZ_ERR_SOCKET
ERR_MISMATCH = NZ_ERR_MISMATCH
ERR_CTRL = NZ_ERR_CTRL
ERR_REDUCE = NZ_ERR_REDUCE
ERR_INTERNAL = NZ_ERR_INTERNAL
ERR_CHANFAIL = NZ_ERR_CHANFAIL
ERR_VOTE = NZ_ERR_VOTE
OP_BYTES = sizeof(nz_op_t)  # one record of Schedule.ops_bytes()
VOTE_RUNNING = NZ_VOTE_RUNNING
VOTE_CLOSING = NZ_VOTE_CLOSING
WHY_NAMES = {NZ_WHY_ERROR: "transport error", NZ_WHY_CLOSED: "connection closed",
             NZ_WHY_SILENT: "silence", NZ_WHY_PEER: "another rank gave up on it"}
FRAME_ABORT = NZ_FRAME_ABORT

HEADER_BYTES = sizeof(nezha_hdr_t)


def address(object obj):
    """Address of the first byte of a buffer-protocol object (cheaper than numpy's)."""
    cdef Py_buffer view
    PyObject_GetBuffer(obj, &view, PyBUF_ANY_CONTIGUOUS)
    cdef uintptr_t p = <uintptr_t>view.buf
    PyBuffer_Release(&view)
    return p


def set_no_spin(bint on):
    """In the calling thread only: never busy-poll (NEZHA_SPIN_US) while waiting, in runs
    and votes (a real-time progress thread, executor.py)."""
    nz_set_no_spin(on)


def now_ns():
    """CLOCK_MONOTONIC in nanoseconds (the engine's clock)."""
    return nz_now_ns()


cdef bint _hold(pthread_mutex_t *m, double seconds) noexcept nogil:
    """Tests: hold m for seconds as a thread descheduled in the middle of its work would;
    False (at once) if another thread has it."""
    cdef int64_t end
    if pthread_mutex_trylock(m) != 0:
        return False
    end = nz_now_ns() + <int64_t>(seconds * 1e9)
    while nz_now_ns() < end:
        usleep(1000)
    pthread_mutex_unlock(m)
    return True


cdef inline int _mod(int a, int n) noexcept nogil:
    a %= n
    return a + n if a < 0 else a


cdef inline int _gpeer(const int *grp, int n, int k) noexcept nogil:
    # the rank at position k (mod n) of a group; no group: every rank, in rank order
    return grp[_mod(k, n)] if grp != NULL else k


cdef class Schedule:
    """The ops of one collective (or send/recv) on this rank, built by the algorithms."""

    cdef nz_op_t *ops
    cdef int32_t nops, cap
    cdef int rank, size, nchan
    cdef nezha_hdr_t hdr            # what this rank sends and expects
    cdef nezha_hdr_t *hdr_in        # one receive area per endpoint
    cdef uint8_t *hdr_state         # per endpoint: bit 1 header sent, bit 2 header received
    cdef public int dtype, op, esize
    cdef public object keep         # buffers that must outlive the run
    cdef char **pre_dst
    cdef const char **pre_src
    cdef uint64_t *pre_n
    cdef int npre, cappre
    cdef char *avg_ptr[64]
    cdef uint64_t avg_count[64]
    cdef double avg_div
    cdef int navg
    # spin this long (if the engine spins at all) before sleeping: a rank that waits on its
    # host's first rank for a whole cross-host step (rd_hosts.pxi) outlasts NEZHA_SPIN_US
    cdef public int64_t wait_spin_ns

    def __cinit__(self, int rank, int size, int nchan, int coll, uint32_t seq, int dtype,
                  int op, uint64_t count, int root=-1, int algo=0, uint32_t plan=0):
        self.rank, self.size, self.nchan = rank, size, nchan
        self.dtype, self.op = dtype, op
        self.esize = <int>nezha_dtype_size(dtype)
        memset(&self.hdr, 0, sizeof(nezha_hdr_t))
        self.hdr.magic = NEZHA_WIRE_MAGIC
        self.hdr.seq = seq
        self.hdr.coll = <uint8_t>coll
        self.hdr.dtype = <uint8_t>dtype
        self.hdr.op = <uint8_t>op
        self.hdr.algo = <uint8_t>algo
        self.hdr.root = root
        self.hdr.count = count
        self.hdr.plan = plan
        self.hdr.src_rank = rank
        cdef int nep = nchan * size
        self.hdr_in = <nezha_hdr_t *>calloc(nep if nep > 0 else 1, sizeof(nezha_hdr_t))
        self.hdr_state = <uint8_t *>calloc(nep if nep > 0 else 1, 1)
        self.cap = 64
        self.ops = <nz_op_t *>malloc(self.cap * sizeof(nz_op_t))
        self.cappre = 8
        self.pre_dst = <char **>malloc(self.cappre * sizeof(char *))
        self.pre_src = <const char **>malloc(self.cappre * sizeof(char *))
        self.pre_n = <uint64_t *>malloc(self.cappre * sizeof(uint64_t))
        if not (self.hdr_in and self.hdr_state and self.ops and self.pre_dst and self.pre_src
                and self.pre_n):
            raise MemoryError()
        self.keep = []

    def __dealloc__(self):
        free(self.ops)
        free(self.hdr_in)
        free(self.hdr_state)
        free(self.pre_dst)
        free(<void *>self.pre_src)
        free(self.pre_n)

    def ops_complete(self, int32_t start, int32_t end):
        """True if every op in [start, end) has finished."""
        cdef int32_t i
        for i in range(start, min(end, self.nops)):
            if self.ops[i].done < self.ops[i].nbytes:
                return False
        return True

    def moved(self):
        """True once any op has moved a byte."""
        cdef int32_t i
        for i in range(self.nops):
            if self.ops[i].done:
                return True
        return False

    def reset(self, uint32_t seq):
        """Make the schedule runnable again as collective number seq (plan cache)."""
        self.rearm(seq)

    cdef void rearm(self, uint32_t seq) noexcept nogil:
        # reset, for the fast path too (fastpath.pxi)
        cdef int32_t i
        self.hdr.seq = seq
        for i in range(self.nops):
            self.ops[i].done = 0

    cdef void avg(self, int i) noexcept nogil:
        """The AVG division of slice i (after its sums arrived)."""
        nezha_avg_finish(self.avg_ptr[i], self.avg_count[i], self.dtype, self.avg_div)

    @property
    def nops(self):
        """Number of ops."""
        return self.nops

    cdef inline int ep(self, int chan, int peer) noexcept:
        return chan * self.size + _mod(peer, self.size)

    cdef int _push(self, int kind, int ep, char *ptr, const char *src, uint64_t nbytes,
                   int dep0, int dep1, int chan, int flags) except -1:
        cdef nz_op_t *grown
        if self.nops == self.cap:
            grown = <nz_op_t *>realloc(self.ops, 2 * self.cap * sizeof(nz_op_t))
            if grown == NULL:
                raise MemoryError()
            self.ops, self.cap = grown, 2 * self.cap
        cdef nz_op_t *o = &self.ops[self.nops]
        o.ptr, o.src, o.nbytes, o.done = ptr, src, nbytes, 0
        o.ep, o.dep[0], o.dep[1] = ep, dep0, dep1
        o.chan, o.kind, o.flags = chan, kind, flags
        self.nops += 1
        return self.nops - 1

    cdef int hdr_send(self, int ep, int dep, int chan, int flags=NZ_DEP_FULL) except -1:
        self.hdr_state[ep] |= 1
        return self._push(NZ_SEND, ep, <char *>&self.hdr, NULL, sizeof(nezha_hdr_t), dep, -1,
                          chan, flags)

    cdef int hdr_recv(self, int ep, int chan) except -1:
        self.hdr_state[ep] |= 2
        return self._push(NZ_RECV_HDR, ep, <char *>&self.hdr_in[ep], <const char *>&self.hdr,
                          sizeof(nezha_hdr_t), -1, -1, chan, 0)

    cdef int add(self, int kind, int chan, int peer, char *ptr, const char *src,
                 uint64_t nbytes, int dep0=-1, int dep1=-1, int flags=0) except -1:
        """Append an op; the first use of an endpoint in a direction opens with the header."""
        cdef int e = -1
        if kind != NZ_LOCAL_REDUCE:
            e = self.ep(chan, peer)
            if kind == NZ_SEND and not (self.hdr_state[e] & 1):
                # the header leaves with the data's first bytes, in one segment
                self.hdr_send(e, dep0, chan, flags if flags & NZ_DEP_FULL else NZ_DEP_STARTED)
            elif kind != NZ_SEND and not (self.hdr_state[e] & 2):
                self.hdr_recv(e, chan)
        return self._push(kind, e, ptr, src, nbytes, dep0, dep1, chan, flags)

    cdef int pre_copy(self, char *dst, const char *src, uint64_t n) except -1:
        # Local copies done before the network starts (own block of allgather, ...).
        if n == 0 or dst == src:
            return 0
        cdef char **d
        cdef const char **sr
        cdef uint64_t *nn
        if self.npre == self.cappre:  # one copy per slice: grow with the slices
            d = <char **>realloc(self.pre_dst, 2 * self.cappre * sizeof(char *))
            if d == NULL:
                raise MemoryError()
            self.pre_dst = d
            sr = <const char **>realloc(<void *>self.pre_src, 2 * self.cappre * sizeof(char *))
            if sr == NULL:
                raise MemoryError()
            self.pre_src = sr
            nn = <uint64_t *>realloc(self.pre_n, 2 * self.cappre * sizeof(uint64_t))
            if nn == NULL:
                raise MemoryError()
            self.pre_n = nn
            self.cappre *= 2
        self.pre_dst[self.npre], self.pre_src[self.npre], self.pre_n[self.npre] = dst, src, n
        self.npre += 1
        return 0

    def reduce_as(self, int dtype, int op):
        """Reduce with this dtype and op; the header keeps the call's (a small broadcast
        with failover runs as an allreduce that ORs bytes, the other ranks adding zeros)."""
        self.dtype, self.op = dtype, op

    def add_avg(self, uintptr_t ptr, uint64_t count, double divisor):
        """Divide count elements at ptr by divisor once the run has succeeded (AVG)."""
        if self.navg >= 64:
            raise ValueError("too many AVG ranges")
        self.avg_ptr[self.navg], self.avg_count[self.navg] = <char *>ptr, count
        self.avg_div = divisor
        self.navg += 1

    # ---- inspection (tests, error messages) ---------------------------------------

    def op_info(self, int i):
        """(kind, endpoint, nbytes, done, channel) of op i."""
        if i < 0 or i >= self.nops:
            return None
        cdef nz_op_t *o = &self.ops[i]
        return (o.kind, o.ep, o.nbytes, o.done, o.chan)

    def header_address(self):
        """Address of the header this rank sends (every header send op points at it)."""
        return <uintptr_t>&self.hdr

    def header_expected(self):
        """The header this rank sends and expects, as a dict."""
        return _hdr_dict(&self.hdr)

    def header_received(self, int ep):
        """The header that arrived on endpoint ep, as a dict."""
        return _hdr_dict(&self.hdr_in[ep])

    def ops_bytes(self):
        """Every op as raw nz_op_t records, OP_BYTES each (the simulator reads them as a
        numpy record array: nezha/sim/ops.py)."""
        return (<char *>self.ops)[:self.nops * sizeof(nz_op_t)]

    def ops_list(self):
        """Every op as (kind, ep, nbytes, dep0, dep1, chan): for tests of the layouts."""
        return [(self.ops[i].kind, self.ops[i].ep, self.ops[i].nbytes, self.ops[i].dep[0],
                 self.ops[i].dep[1], self.ops[i].chan) for i in range(self.nops)]


# ---- algorithms: one file each, builders over a Schedule ----------------------------
include "algorithms/ring.pxi"
include "algorithms/rd.pxi"
include "algorithms/rd_hosts.pxi"
include "algorithms/barrier_hosts.pxi"
include "algorithms/rab.pxi"
include "algorithms/tree.pxi"
include "algorithms/hier.pxi"
include "algorithms/direct.pxi"


cdef dict _hdr_dict(nezha_hdr_t *h):
    return dict(magic=h.magic, seq=h.seq, coll=h.coll, dtype=h.dtype, op=h.op, algo=h.algo,
                root=h.root, count=h.count, plan=h.plan, src_rank=h.src_rank)


cdef Endpoint _speaks_contract(Endpoint ep):
    """ep (None allowed), if its transport speaks this engine's contract version."""
    if ep is not None and ep.ops.version != NZ_TRANSPORT_VERSION:
        raise ValueError(f"transport {ep.kind}: contract version {ep.ops.version}, "
                         f"this engine speaks {NZ_TRANSPORT_VERSION}")
    return ep


cdef class Engine:
    """Endpoints of one communicator, the loop that runs schedules over them, and the
    health thread that heartbeats on the control endpoints."""

    cdef nz_engine_t e
    cdef nz_health_t h
    cdef public int size, nchan
    cdef bint has_health
    cdef list endpoints      # the Endpoint objects the C endpoints point into
    cdef list ctrl           # the control endpoints, likewise
    cdef uint64_t stage_bytes

    def __cinit__(self, list endpoints, int size, int nchan, list ctrl,
                  uint64_t stage_bytes, double heartbeat=0.01):
        cdef int i, nep = len(endpoints), n = len(ctrl)
        if nep != size * nchan:
            raise ValueError("need one endpoint (or None) per channel and peer")
        memset(&self.e, 0, sizeof(nz_engine_t))
        memset(&self.h, 0, sizeof(nz_health_t))
        self.size, self.nchan = size, nchan
        self.e.nep = nep
        self.e.eps = <nz_ep_t *>calloc(nep if nep else 1, sizeof(nz_ep_t))
        self.e.nchan = nchan
        self.e.chan_ns = <int64_t *>calloc(nchan + 1, sizeof(int64_t))
        self.e.chan_bytes = <uint64_t *>calloc(nchan + 1, sizeof(uint64_t))
        self.e.chan_rail = <int32_t *>calloc(nchan + 1, sizeof(int32_t))
        self.e.fail_why = <uint8_t *>calloc(nchan + 1, 1)
        self.e.fail_peer = <int32_t *>calloc(nchan + 1, sizeof(int32_t))
        self.e.fail_errno = <int32_t *>calloc(nchan + 1, sizeof(int32_t))
        self.e.fail_ns = <int64_t *>calloc(nchan + 1, sizeof(int64_t))
        self.e.slice_chan = <int32_t *>calloc(64, sizeof(int32_t))
        self.e.vote_seq = -1
        if not (self.e.eps and self.e.chan_ns and self.e.chan_bytes and self.e.chan_rail and
                self.e.fail_why and self.e.fail_peer and self.e.fail_errno and self.e.fail_ns):
            raise MemoryError()
        self.stage_bytes = stage_bytes
        self.endpoints = [None] * nep
        for i in range(nep):
            self.e.eps[i].chan = i // size
            self.e.eps[i].peer = i % size
            self.set_endpoint(i, endpoints[i])
        if n:
            self._init_health(ctrl, size, heartbeat)

    cdef _init_health(self, list ctrl, int size, double heartbeat):
        """ctrl: one control Endpoint (or None for self) per rail * size + peer."""
        cdef int i, n = len(ctrl)
        cdef Endpoint ep
        cdef int64_t now = nz_now_ns()
        self.h.n, self.h.size = n, size
        self.h.ctrl = <nz_ctrl_t *>calloc(n, sizeof(nz_ctrl_t))
        self.h.last_heard = <int64_t *>calloc(n, sizeof(int64_t))
        self.h.since = <int64_t *>calloc(n, sizeof(int64_t))
        self.h.closed = <uint8_t *>calloc(n, 1)
        self.h.wlock = <pthread_mutex_t *>calloc(n, sizeof(pthread_mutex_t))
        self.h.rlock = <pthread_mutex_t *>calloc(n, sizeof(pthread_mutex_t))
        self.h.status_seq = <int64_t *>calloc(2 * size, sizeof(int64_t))
        self.h.status_mask = <uint64_t *>calloc(2 * size, sizeof(uint64_t))
        self.h.status_heard = <uint64_t *>calloc(2 * size, sizeof(uint64_t))
        self.h.status_coll = <int64_t *>calloc(2 * size, sizeof(int64_t))
        self.h.status_flags = <uint16_t *>calloc(2 * size, sizeof(uint16_t))
        self.h.rbuf = <char *>malloc(n * 8192)
        self.h.rlen = <uint32_t *>calloc(n, sizeof(uint32_t))
        if not (self.h.ctrl and self.h.last_heard and self.h.since and self.h.closed and
                self.h.wlock and self.h.rlock and self.h.status_seq and self.h.status_mask and
                self.h.status_heard and self.h.status_coll and self.h.status_flags and
                self.h.rbuf and self.h.rlen):
            raise MemoryError()
        self.ctrl = list(ctrl)
        for i in range(n):
            ep = _speaks_contract(ctrl[i])
            self.h.ctrl[i].tr = ep.ops if ep is not None else NULL
            self.h.ctrl[i].tx = ep.ctx if ep is not None else NULL
            self.h.closed[i] = ep is None
            self.h.last_heard[i] = now
            self.h.since[i] = now
            pthread_mutex_init(&self.h.wlock[i], NULL)
            pthread_mutex_init(&self.h.rlock[i], NULL)
        for i in range(2 * size):
            self.h.status_seq[i] = -1
        pthread_mutex_init(&self.h.ilock, NULL)
        pthread_mutex_init(&self.h.slock, NULL)
        self.h.interval_ns = <int64_t>(heartbeat * 1e9)
        self.h.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        self.h.gfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        self.h.voting_seq = -1
        self.h.hwake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        self.h.own_seq[0] = self.h.own_seq[1] = -1
        if self.h.evfd < 0 or self.h.gfd < 0 or self.h.hwake < 0:
            raise OSError("eventfd failed")
        self.e.health = &self.h
        self.e.data_heard = <int64_t *>calloc(n, sizeof(int64_t))
        if self.e.data_heard == NULL:
            raise MemoryError()
        self.has_health = True
        if nz_health_start(&self.h) != 0:
            raise OSError("cannot start the health thread")

    def health_realtime(self, int prio):
        """SCHED_FIFO at prio for the health thread: 0, or the errno that refused it
        (nz_health_realtime: real-time progress threads would starve it)."""
        if not self.has_health:
            return 0
        return nz_health_realtime(&self.h, prio)

    def close(self):
        """Stop the health thread (idempotent); endpoints belong to the mesh."""
        if self.has_health:
            with nogil:
                nz_health_stop(&self.h)

    def __dealloc__(self):
        cdef int i
        if self.has_health:
            nz_health_stop(&self.h)
            if self.h.evfd >= 0:
                close(self.h.evfd)
            if self.h.gfd >= 0:
                close(self.h.gfd)
            if self.h.hwake >= 0:
                close(self.h.hwake)
        free(self.h.ctrl); free(self.h.last_heard); free(self.h.since); free(self.h.closed)
        free(self.h.wlock); free(self.h.rlock); free(<void *>self.h.status_seq); free(<void *>self.h.status_mask)
        free(<void *>self.h.status_heard); free(<void *>self.h.status_coll)
        free(<void *>self.h.status_flags); free(self.h.rbuf); free(self.h.rlen)
        free(self.h.inbox)
        if self.e.eps != NULL:
            for i in range(self.e.nep):
                free(self.e.eps[i].stage)
        free(self.e.eps)
        free(self.e.chan_ns)
        free(self.e.chan_bytes)
        free(self.e.chan_rail)
        free(self.e.fail_why); free(self.e.fail_peer); free(self.e.fail_errno); free(self.e.fail_ns)
        free(self.e.slice_chan)
        free(self.e.data_heard)
        free(self.e.qbuf)
        free(self.e.trace_ops); free(self.e.trace_t)

    def set_spin(self, double seconds):
        """Busy-poll this long before sleeping when nothing moves."""
        self.e.spin_ns = self.e.run_spin_ns = <int64_t>(seconds * 1e9)

    def set_failover(self, bint on, list chan_rail, double silent):
        """Set channels aside on errors or silence (instead of failing the run)."""
        cdef int c
        self.e.failover = on and self.has_health
        for c in range(self.nchan):
            self.e.chan_rail[c] = chan_rail[c]
        self.e.silent_ns = <int64_t>(silent * 1e9)

    def set_live_rails(self, uint64_t mask):
        """Rails the planner still uses (the last one is given up only after the peer-lost
        wait, see nz_rail_silent)."""
        self.e.live_rails = mask

    cdef void arm(self, bint on, int64_t vote_seq, const int32_t *slice_chans, int nslices,
                  int64_t coll, bint lazy) noexcept nogil:
        """Failover for the next run (off for point-to-point, which cannot vote): the next
        vote (-1: none; a run that knows it stops when a rank behind calls it), the channel
        of each slice, the collective's index, and whether the run ends without a vote
        (lazy) unless something fails. Only through FastPath.arm and FastPath._call: both
        paths arm alike."""
        cdef int i
        self.e.failover = on and self.has_health and self.e.silent_ns > 0
        self.e.vote_seq = vote_seq if self.has_health else -1
        self.e.vote_coll = coll
        self.e.lazy = lazy
        self.e.nslices = min(nslices, 64) if on else 0
        for i in range(self.e.nslices):
            self.e.slice_chan[i] = slice_chans[i]

    def set_endpoint(self, int ep, Endpoint endpoint):
        """Point endpoint ep at a transport endpoint (a new one for a re-admitted channel);
        None disables it."""
        cdef nz_ep_t *p = &self.e.eps[ep]
        _speaks_contract(endpoint)
        if endpoint is not None and p.stage == NULL:
            p.stage = <char *>malloc(self.stage_bytes)
            if p.stage == NULL:
                raise MemoryError()
            p.stage_cap = self.stage_bytes
        p.tr = endpoint.ops if endpoint is not None else NULL
        p.tx = endpoint.ctx if endpoint is not None else NULL
        p.tx_watch = 0
        self.endpoints[ep] = endpoint

    def start(self, Schedule s):
        """Do the local copies and prepare the run of s."""
        cdef int rc
        with nogil:
            rc = self.begin(s)
        return rc

    cdef int begin(self, Schedule s) noexcept nogil:
        # start, for the fast path too (fastpath.pxi)
        cdef int i
        for i in range(s.npre):
            memcpy(s.pre_dst[i], s.pre_src[i], s.pre_n[i])
        self.e.run_spin_ns = self.e.spin_ns
        if self.e.spin_ns > 0 and s.wait_spin_ns > self.e.spin_ns:
            self.e.run_spin_ns = s.wait_spin_ns
        return nz_start(&self.e, s.ops, s.nops, s.dtype, s.op)

    def progress(self, Schedule s, int64_t deadline_ns):
        """Run s until done, error, deadline or a control message; returns the status code."""
        cdef int rc, i
        with nogil:
            rc = nz_progress(&self.e, s.ops, s.nops, deadline_ns)
        return rc

    def finish(self, Schedule s, object done_ranges=None):
        """Apply AVG divisions of s (only those whose slice finished, when given)."""
        cdef int i
        for i in range(s.navg):
            if done_ranges is None or done_ranges[i]:
                with nogil:
                    s.avg(i)

    def failed_channels(self):
        """[(channel, why, peer, errno, ns after start)] set aside in the last run."""
        return [(c, WHY_NAMES.get(self.e.fail_why[c], "?"), self.e.fail_peer[c],
                 self.e.fail_errno[c], self.e.fail_ns[c])
                for c in range(min(self.nchan, 64)) if self.e.chan_failed & (1ULL << c)]

    def vote(self, int rank, uint32_t seq, int64_t coll, uint64_t mask, int flags,
             uint64_t heard, uint64_t live_rails, int nrails, int64_t deadline_ns):
        """(status, [(collective index, mask, flags) per rank], intersection of heard)."""
        cdef uint64_t ih = 0
        cdef int rc, p, n = self.size
        cdef int64_t *colls = <int64_t *>calloc(n, sizeof(int64_t))
        cdef uint64_t *masks = <uint64_t *>calloc(n, sizeof(uint64_t))
        cdef uint16_t *fl = <uint16_t *>calloc(n, sizeof(uint16_t))
        if not (colls and masks and fl):
            free(colls); free(masks); free(fl)
            raise MemoryError()
        with nogil:
            rc = nz_vote(&self.e, rank, seq, coll, mask, <uint16_t>flags, heard, live_rails,
                         nrails, deadline_ns, colls, masks, fl, &ih)
        table = [(colls[p], masks[p], fl[p]) for p in range(n)]
        free(colls); free(masks); free(fl)
        return rc, table, ih

    def wait_vote_frame(self, double timeout):
        """Sleep (without the GIL) until a vote frame arrives or timeout seconds pass."""
        cdef int r, ms = <int>(timeout * 1000)
        if not self.has_health:
            return False
        with nogil:
            r = nz_health_wait_vote(&self.h, ms)
        return bool(r)

    def vote_counts(self):
        """(STATUS copies sent again with a poke, pokes answered) since start: a vote whose
        single copy a failing rail ate, and the peers' asking for ours (nz_vote)."""
        if not self.has_health:
            return (0, 0)
        return (self.h.vote_resends, self.h.pokes_answered)

    def health_counts(self):
        """(polls, reads left to another reader, heartbeats skipped) of the health thread
        since start: how often it woke, how often the engine was reading an endpoint it woke
        for, and how often another thread was writing where a heartbeat was due."""
        if not self.has_health:
            return (0, 0, 0)
        return (self.h.polls, self.h.refused, self.h.beats_skipped)

    def hold_ctrl_read(self, int i, double seconds):
        """Tests: hold control endpoint i's read lock for seconds, as the engine holds it
        while it reads there (a reader descheduled in the middle). False if it was taken."""
        return self._hold_ctrl(self.h.rlock, i, seconds)

    def hold_ctrl_write(self, int i, double seconds):
        """Tests: hold control endpoint i's write lock for seconds, as a thread sending a
        frame there holds it (descheduled in the middle). False if it was taken."""
        return self._hold_ctrl(self.h.wlock, i, seconds)

    cdef bint _hold_ctrl(self, pthread_mutex_t *locks, int i, double seconds):
        cdef bint held
        if not self.has_health or i < 0 or i >= self.h.n:
            return False
        with nogil:  # other threads (a run, the health thread) go on meanwhile
            held = _hold(&locks[i], seconds)
        return held

    def peer_vote(self, int64_t seq):
        """Lowest collective index among the peers that have started vote seq, or None."""
        cdef int p
        cdef int64_t c
        if not self.has_health:
            return None
        best = None
        for p in range(self.size):
            if self.h.status_seq[p * 2 + (seq & 1)] == seq:  # aligned: read whole
                c = self.h.status_coll[p * 2 + (seq & 1)]
                best = c if best is None or c < best else best
        return best

    def failed_mask(self):
        """Channels set aside in the last run, one bit each."""
        return self.e.chan_failed

    def heard_rails(self, int nrails, int rank, double steady, double quiet=-1.0):
        """Rails on which every peer's heartbeats were heard within quiet seconds (default,
        quiet < 0: the rail timeout) without a gap for steady seconds; closed ones never."""
        cdef int64_t q = <int64_t>(quiet * 1e9) if quiet >= 0 else self.e.silent_ns
        return nz_heard_rails(&self.e, nrails, rank, <int64_t>(steady * 1e9), q)

    def restart_steady(self, int rail):
        """rail failed here: it is heard steadily (heard_rails) only from now on."""
        if rail >= 0 and rail < 64:
            nz_rail_restart_steady(&self.e, rail)

    def rail_silence(self, int rail, int peer):
        """Seconds since peer was last heard on rail, and whether that connection closed."""
        cdef int i = rail * self.size + peer
        if not self.has_health or i >= self.h.n:
            return (0.0, False)
        return ((nz_now_ns() - self.h.last_heard[i]) * 1e-9, bool(self.h.closed[i]))

    def send_frame(self, int i, int ftype, int kind, uint32_t seq, bytes payload=b""):
        """Send one control frame on control endpoint i; False if it could not go."""
        cdef nz_frame_t f
        if not self.has_health:
            return False
        memset(&f, 0, sizeof(nz_frame_t))
        f.magic, f.type, f.kind, f.seq, f.len = NZ_CTRL_MAGIC, ftype, kind, seq, len(payload)
        cdef const char *p = payload
        cdef int rc
        with nogil:
            rc = nz_health_send(&self.h, i, &f, p)
        return rc == 0

    def take_messages(self):
        """Frames other than heartbeats and votes, as (ctrl index, type, kind, seq, payload);
        type 0 means that control connection closed."""
        cdef bytes raw
        if not self.has_health:
            return []
        pthread_mutex_lock(&self.h.ilock)
        raw = PyBytes_FromStringAndSize(self.h.inbox, self.h.ilen) if self.h.ilen else b""
        self.h.ilen = 0
        pthread_mutex_unlock(&self.h.ilock)
        out = []
        cdef size_t off = 0, hs = sizeof(nz_frame_t)
        cdef nz_frame_t f
        cdef int32_t idx
        while off + 4 + hs <= len(raw):
            memcpy(&idx, <const char *>raw + off, 4)
            memcpy(&f, <const char *>raw + off + 4, hs)
            out.append((idx, f.type, f.kind, f.seq, raw[off + 4 + hs: off + 4 + hs + f.len]))
            off += 4 + hs + f.len
        return out

    def error(self):
        """(err_op, err_ep, errno, ctrl index) of the last failed run."""
        return (self.e.err_op, self.e.err_ep, self.e.err_errno, self.e.err_ctrl)

    def waiting_for(self):
        """(op index, endpoint) of the first receive still pending in the current run, or
        of the first send if no receive is; None when nothing is pending."""
        cdef int32_t i
        cdef nz_ep_t *p
        for i in range(self.e.nep):
            p = &self.e.eps[i]
            if p.rh < p.nrq and not (self.e.chan_failed & (1ULL << p.chan)):
                return (p.rq[p.rh], i)
        for i in range(self.e.nep):
            p = &self.e.eps[i]
            if p.sh < p.nsq and not (self.e.chan_failed & (1ULL << p.chan)):
                return (p.sq[p.sh], i)
        return None

    def trace_ops(self, int min_ops, int cap):
        """Trace the runs of min_ops..cap ops (cap 0: off): op_times() gives the last one's
        ops and their finish times. A measurement hook (docs/results/session27/hier-floor),
        nothing per op when off."""
        free(self.e.trace_ops); free(self.e.trace_t)
        self.e.trace_ops, self.e.trace_t, self.e.trace_base = NULL, NULL, NULL
        self.e.trace_cap = self.e.trace_n = 0
        self.e.trace_t0 = 0
        if cap <= 0:
            return
        self.e.trace_ops = <nz_op_t *>malloc(cap * sizeof(nz_op_t))
        self.e.trace_t = <int64_t *>malloc(cap * sizeof(int64_t))
        if self.e.trace_ops == NULL or self.e.trace_t == NULL:
            raise MemoryError()
        self.e.trace_cap, self.e.trace_min = cap, min_ops

    def op_times(self):
        """The last traced run: {"t0": CLOCK_MONOTONIC ns of its start, "ops": [(kind,
        peer, chan, nbytes, dep0, dep1, finish ns after start or -1)]} (peer -1: local)."""
        cdef int32_t i
        cdef nz_op_t *o
        ops = []
        for i in range(self.e.trace_n):
            o = &self.e.trace_ops[i]
            ops.append((o.kind, o.ep % self.size if o.ep >= 0 else -1, o.chan, o.nbytes,
                        o.dep[0], o.dep[1], self.e.trace_t[i]))
        return {"t0": self.e.trace_t0, "ops": ops}

    def channel_times_ns(self):
        """Per channel: (ns from start to its last op, bytes moved) in the last run."""
        return [(self.e.chan_ns[c], self.e.chan_bytes[c]) for c in range(self.nchan)]

    def endpoint_bytes(self):
        """Per endpoint: (bytes sent, bytes received) since the engine was made."""
        return [(self.e.eps[i].bytes_sent, self.e.eps[i].bytes_recv) for i in range(self.e.nep)]

    def endpoint_reads(self):
        """Per endpoint: the transport reads that brought bytes since the engine was made
        (a small message's header and data come in one: nz_recv_fused)."""
        return [self.e.eps[i].reads for i in range(self.e.nep)]

    def run_polls(self):
        """Sleeps in poll() of the runs since the engine was made: how often a run woke."""
        return self.e.run_polls

    def tx_kicks(self):
        """Sends pushed again because their bytes waited unsent with none in flight (a
        segment dropped before it left the host), since the engine was made."""
        return self.e.tx_kicks

    def zerocopy_counts(self):
        """Zero-copy sends over every data endpoint (TcpEndpoint.zerocopy_counts, summed);
        None when no endpoint sends zero-copy."""
        tot = None
        for ep in self.endpoints:
            while isinstance(ep, FaultEndpoint):
                ep = ep.inner
            if isinstance(ep, TcpEndpoint) and (<TcpEndpoint>ep).t.zc_min:
                c = ep.zerocopy_counts()
                tot = c if tot is None else {k: tot[k] + v for k, v in c.items()}
        return tot

    def endpoint_kinds(self):
        """Per endpoint: the transport it is driven through now ("tcp", "shm", None)."""
        return [ep.kind if ep is not None else None for ep in self.endpoints]


include "runstate.pxi"
include "bufprobe.pxi"
include "hostcoll.pxi"
include "fastpath.pxi"
