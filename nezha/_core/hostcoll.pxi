# The host area (include/nezha/nezha_hostcoll.h): one shared segment for the ranks of a
# communicator on one host; set up by nezha/transports/hostcoll.py.

HC_EMISMATCH, HC_EDEAD, HC_ETIMEOUT = NZ_HC_EMISMATCH, NZ_HC_EDEAD, NZ_HC_ETIMEOUT
HC_EABORT, HC_EOP = NZ_HC_EABORT, NZ_HC_EOP


cdef class HostArea:
    """This rank's map of the host area and its round counter. A close from another thread
    (an error seen by the guard) while a call runs must not unmap the area under it: it
    aborts the call, which unmaps on its way out (busy and closing change with the GIL)."""
    cdef nz_hc_t h
    cdef bint busy, closing
    cdef public int64_t calls

    def __cinit__(self):
        nz_hc_init(&self.h)

    @staticmethod
    def map(str name, int me, int n, uint64_t chunk, bytes nonce):
        """Create (me == 0) or open and check the segment name; n ranks, chunk bytes a slot."""
        cdef HostArea a = HostArea()
        cdef bytes nm = name.encode()
        if len(nonce) != NZ_HC_NONCE:
            raise ValueError("nonce must be 32 bytes")
        cdef int rc = nz_hc_map(&a.h, nm, me, n, chunk, <const uint8_t *>PyBytes_AsString(nonce))
        if rc:
            raise _shm_error(rc, "create" if me == 0 else "open", name)
        return a

    def watch(self, pids):
        """Poll the other ranks' processes (pidfd): a death ends any wait at once."""
        cdef int k
        for k, pid in enumerate(pids):
            if k != self.h.me and self.h.pidfd[k] < 0 and pid:
                self.h.pidfd[k] = nz_shm_pidfd(pid)

    def set_spin(self, double seconds):
        self.h.spin_us = <int64_t>(seconds * 1e6)

    def allreduce(self, uintptr_t src, uintptr_t dst, uint64_t count, int es, int dtype,
                  int op, double divisor, uint32_t coll, uint64_t seq, double timeout):
        """Run one allreduce without the GIL; 0 or an HC_E* code (see error())."""
        return self.run(<const char *>src, <char *>dst, count, es, dtype, op, divisor, coll,
                        seq, timeout)

    cdef int run(self, const char *src, char *dst, uint64_t count, int es, int dtype, int op,
                 double divisor, uint32_t coll, uint64_t seq, double timeout):
        cdef int rc
        if self.closing or self.h.hdr == NULL:
            self.h.bad_peer = self.h.me
            return NZ_HC_EABORT
        self.busy = True
        with nogil:
            rc = nz_hc_allreduce(&self.h, src, dst, count, es, dtype, op, divisor, coll, seq,
                                 timeout)
        self.busy = False
        self.calls += 1
        if self.closing:
            nz_hc_unmap(&self.h)
        return rc

    def announce(self, uint64_t seq, uint32_t coll, uint64_t count, uint32_t dtype,
                 uint32_t op):
        """This rank runs collective seq on the rings: a rank waiting for it in the area
        sees the mismatch at once (not at the timeout)."""
        self.announce_c(seq, coll, count, dtype, op)

    cdef inline void announce_c(self, uint64_t seq, uint32_t coll, uint64_t count,
                                uint32_t dtype, uint32_t op) noexcept:
        if self.h.hdr != NULL and not self.closing:
            nz_hc_announce(&self.h, seq, coll, count, dtype, op)

    def error(self):
        """What the last failed call saw: the rank it names and, for a mismatch, that
        rank's call; for an abort, who gave up, why and on whom."""
        d = {"closed": self.closing, "peer": self.h.bad_peer, "seq": self.h.bad_seq, "count": self.h.bad_count,
             "dtype": self.h.bad_dtype, "op": self.h.bad_op, "coll": self.h.bad_coll}
        if self.h.hdr != NULL:
            d.update(abort_rank=nz_hc_abort_rank(&self.h), abort_code=nz_hc_abort_code(&self.h),
                     abort_peer=nz_hc_abort_peer(&self.h))
        return d

    def abort(self, int code=NZ_HC_EABORT, int peer=-1):
        """Make every rank of the host stop waiting in the area (this rank failed)."""
        if self.h.hdr != NULL:
            nz_hc_abort(&self.h, code, peer)

    def close(self):
        self.closing = True
        if self.busy:
            self.abort()
        else:
            nz_hc_unmap(&self.h)

    def __dealloc__(self):
        nz_hc_unmap(&self.h)
