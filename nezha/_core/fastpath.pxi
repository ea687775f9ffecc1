# Included by engine.pyx (mpi4py style): the fast path of blocking collectives on buffers
# used before (allreduce, reduce, broadcast, allgather, reduce_scatter, alltoall, barrier),
# numpy arrays and torch CPU tensors alike (bufprobe.pxi).
#
# A training loop calls the same collective on the same buffers again and again. The first
# call goes the whole way (checks, Request, queue, planner, schedule) and leaves a FastEntry
# keyed by the collective, the buffers' addresses and the root; a later call with the same
# key, byte sizes, element types and op, the output still writeable where the slow path
# requires it, the queue idle and the cost model unchanged, runs here: one dict lookup, then
# reset + input copy + start + progress + AVG in one nogil block. Python per call: ~1 µs
# instead of ~5-9. Anything else (a miss, a busy queue, a run that needs a vote or fails)
# goes the slow way, so the fast path only ever skips work whose result it already has.
# Every check the slow path makes is fixed by the key (addresses and sizes fix overlaps and
# the size relations between the buffers; the collective, root and op fix what is built)
# or made again here (types, contiguity, byte order, writeable, model version).
# Arming the engine and concluding a run are the executor's too (arm, RunState.ran,
# RunState.take): one code path for both.

ctypedef int (*ina_fresh_fn)(void *c) noexcept nogil
ctypedef int (*ina_run_fn)(void *c, void *buf, size_t count, int dtype, int op,
                           int timeout_ms) noexcept nogil


cdef class FastEntry:
    """What a repeated collective on the same buffers needs: its schedule and plan, and
    two alternating copies of its input (a lazy collective keeps its input until the next
    collective: the previous call's copy may still be needed while this one runs). An
    allreduce that goes whole to the INA service has no schedule: the client's C call
    instead (ina), and the copies keep its result (what a rank that got none is sent)."""
    cdef Schedule s
    cdef object plan, ranges, tmpl, op, snaps, src, keep
    cdef int32_t chans[64]  # each slice's channel (arming)
    cdef int nchans, flip
    cdef int early  # a small broadcast's: the RunState.prev_early it was planned after (-1: any)
    cdef int64_t tin, tout, nin, nout, nsrc, mversion
    cdef bint lazy, voting, wout
    cdef char *snapp[2]
    cdef const char *srcp  # the run's input when it is not the call's sendbuf (a spare)
    # a small allreduce whole on the INA service (Executor._execute_ina_small)
    cdef bint ina
    cdef object ina_off, ina_client  # InaOffload (counters, failures), the C client's owner
    cdef void *ina_c
    cdef ina_fresh_fn ina_fresh
    cdef ina_run_fn ina_run
    cdef int ina_dtype, ina_op, ina_tmo
    cdef size_t ina_count
    cdef char *outp
    # an allreduce of ranks all on one host, in the host area (Executor._execute_host)
    cdef HostArea host
    cdef object hc_off  # the HostColl (its errors)
    cdef uint64_t hc_count
    cdef int hc_es, hc_dtype, hc_op
    cdef double hc_div


cdef bint _probe_pair(object sendbuf, object recvbuf, cnp.ndarray a, cnp.ndarray out,
                      buf_t *bi, buf_t *bo, bint allow_empty) except -1:
    """Probe the user's sendbuf and recvbuf (None: sendbuf is the output) into bi and bo for
    put/put_ina/put_host: False if the fast path cannot take them (not an array or a tensor
    it knows) or they are no longer the memory of a and out, the slow path's views of them
    (a tensor resized meanwhile). An empty one's address is its own (torch: NULL): no byte
    of it is ever read or written; allow_empty False refuses an empty input."""
    if recvbuf is None:
        recvbuf = sendbuf
    for buf in (sendbuf, recvbuf):
        if type(buf) is not cnp.ndarray and not _learn_tensor_type(type(buf)):
            return False
    if not (probe(sendbuf, bi) and probe(recvbuf, bo)):
        return False
    if bi.nbytes == 0 and not allow_empty:
        return False
    return not (bi.nbytes != cnp.PyArray_NBYTES(a) or bo.nbytes != cnp.PyArray_NBYTES(out)
                or (bi.nbytes and bi.p != <const char *>cnp.PyArray_DATA(a))
                or (bo.nbytes and bo.p != <const char *>cnp.PyArray_DATA(out)))


