# Included by engine.pyx: endpoints the engine drives through the transport contract
# (include/nezha/nezha_transport.h). Each object owns its transport's C endpoint; the
# Engine keeps a reference for as long as it points at it.

from cpython.bytes cimport PyBytes_AsString


cdef class Endpoint:
    """One endpoint of some transport: the {ops, ctx} pair the engine calls."""
    cdef const nz_transport_ops_t *ops
    cdef void *ctx

    @property
    def kind(self):
        """The transport's name ("tcp", "shm", ...)."""
        return self.ops.name.decode() if self.ops != NULL else None


cdef class TcpEndpoint(Endpoint):
    """A connected, non-blocking TCP socket (the socket stays the mesh's to close).
    zerocopy_min > 0: sends of that many bytes and more go without a copy (MSG_ZEROCOPY,
    NEZHA_ZEROCOPY); a kernel without it leaves them copying (zerocopy_error says why)."""
    cdef nz_tcp_ep_t t
    cdef object sock
    cdef readonly int zerocopy_error

    def __cinit__(self, sock, uint64_t zerocopy_min=0):
        memset(&self.t, 0, sizeof(self.t))
        self.sock = sock
        self.t.fd = sock.fileno()
        self.ops, self.ctx = &nz_tcp_ops, &self.t
        if zerocopy_min:
            self.zerocopy_error = -nz_tcp_zc_enable(&self.t, zerocopy_min)
            if self.t.zc_min:
                self.ops = &nz_tcp_zc_ops

    def zerocopy_counts(self):
        """{sends, bytes, copied, nobufs, full, in_flight}: sends (and their bytes) handed to
        the kernel without a copy; of their completions, how many the kernel copied anyway
        (loopback, a device without scatter-gather); sends that copied because the kernel
        refused (ENOBUFS) or too many were in flight; sends not completed yet."""
        return {"sends": self.t.zc_sends, "bytes": self.t.zc_bytes, "copied": self.t.zc_copied,
                "nobufs": self.t.zc_nobufs, "full": self.t.zc_full,
                "in_flight": <uint32_t>(self.t.zc_next - self.t.zc_tail)}


def _shm_error(int rc, str what, str name):
    import errno, os
    eno = -rc
    if eno == errno.EPERM:
        return PermissionError(eno, f"nezha: shared-memory segment {name} is not this job's "
                               "(wrong owner, mode or nonce)")
    if eno == errno.ENOSPC:
        return OSError(eno, f"nezha: /dev/shm is too small for {name} "
                       f"({os.strerror(eno)}); free space there or set NEZHA_RAILS=tcp")
    return OSError(eno, f"nezha: cannot {what} shared-memory segment {name}: {os.strerror(eno)}")


cdef class ShmEndpoint(Endpoint):
    """Two rings in one shared-memory segment with a peer on this host (nezha_shm.h)."""
    cdef nz_shm_ep_t s
    cdef bint live

    def __cinit__(self):
        self.s.hdr = NULL
        self.s.my_bell = self.s.peer_bell = self.s.pidfd = -1
        self.ops, self.ctx = &nz_shm_ops, &self.s

    @staticmethod
    def create(str name, str bell0, str bell1, uint64_t cap, bytes nonce):
        """Create the segment (side 0) under name, with both doorbells."""
        cdef ShmEndpoint ep = ShmEndpoint()
        cdef bytes n = name.encode(), b0 = bell0.encode(), b1 = bell1.encode()
        if len(nonce) != NZ_SHM_NONCE:
            raise ValueError("nonce must be 32 bytes")
        cdef int rc = nz_shm_create(&ep.s, n, b0, b1, cap, <const uint8_t *>PyBytes_AsString(nonce))
        ep.live = rc == 0
        if rc:
            ep.close()
            raise _shm_error(rc, "create", name)
        return ep

    @staticmethod
    def open(str name, str bell0, str bell1, uint64_t cap, bytes nonce):
        """Open the peer's segment (side 1); every name is unlinked by this call."""
        cdef ShmEndpoint ep = ShmEndpoint()
        cdef bytes n = name.encode(), b0 = bell0.encode(), b1 = bell1.encode()
        if len(nonce) != NZ_SHM_NONCE:
            raise ValueError("nonce must be 32 bytes")
        cdef int rc = nz_shm_open_peer(&ep.s, n, b0, b1, cap, <const uint8_t *>PyBytes_AsString(nonce))
        ep.live = rc == 0
        if rc:
            ep.close()
            raise _shm_error(rc, "open", name)
        return ep

    def watch(self, int pid):
        """Poll the peer process (pidfd): its death closes the endpoint at once."""
        if self.s.pidfd < 0:
            self.s.pidfd = nz_shm_pidfd(pid)
        return self.s.pidfd >= 0

    def corrupt(self):
        """Tests only: publish an impossible head, as a corrupted segment would show it."""
        if self.s.hdr == NULL:
            raise ValueError("closed")
        nz_shm_corrupt(&self.s)

    def close(self):
        """Tell the peer this side is gone, then unmap (idempotent)."""
        if self.live:
            self.ops.close(self.ctx)
            self.live = False
        nz_shm_unmap(&self.s)


FAULT_STALL_TX, FAULT_STALL_RX = NZ_FAULT_STALL_TX, NZ_FAULT_STALL_RX
FAULT_RESET, FAULT_CLOSE, FAULT_CORRUPT = NZ_FAULT_RESET, NZ_FAULT_CLOSE, NZ_FAULT_CORRUPT


cdef class FaultEndpoint(Endpoint):
    """Tests: inner behind the fault layer (nezha_fault.h), obeying word index of table
    (a writable buffer of uint32 shared with the test, e.g. an mmap of NEZHA_FAULTS; held
    exported while this lives, so it cannot be unmapped under the engine)."""
    cdef nz_fault_ep_t f
    cdef Endpoint _inner
    cdef Py_buffer view
    cdef bint held

    def __cinit__(self, Endpoint inner, object table, Py_ssize_t index, bint ctrl=False):
        PyObject_GetBuffer(table, &self.view, PyBUF_WRITABLE)
        self.held = True
        if index < 0 or (index + 1) * 4 > self.view.len:
            raise IndexError(f"fault word {index} is outside the table ({self.view.len} bytes)")
        self._inner = inner
        nz_fault_init(&self.f, inner.ops, inner.ctx, <uint32_t *>self.view.buf + index, ctrl)
        self.ops, self.ctx = &self.f.ops, &self.f

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)

    @property
    def inner(self):
        """The wrapped endpoint."""
        return self._inner
