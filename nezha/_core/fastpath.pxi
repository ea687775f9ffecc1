# Included by engine.pyx (mpi4py style): the fast path of blocking collectives on buffers
# used before (allreduce, broadcast, allgather, reduce_scatter, alltoall) and barrier.
#
# A training loop calls the same collective on the same buffers again and again. The first
# call goes the whole way (checks, Request, queue, planner, schedule) and leaves a FastEntry
# keyed by the collective, the buffers' addresses and the root; a later call with the same
# key, byte sizes, dtypes and op, the output still writeable where the slow path requires
# it, the queue idle and the cost model unchanged, runs here: one dict lookup, then reset +
# input copy + start + progress + AVG in one nogil block. Python per call: ~1 µs instead of
# ~5-9. Anything else (a miss, a busy queue, a run that needs a vote or fails) goes the slow
# way, so the fast path only ever skips work whose result it already has.
# Every check the slow path makes is fixed by the key (addresses and sizes fix overlaps and
# the size relations between the buffers; the collective, root and op fix what is built)
# or made again here (types, contiguity, byte order, writeable, model version).

cimport numpy as cnp

cnp.import_array()


cdef class FastEntry:
    """What a repeated collective on the same buffers needs: its schedule and plan, and
    two alternating copies of its input (a lazy collective keeps its input until the next
    collective: the previous call's copy may still be needed while this one runs)."""
    cdef Schedule s
    cdef object plan, ranges, tmpl, op, snaps, src
    cdef int32_t chan
    cdef int tin, tout, flip
    cdef int64_t nin, nout, nsrc, mversion
    cdef bint lazy, voting, wout
    cdef char *snapp[2]
    cdef const char *srcp  # the run's input when it is not the call's sendbuf (a spare)