cdef class FastPath:
    """Per communicator: the entries, and the run state it shares with the Python
    executor (RunState: typed fields, read here without a dict lookup). The executor arms
    its runs here too (arm)."""
    cdef Engine eng
    cdef RunState st
    cdef dict entries
    cdef object model, lock
    cdef bint failover
    cdef public int64_t hits  # calls that ran here (comm.stats())
    cdef HostArea host  # all ranks on one host: runs on the rings are announced there

    def __init__(self, RunState st, Engine eng, object model, bint failover):
        self.st, self.eng, self.model, self.lock = st, eng, model, st.lock
        self.failover = failover
        self.entries = {}

    def set_host(self, HostArea area):
        """The host area, where collectives run on the rings are announced (HostArea.announce)."""
        self.host = area

    def clear(self):
        """Forget every entry (the planner's channels changed)."""
        self.entries.clear()

    def arm(self, bint on, object chans, bint lazy):
        """Arm the engine for the next run of the executor (Executor._arm): failover on or
        off, the channel of each slice (a list, or None)."""
        cdef int32_t c[64]
        cdef int i, n = 0 if chans is None else min(len(chans), 64)
        for i in range(n):
            c[i] = chans[i]
        self._arm(on, c, n, lazy)

    cdef void _arm(self, bint on, const int32_t *chans, int n, bint lazy) noexcept:
        # the next vote and this collective's index: every rank counts them alike
        self.eng.arm(on, (self.st.votes & 0xFFFFFFFF) if self.failover else -1, chans, n,
                     self.st.ncoll, lazy)

    def put(self, int coll, object sendbuf, object recvbuf, cnp.ndarray a, cnp.ndarray out,
            cnp.ndarray src, object op, int root, bint wout, Schedule s, object plan,
            object ranges, bint lazy, bint voting, object tmpl, object keep=None,
            bint zeros=False):
        """Remember a finished slow-path collective called with sendbuf and recvbuf (the
        user's objects; recvbuf None: sendbuf is the output, or there is none) whose run
        read src (a itself or a library buffer) into out (a and out: the numpy views the
        slow path made of them, checked to be the same memory still). op None for
        collectives without one; wout: the slow path requires out writeable. tmpl: its
        Request, which a re-run after a failure copies name, spec and retarget from.
        keep: library buffers the schedule writes into (a reduce's sink)."""
        cdef buf_t bi, bo
        cdef int i
        if not _probe_pair(sendbuf, recvbuf, a, out, &bi, &bo, True):
            return
        cdef FastEntry f = FastEntry()
        f.s, f.plan, f.ranges, f.tmpl, f.op, f.keep = s, plan, ranges, tmpl, op, keep
        f.tin, f.tout, f.nin, f.nout = bi.token, bo.token, bi.nbytes, bo.nbytes
        f.nsrc = cnp.PyArray_NBYTES(src)
        f.wout = wout
        f.mversion = self.model.version
        f.lazy, f.voting = lazy, voting
        # a lazy broadcast is a tree, or an allreduce right after one (Communicator._broadcast),
        # or hier, planned alike after either (-1)
        f.early = (-1 if coll != COLL_BROADCAST or not lazy or plan.algo == RUN_HIER_ALGO
                   else plan.algo != RUN_EARLY_ALGO)
        f.nchans = min(len(plan.chans), 64)
        for i in range(f.nchans):
            f.chans[i] = plan.chans[i]
        f.srcp = NULL
        if cnp.PyArray_DATA(src) != cnp.PyArray_DATA(a):
            f.src = src  # kept alive: the schedule reads it
            f.srcp = <const char *>cnp.PyArray_DATA(src)
        if voting and lazy and zeros and f.srcp != NULL:
            # src: the library's zeros (a broadcast's ranks other than the root), never
            # written: kept as it is (Spares.is_zeros), no copy a call
            f.snaps = (src, src)
            f.snapp[0] = f.snapp[1] = NULL
        elif voting and lazy:
            f.snaps = (np.empty(f.nsrc, np.uint8), np.empty(f.nsrc, np.uint8))
            f.snapp[0] = <char *>cnp.PyArray_DATA(f.snaps[0])
            f.snapp[1] = <char *>cnp.PyArray_DATA(f.snaps[1])
        if len(self.entries) >= 64:
            self.entries.clear()
        # a broadcast's two plans (a lazy tree, the allreduce after one) each keep an entry:
        # back to back they alternate
        kroot = (root, f.early == 1) if coll == COLL_BROADCAST else <object>root
        self.entries[(coll, <uintptr_t>bi.p, <uintptr_t>bo.p, kroot)] = f

    def put_ina(self, object sendbuf, object recvbuf, cnp.ndarray a, cnp.ndarray out,
                object op, bint wout, object plan, bint voting, object tmpl, object off,
                object client, int dtype, int iop, double timeout):
        """Remember a small allreduce that ran whole on the INA service (client: the
        InaOffload's Cython Client, kept alive here; off: the InaOffload). Same key and
        checks as put(); the entry runs the client's C call instead of a schedule. Entries
        go with clear(): the INA rail left out (InaOffload._drop) or the planner's channels
        changed (a TCP rail lost or back changes small_route's answer)."""
        cdef buf_t bi, bo
        if not _probe_pair(sendbuf, recvbuf, a, out, &bi, &bo, False) or bi.nbytes != bo.nbytes:
            return
        cdef FastEntry f = FastEntry()
        f.ina = True
        f.plan, f.tmpl, f.op = plan, tmpl, op
        f.tin, f.tout, f.nin, f.nout = bi.token, bo.token, bi.nbytes, bo.nbytes
        f.nsrc = bo.nbytes
        f.wout = wout
        f.mversion = self.model.version
        f.lazy = f.voting = voting
        f.ina_off, f.ina_client = off, client
        h = client.small_handle()
        f.ina_c = <void *><uintptr_t>h[0]
        f.ina_fresh = <ina_fresh_fn><uintptr_t>h[1]
        f.ina_run = <ina_run_fn><uintptr_t>h[2]
        f.ina_dtype, f.ina_op = dtype, iop
        f.ina_tmo = <int>(timeout * 1000)
        f.ina_count = <size_t>cnp.PyArray_SIZE(out)
        f.outp = <char *>bo.p
        if voting:
            f.snaps = (np.empty(f.nsrc, np.uint8), np.empty(f.nsrc, np.uint8))
            f.snapp[0] = <char *>cnp.PyArray_DATA(f.snaps[0])
            f.snapp[1] = <char *>cnp.PyArray_DATA(f.snaps[1])
        if len(self.entries) >= 64:
            self.entries.clear()
        self.entries[(COLL_ALLREDUCE, <uintptr_t>bi.p, <uintptr_t>bo.p, -1)] = f

    def put_host(self, object sendbuf, object recvbuf, cnp.ndarray a, cnp.ndarray out,
                 object op, bint wout, object plan, object tmpl, object hostcoll, int dtype,
                 int iop, double divisor):
        """Remember an allreduce that ran in the host area (hostcoll: the HostColl). Same
        key and checks as put(); the entry runs the area's C call instead of a schedule."""
        cdef buf_t bi, bo
        if not _probe_pair(sendbuf, recvbuf, a, out, &bi, &bo, True) or bi.nbytes != bo.nbytes:
            return
        cdef FastEntry f = FastEntry()
        f.plan, f.tmpl, f.op = plan, tmpl, op
        f.tin, f.tout, f.nin, f.nout = bi.token, bo.token, bi.nbytes, bo.nbytes
        f.wout = wout
        f.mversion = self.model.version
        f.host, f.hc_off = hostcoll.area, hostcoll
        f.hc_count = <uint64_t>cnp.PyArray_SIZE(out)
        f.hc_es = <int>cnp.PyArray_ITEMSIZE(out)
        f.hc_dtype, f.hc_op, f.hc_div = dtype, iop, divisor
        f.outp = <char *>bo.p
        if len(self.entries) >= 64:
            self.entries.clear()
        self.entries[(COLL_ALLREDUCE, <uintptr_t>bi.p, <uintptr_t>bo.p, -1)] = f

    cdef FastEntry _lookup(self, int coll, object sendbuf, object recvbuf, object op,
                           object root, buf_t *bi):
        cdef buf_t bo
        if not probe(sendbuf, bi):
            return None
        if recvbuf is None:
            bo = bi[0]
        elif not probe(recvbuf, &bo):
            return None
        f = self.entries.get((coll, <uintptr_t>bi.p, <uintptr_t>bo.p, root))
        if f is None:
            return None
        cdef FastEntry e = <FastEntry>f
        if (e.nin != bi.nbytes or e.nout != bo.nbytes or e.tin != bi.token
                or e.tout != bo.token or (e.wout and not bo.writeable)
                or not (op is e.op or (type(op) is int and op == e.op))
                or e.mversion != self.model.version):
            return None
        return e

    def allreduce(self, object comm, object sendbuf, object recvbuf, object op):
        """The result buffer if the call ran here, None if it must take the slow path."""
        return self._call(comm, COLL_ALLREDUCE, sendbuf, recvbuf, op, -1,
                          sendbuf if recvbuf is None else recvbuf)

    def reduce(self, object comm, object sendbuf, object recvbuf, object op, object root):
        """As allreduce, for Communicator.reduce (root: an int, as the slow path takes).
        Off the root the result is None, which means a miss here: this returns self
        instead. The other ranks' recvbuf is not looked at (nor by the slow path)."""
        if type(root) is not int:
            return None
        if root != comm.rank:
            return self._call(comm, COLL_REDUCE, sendbuf, None, op, root, self)
        return self._call(comm, COLL_REDUCE, sendbuf, recvbuf, op, root,
                          sendbuf if recvbuf is None else recvbuf)

    def broadcast(self, object comm, object buf, object root):
        """As allreduce, for Communicator.broadcast (root: an int, as the slow path takes)."""
        if type(root) is not int:
            return None
        return self._call(comm, COLL_BROADCAST, buf, None, None, (root, self.st.prev_early),
                          buf)

    def allgather(self, object comm, object sendbuf, object recvbuf):
        """As allreduce, for Communicator.allgather."""
        return self._call(comm, COLL_ALLGATHER, sendbuf, recvbuf, None, -1, recvbuf)

    def reduce_scatter(self, object comm, object sendbuf, object recvbuf, object op):
        """As allreduce, for Communicator.reduce_scatter."""
        return self._call(comm, COLL_REDUCE_SCATTER, sendbuf, recvbuf, op, -1, recvbuf)

    def alltoall(self, object comm, object sendbuf, object recvbuf):
        """As allreduce, for Communicator.alltoall."""
        return self._call(comm, COLL_ALLTOALL, sendbuf, recvbuf, None, -1, recvbuf)

    def barrier(self, object comm, object nobuf):
        """As allreduce, for Communicator.barrier. It has no buffers: nobuf, the
        communicator's own empty array, stands for them in the key. (A barrier run the slow
        way between two timed calls costs ~30 µs of Python with 4 ranks on 2 cores, and its
        ranks leave it that far apart: the next call pays for it.)"""
        return self._call(comm, COLL_BARRIER, nobuf, None, None, -1, nobuf)

    cdef object _call(self, object comm, int coll, object sendbuf, object recvbuf, object op,
                      object root, object result):
        cdef RunState st = self.st
        cdef buf_t bi
        cdef FastEntry e = self._lookup(coll, sendbuf, recvbuf, op, root, &bi)
        if e is None or st.closed or st.broken is not None:
            return None
        if e.ina:
            return self._call_ina(comm, e, bi.p, result)
        if e.host is not None:
            return self._call_host(comm, e, bi.p, result)
        if not self.lock.acquire(False):
            return None
        try:
            # a small broadcast after a lazy tree is an allreduce (Communicator._broadcast):
            # the slow path plans the other one
            if st.busy or st.queue or (e.early >= 0 and e.early != st.prev_early):
                return None
            st.busy = True
        finally:
            self.lock.release()
        cdef int64_t seq = st.seq
        st.seq = seq + 1
        self.hits += 1
        if self.host is not None:
            spec = e.tmpl.spec
            self.host.announce_c(<uint64_t>seq, coll, spec[3], spec[1], spec[2])
        cdef Schedule s = e.s
        cdef Engine eng = self.eng
        cdef nz_engine_t *en = &eng.e
        cdef int rc, i, flip = e.flip
        cdef char *snap = NULL
        cdef const char *src = e.srcp if e.srcp != NULL else bi.p
        cdef uint64_t nbytes = e.nsrc
        cdef int64_t timeout_ns = <int64_t>(min(st.timeout, 1e9) * 1e9)
        s.rearm(<uint32_t>(seq & 0xFFFFFFFF))
        self._arm(e.voting, e.chans, e.nchans, e.lazy)
        if e.voting and e.lazy:
            snap = e.snapp[flip]
            e.flip = flip ^ 1
        with nogil:
            if snap != NULL:
                memcpy(snap, src, nbytes)
            rc = eng.begin(s)
            if rc == NZ_OK:
                rc = nz_progress(en, s.ops, s.nops, nz_now_ns() + timeout_ns)
            if rc == NZ_OK:  # lazy or not voting, and done: no vote (Executor._conclude)
                for i in range(s.navg):
                    s.avg(i)
        snapobj = e.snaps[flip] if e.voting and e.lazy else None  # (the zeros: no copy)
        if rc != NZ_OK:  # a control frame, a failure, a vote: the executor takes it from here
            return comm._fast_rest(e.tmpl, seq, s, e.plan, e.ranges, e.lazy, e.voting,
                                   snapobj, rc, result)
        st.ran(e.plan, e.plan, seq, e.tmpl, e.lazy, e.voting, snapobj)
        nxt = st.take()
        if nxt is not None:  # queued meanwhile by another thread: run it as _drain does
            comm._drain(nxt)
        return result

    cdef object _call_ina(self, object comm, FastEntry e, const char *inp, object result):
        """A small allreduce whole on the INA service: input to output, one datagram up,
        its result down, in one nogil block (Executor._execute_ina_small without the
        Python). A failure goes to the executor (Executor._ina_small_rest)."""
        cdef RunState st = self.st
        # a job silent past half the service's timeout registers again: the slow path
        if not e.ina_fresh(e.ina_c):
            return None
        if not self.lock.acquire(False):
            return None
        try:
            if st.busy or st.queue:
                return None
            st.busy = True
        finally:
            self.lock.release()
        cdef int64_t seq = st.seq
        st.seq = seq + 1
        self.hits += 1
        e.ina_off.small += 1
        cdef int rc, flip = e.flip
        cdef char *snap = NULL
        cdef char *outp = e.outp
        cdef size_t nbytes = e.nsrc
        if e.voting:
            snap = e.snapp[flip]
            e.flip = flip ^ 1
        with nogil:
            if inp != outp:
                memcpy(outp, inp, nbytes)
            rc = e.ina_run(e.ina_c, outp, e.ina_count, e.ina_dtype, e.ina_op, e.ina_tmo)
            if rc == 0 and snap != NULL:  # kept: a rank that got no result is sent this
                memcpy(snap, outp, nbytes)
        if rc != 0:
            return comm._ina_small_rest(e.tmpl, seq, e.plan, result,
                                        e.ina_client.error(rc))
        st.ran(e.plan, e.plan, seq, e.tmpl, e.voting, e.voting,
               e.snaps[flip] if snap != NULL else None)
        nxt = st.take()
        if nxt is not None:  # queued meanwhile by another thread: run it as _drain does
            comm._drain(nxt)
        return result

    cdef object _call_host(self, object comm, FastEntry e, const char *inp, object result):
        """An allreduce in the host area: input to output in one nogil call
        (Executor._execute_host without the Python). A failure goes to the executor
        (Executor._host_rest), which raises it on this rank and tells the others."""
        cdef RunState st = self.st
        if not self.lock.acquire(False):
            return None
        try:
            if st.busy or st.queue:
                return None
            st.busy = True
        finally:
            self.lock.release()
        cdef int64_t seq = st.seq
        st.seq = seq + 1
        self.hits += 1
        cdef int rc = e.host.run(inp, e.outp, e.hc_count, e.hc_es, e.hc_dtype, e.hc_op,
                                 e.hc_div, COLL_ALLREDUCE, <uint64_t>seq, st.timeout)
        if rc != 0:
            return comm._host_rest(e.tmpl, seq, result, e.hc_off.error(
                rc, "allreduce", seq, e.hc_count, e.hc_dtype, e.hc_op, st.timeout))
        st.ran(e.plan, e.plan, seq, e.tmpl, False, False, None)
        nxt = st.take()
        if nxt is not None:  # queued meanwhile by another thread: run it as _drain does
            comm._drain(nxt)
        return result