cdef class FastPath:
    """Per communicator: the entries, and the run state it shares with the Python
    executor (RunState: typed fields, read here without a dict lookup)."""
    cdef Engine eng
    cdef RunState st
    cdef dict entries
    cdef object model, lock
    cdef bint failover
    cdef public int64_t hits  # calls that ran here (comm.stats())

    def __init__(self, RunState st, Engine eng, object model, bint failover):
        self.st, self.eng, self.model, self.lock = st, eng, model, st.lock
        self.failover = failover
        self.entries = {}

    def clear(self):
        """Forget every entry (the planner's channels changed)."""
        self.entries.clear()

    def put(self, int coll, cnp.ndarray a, cnp.ndarray out, cnp.ndarray src, object op,
            int root, bint wout, Schedule s, object plan, object ranges, bint lazy,
            bint voting, object tmpl):
        """Remember a finished slow-path collective reading a (src: what the run reads,
        a itself or a library buffer) into out (a again for in place and broadcast); op
        None for collectives without one; wout: the slow path requires out writeable.
        tmpl: its Request, which a re-run after a failure copies name, spec and retarget
        from."""
        cdef FastEntry f = FastEntry()
        f.s, f.plan, f.ranges, f.tmpl, f.op = s, plan, ranges, tmpl, op
        f.tin, f.tout = cnp.PyArray_TYPE(a), cnp.PyArray_TYPE(out)
        f.nin, f.nout = cnp.PyArray_NBYTES(a), cnp.PyArray_NBYTES(out)
        f.nsrc = cnp.PyArray_NBYTES(src)
        f.wout = wout
        f.mversion = self.model.version
        f.lazy, f.voting = lazy, voting
        f.chan = plan.slices[0][0] if len(plan.slices) == 1 else -1
        f.srcp = NULL
        if cnp.PyArray_DATA(src) != cnp.PyArray_DATA(a):
            f.src = src  # kept alive: the schedule reads it
            f.srcp = <const char *>cnp.PyArray_DATA(src)
        if voting and lazy:
            f.snaps = (np.empty(f.nsrc, np.uint8), np.empty(f.nsrc, np.uint8))
            f.snapp[0] = <char *>cnp.PyArray_DATA(f.snaps[0])
            f.snapp[1] = <char *>cnp.PyArray_DATA(f.snaps[1])
        if len(self.entries) >= 64:
            self.entries.clear()
        self.entries[(coll, <uintptr_t>cnp.PyArray_DATA(a), <uintptr_t>cnp.PyArray_DATA(out),
                      root)] = f

    cdef FastEntry _lookup(self, int coll, object sendbuf, object recvbuf, object op,
                           object root):
        cdef cnp.ndarray a, out
        if type(sendbuf) is not cnp.ndarray:
            return None
        a = <cnp.ndarray>sendbuf
        out = a
        if recvbuf is not None:
            if type(recvbuf) is not cnp.ndarray:
                return None
            out = <cnp.ndarray>recvbuf
        if not (cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_IS_C_CONTIGUOUS(out)
                and cnp.PyArray_ISNOTSWAPPED(a) and cnp.PyArray_ISNOTSWAPPED(out)):
            return None
        f = self.entries.get((coll, <uintptr_t>cnp.PyArray_DATA(a),
                              <uintptr_t>cnp.PyArray_DATA(out), root))
        if f is None:
            return None
        cdef FastEntry e = <FastEntry>f
        if (e.nin != cnp.PyArray_NBYTES(a) or e.nout != cnp.PyArray_NBYTES(out)
                or e.tin != cnp.PyArray_TYPE(a) or e.tout != cnp.PyArray_TYPE(out)
                or (e.wout and not cnp.PyArray_ISWRITEABLE(out))
                or not (op is e.op or (type(op) is int and op == e.op))
                or e.mversion != self.model.version):
            return None
        return e

    def allreduce(self, object comm, object sendbuf, object recvbuf, object op):
        """The result buffer if the call ran here, None if it must take the slow path."""
        return self._call(comm, COLL_ALLREDUCE, sendbuf, recvbuf, op, -1)

    def broadcast(self, object comm, object buf, object root):
        """As allreduce, for Communicator.broadcast (root: an int, as the slow path takes)."""
        if type(root) is not int:
            return None
        return self._call(comm, COLL_BROADCAST, buf, None, None, root)

    def allgather(self, object comm, object sendbuf, object recvbuf):
        """As allreduce, for Communicator.allgather."""
        return self._call(comm, COLL_ALLGATHER, sendbuf, recvbuf, None, -1)

    def reduce_scatter(self, object comm, object sendbuf, object recvbuf, object op):
        """As allreduce, for Communicator.reduce_scatter."""
        return self._call(comm, COLL_REDUCE_SCATTER, sendbuf, recvbuf, op, -1)

    def alltoall(self, object comm, object sendbuf, object recvbuf):
        """As allreduce, for Communicator.alltoall."""
        return self._call(comm, COLL_ALLTOALL, sendbuf, recvbuf, None, -1)

    def barrier(self, object comm, object nobuf):
        """As allreduce, for Communicator.barrier. It has no buffers: nobuf, the
        communicator's own empty array, stands for them in the key. (A barrier run the slow
        way between two timed calls costs ~30 µs of Python with 4 ranks on 2 cores, and its
        ranks leave it that far apart: the next call pays for it.)"""
        return self._call(comm, COLL_BARRIER, nobuf, None, None, -1)

    cdef object _call(self, object comm, int coll, object sendbuf, object recvbuf, object op,
                      object root):
        cdef RunState st = self.st
        cdef FastEntry e = self._lookup(coll, sendbuf, recvbuf, op, root)
        if e is None or st.closed or st.broken is not None:
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
        cdef int64_t ncoll = st.ncoll
        cdef Schedule s = e.s
        cdef nz_engine_t *en = &self.eng.e
        cdef int rc, i, flip = e.flip
        cdef char *snap = NULL
        cdef const char *src = e.srcp
        if src == NULL:
            src = <const char *>cnp.PyArray_DATA(<cnp.ndarray>sendbuf)
        cdef uint64_t nbytes = e.nsrc
        cdef int64_t timeout_ns = <int64_t>(min(st.timeout, 1e9) * 1e9)
        s.hdr.seq = <uint32_t>(seq & 0xFFFFFFFF)  # Schedule.reset, without a Python call
        for i in range(s.nops):
            s.ops[i].done = 0
        # arm the engine as Executor._arm does
        en.failover = e.voting and self.eng.has_health and en.silent_ns > 0
        en.vote_seq = (st.votes & 0xFFFFFFFF) if (self.failover and self.eng.has_health) else -1
        en.vote_coll = ncoll
        en.lazy = e.lazy
        en.nslices = 0
        if e.voting and e.chan >= 0:
            en.nslices = 1
            en.slice_chan[0] = e.chan
        if e.voting and e.lazy:
            snap = e.snapp[flip]
            e.flip = flip ^ 1
        with nogil:
            if snap != NULL:
                memcpy(snap, src, nbytes)
            for i in range(s.npre):
                memcpy(s.pre_dst[i], s.pre_src[i], s.pre_n[i])
            rc = nz_start(en, s.ops, s.nops, s.dtype, s.op)
            if rc == NZ_OK:
                rc = nz_progress(en, s.ops, s.nops, nz_now_ns() + timeout_ns)
            if rc == NZ_OK:
                for i in range(s.navg):
                    nezha_avg_finish(s.avg_ptr[i], s.avg_count[i], s.dtype, s.avg_div)
        result = recvbuf if recvbuf is not None else sendbuf
        snapobj = e.snaps[flip] if snap != NULL else None
        if rc != NZ_OK:  # a control frame, a failure, a vote: the executor takes it from here
            return comm._fast_rest(e.tmpl, seq, s, e.plan, e.ranges, e.lazy, e.voting,
                                   snapobj, rc, result)
        st.last_plan = e.plan
        st.ncoll = ncoll + 1
        if e.lazy:
            st.pending = (ncoll, seq, e.tmpl, e.plan, snapobj)
        elif e.voting:
            st.pending = None
        self.lock.acquire()
        try:
            if st.queue or st.broken is not None:
                more = True  # queued meanwhile by another thread: run it as _drain does
            else:
                more = False
                st.busy = False
                if st.waiters:
                    st.cv.notify_all()
        finally:
            self.lock.release()
        if more:
            comm._drain()
        return result
