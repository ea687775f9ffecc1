"""In-network aggregation: the service (Server) and one rank's client (Client), both in C
(include/nezha/nezha_ina.h); every blocking call runs without the GIL. See docs/ina.md."""
from cpython.buffer cimport (PyBUF_C_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_GetBuffer)
from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset

from nezha.errors import (AuthenticationError, InvalidUsageError, NezhaTimeout,
                          RailSystemError)


cdef extern from "nezha/nezha_ina.h" nogil:
    int INA_MAX_PAYLOAD
    int INA_MAX_RANKS
    int INA_HDR
    int INA_IP_UDP
    int INA_VERSION
    uint32_t ina_mtu_chunk(int mtu)
    int EINTR, ETIMEDOUT, ECONNREFUSED, EACCES, EINVAL, EOPNOTSUPP, EBUSY, ENOTCONN

    ctypedef struct ina_srv_stats_t:
        uint64_t rx, tx, data_added, dup_pending, dup_resent, stale, results, bad_token
        uint64_t bad_source, bad_meta, malformed, auth_ok, auth_fail, refused_busy
        uint64_t jobs_created, jobs_expired, jobs_closed, send_errors, jobs_active, slots_free

    ctypedef struct ina_server_t:
        int fd
        uint16_t port
        int nslots, quota, open_mode
        int64_t job_timeout_ms
        int stop
        uint32_t die_seq, die_chunk
        ina_srv_stats_t st
        int64_t spin_us

    int ina_server_init(ina_server_t *s, const char *addr, int port, int nslots, int quota,
                        int64_t job_timeout_ms, int nsecrets, const uint8_t *const *secrets,
                        const size_t *secret_len, char *err, size_t errlen)
    int ina_server_run(ina_server_t *s)
    void ina_server_destroy(ina_server_t *s)

    ctypedef struct ina_cli_stats_t:
        uint64_t tx, rx, retrans, timeouts, stale_results, fault_dropped, fault_duplicated
        uint64_t fault_reordered, fault_results_dropped, collectives, fast_retrans
        uint64_t result_bytes, tail_probes

    ctypedef struct ina_client_t:
        int fd
        uint64_t token
        uint16_t rank, nranks, nslots
        uint32_t job_timeout_ms
        uint32_t seq
        int64_t last_ms
        uint32_t drop_every, dup_every, reorder_every, drop_result_every
        uint32_t chunk_bytes
        double srtt_us, rttvar_us
        int64_t min_rto_us, max_rto_us
        int64_t probe_min_us
        ina_cli_stats_t st
        int64_t done_prefix
        int64_t pong_us, late_ms
        uint32_t peers_age_ms
        uint16_t oldest_rank
        uint16_t srv_version
        int64_t spin_us
        char err[256]

    void ina_client_init(ina_client_t *c)
    void ina_client_close(ina_client_t *c)
    int ina_client_register(ina_client_t *c, const char *addr, int port, const uint8_t *id,
                            const uint8_t *key, int rank, int nranks, int want_slots, int timeout_ms)
    int ina_client_allreduce(ina_client_t *c, void *buf, size_t count, int dtype, int op,
                             int window, int timeout_ms)
    int ina_client_reduce_scatter(ina_client_t *c, const void *send, void *recv, size_t block,
                                  size_t lo, size_t hi, int dtype, int op, int window,
                                  int timeout_ms)
    int ina_client_allgather(ina_client_t *c, const void *send, void *recv, size_t block,
                             size_t lo, size_t hi, int dtype, int window, int timeout_ms)
    int ina_client_ping(ina_client_t *c) nogil
    int ina_client_rtt(ina_client_t *c, int n, int ms_each, double *out_us) nogil
    int ina_client_fresh(const ina_client_t *c)
    int ina_reduce_support(int dtype, int op)
    size_t ina_chunk_elems(int dtype, size_t chunk_bytes)
    int INA_MTU_CHUNK
    void ina_job_credentials(const uint8_t *secret, size_t slen, const uint8_t *tag,
                             uint8_t *id, uint8_t *key)
    void ina_hmac(const uint8_t *key, size_t klen, const void *msg, size_t n, uint8_t *out)
    size_t nezha_dtype_size(int dt)
    int64_t ina_now_ms()

MAX_PAYLOAD = INA_MAX_PAYLOAD
MAX_RANKS = INA_MAX_RANKS
HEADER_BYTES = INA_HDR
IP_UDP_BYTES = INA_IP_UDP  # IPv4 + UDP headers of every datagram
VERSION = INA_VERSION

_SRV_FIELDS = ("rx", "tx", "data_added", "dup_pending", "dup_resent", "stale", "results",
               "bad_token", "bad_source", "bad_meta", "malformed", "auth_ok", "auth_fail",
               "refused_busy", "jobs_created", "jobs_expired", "jobs_closed", "send_errors",
               "jobs_active", "slots_free")
_CLI_FIELDS = ("tx", "rx", "retrans", "timeouts", "stale_results", "fault_dropped",
               "fault_duplicated", "fault_reordered", "fault_results_dropped", "collectives",
               "fast_retrans", "result_bytes", "tail_probes")


def reduce_support(int dtype, int op):
    """True if the service aggregates this (dtype, op): SUM/MIN/MAX of int32, int64, float16,
    bfloat16, float32, float64, and AVG of the floats. PROD and bit ops are not offloaded."""
    return bool(ina_reduce_support(dtype, op))


MTU_CHUNK = INA_MTU_CHUNK


def mtu_chunk(int mtu):
    """Payload bytes of one datagram a client picks on a route of this MTU when
    NEZHA_INA_CHUNK is 0 (the C rule of registration): 8192 at MTU 9000, 1432 at 1500."""
    return ina_mtu_chunk(mtu)


def chunk_elems(int dtype, int chunk_bytes=INA_MTU_CHUNK):
    """Elements of dtype in one datagram's payload of chunk_bytes."""
    return ina_chunk_elems(dtype, chunk_bytes)


def hmac_sha256(bytes key, bytes msg):
    """The C HMAC-SHA256 (for tests against hashlib)."""
    cdef uint8_t out[32]
    ina_hmac(<const uint8_t *>key, len(key), <const char *>msg, len(msg), out)
    return bytes(out[:32])


def job_credentials(bytes secret, bytes tag):
    """(id, key) of the job with this secret and 8-byte tag, as the service sees it."""
    cdef uint8_t id_[16]
    cdef uint8_t key[32]
    if len(tag) != 8:
        raise ValueError("tag must be 8 bytes")
    ina_job_credentials(<const uint8_t *>secret, len(secret), <const uint8_t *>tag, id_, key)
    return bytes(id_[:16]), bytes(key[:32])


def _error(int rc, str msg):
    """The exception of a client call's status rc < 0."""
    if rc == -ETIMEDOUT:
        return NezhaTimeout(msg)
    if rc == -EACCES:
        return AuthenticationError(msg)
    if rc in (-EINVAL, -EOPNOTSUPP):
        return InvalidUsageError(msg)
    return RailSystemError(msg, rail="ina")


def _raise(int rc, str msg):
    raise _error(rc, msg)


# The communicator's fast path (engine.pyx, fastpath.pxi) runs a small allreduce of a
# registered client through these two, without the GIL and without importing this module's
# C: it gets their addresses from Client.small_handle().
cdef int _small_fresh(void *c) noexcept nogil:
    return ina_client_fresh(<ina_client_t *>c)


cdef int _small_run(void *c, void *buf, size_t count, int dtype, int op,
                    int timeout_ms) noexcept nogil:
    # one datagram: window 1 (the result comes back whole or not at all, and the buffer
    # is written only then, so after a failure it still holds the input)
    return ina_client_allreduce(<ina_client_t *>c, buf, count, dtype, op, 1, timeout_ms)


cdef class Server:
    """The aggregation service on one UDP address. serve() runs the data path (C, no GIL)
    until stop(); stats() reads its counters."""

    cdef ina_server_t *s
    cdef bint serving, closed
    cdef readonly str addr

    def __cinit__(self):
        self.s = <ina_server_t *>calloc(1, sizeof(ina_server_t))
        if self.s == NULL:
            raise MemoryError()
        self.s.fd = -1

    def __init__(self, str addr="0.0.0.0", int port=0, int slots=512, int quota=128,
                 double job_timeout=60.0, secrets=()):
        cdef char err[256]
        cdef const uint8_t *sp[16]
        cdef size_t sl[16]
        cdef int rc
        secrets = [bytes(x) for x in secrets]
        if len(secrets) > 16:
            raise InvalidUsageError("at most 16 job secrets")
        for i, x in enumerate(secrets):
            sp[i] = <const uint8_t *>(<bytes>x)
            sl[i] = len(x)
        err[0] = 0
        b = addr.encode()
        rc = ina_server_init(self.s, b, port, slots, quota, <int64_t>(job_timeout * 1000),
                             len(secrets), sp, sl, err, sizeof(err))
        if rc < 0:
            msg = err.decode(errors="replace")
            ina_server_destroy(self.s)
            raise InvalidUsageError(f"nezha ina serve: {msg}") if rc == -EINVAL else \
                RailSystemError(f"nezha ina serve: {msg}", rail="ina")
        self.addr = addr

    @property
    def port(self):
        """The bound UDP port."""
        return self.s.port

    @property
    def open(self):
        """True if any job may register (no secret given): trust on first use."""
        return bool(self.s.open_mode)

    def serve(self):
        """Run the data path until stop() (from another thread) or a signal (KeyboardInterrupt
        etc. propagate)."""
        cdef int rc
        if self.closed:
            raise InvalidUsageError("INA server is closed")
        self.serving = True
        try:
            while not self.s.stop:
                with nogil:
                    rc = ina_server_run(self.s)
                # every pass (<= 100 ms), not only on EINTR: a signal the kernel delivers to
                # another thread (numpy's, the --stats reporter) never interrupts our poll(),
                # so SIGTERM went unnoticed now and then (tests/test_fuzz.py, the INA case)
                PyErr_CheckSignals()
        finally:
            self.serving = False
            if self.closed:
                ina_server_destroy(self.s)

    def stop(self):
        """Make serve() return within about 100 ms."""
        self.s.stop = 1

    def set_spin(self, double seconds):
        """After a datagram, keep looking this long before sleeping in poll() (0, the
        default: never)."""
        self.s.spin_us = <int64_t>(seconds * 1e6 + 0.5)  # 50 * 1e-6 * 1e6 is 49.99...

    @property
    def spin(self):
        """The spin set_spin set, in seconds (0: none)."""
        return self.s.spin_us * 1e-6

    def die_at(self, uint32_t seq, uint32_t chunk):
        """Test hook: hear nothing more, and stop, at the first datagram of a job's
        collective number seq (counted from 1) or later carrying chunk >= chunk: a service
        killed mid-collective for sure."""
        self.s.die_seq, self.s.die_chunk = seq, chunk

    def stats(self):
        """The service's counters as a dict."""
        cdef ina_srv_stats_t st = self.s.st
        cdef dict d = st
        return {k: d[k] for k in _SRV_FIELDS}

    def close(self):
        """Stop and release the socket and slots (after serve() returns, if it runs)."""
        if self.closed:
            return
        self.closed = True
        self.s.stop = 1
        if not self.serving:
            ina_server_destroy(self.s)

    def __dealloc__(self):
        if self.s != NULL and not self.serving:
            ina_server_destroy(self.s)
            free(self.s)
            self.s = NULL


cdef class Client:
    """One rank of one job on one service. Not for concurrent use by two threads (one
    collective at a time); open one Client per concurrent stream (distinct tags)."""

    cdef ina_client_t c
    cdef bint busy
    cdef readonly str where

    def __cinit__(self):
        ina_client_init(&self.c)

    def register(self, str addr, int port, bytes secret, bytes tag, int rank, int nranks,
                 int want_slots=0, double timeout=10.0, int chunk_bytes=0):
        """Prove the job secret to the service and get the job's token and slot share.
        chunk_bytes: payload per datagram (a multiple of 8, <= MAX_PAYLOAD; 0 = from the
        route's MTU); every rank of the job must use the same."""
        cdef uint8_t id_[16]
        cdef uint8_t key[32]
        cdef int rc, tmo = <int>(timeout * 1000)
        if len(tag) != 8:
            raise InvalidUsageError("INA job tag must be 8 bytes")
        if not secret:
            raise InvalidUsageError("INA registration needs the job secret")
        self.where = f"{addr}:{port}"
        if chunk_bytes:
            self.c.chunk_bytes = chunk_bytes
        ina_job_credentials(<const uint8_t *>secret, len(secret), <const uint8_t *>tag, id_, key)
        b = addr.encode()
        cdef const char *cb = b
        self._enter()
        try:
            with nogil:
                rc = ina_client_register(&self.c, cb, port, id_, key, rank, nranks, want_slots, tmo)
        finally:
            self.busy = False
        if rc < 0:
            _raise(rc, self.c.err.decode(errors="replace"))

    cdef _enter(self):
        if self.busy:
            raise InvalidUsageError("this INA client is already in a call (one at a time)")
        self.busy = True

    def allreduce(self, buf, int dtype, int op, int window=64, double timeout=10.0):
        """In-place allreduce of the whole of buf (any writable C-contiguous buffer) over the
        service; the GIL is released for the whole collective. Every rank calls it with the
        same size, dtype, op and window."""
        cdef Py_buffer v
        cdef size_t es = nezha_dtype_size(dtype), count
        cdef int rc, tmo = <int>(timeout * 1000)
        if es == 0:
            raise InvalidUsageError(f"unknown dtype {dtype}")
        PyObject_GetBuffer(buf, &v, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
        try:
            if <size_t>v.len % es:
                raise InvalidUsageError(f"buffer of {v.len} bytes is not whole elements of {es}")
            count = <size_t>v.len // es
            self._enter()
            try:
                with nogil:
                    rc = ina_client_allreduce(&self.c, v.buf, count, dtype, op, window, tmo)
            finally:
                self.busy = False
        finally:
            PyBuffer_Release(&v)
        if rc < 0:
            _raise(rc, self.c.err.decode(errors="replace"))

    def blocks(self, send, recv, int dtype, int op, size_t block, size_t lo, size_t hi,
               bint gather, int window=64, double timeout=10.0):
        """reduce_scatter (gather False: send nranks blocks, recv this rank's one) or
        allgather (gather True: send this rank's block, recv nranks blocks) of elements
        [lo, hi) of every block of `block` elements; the GIL is released throughout. Every
        rank calls it with the same block, range, dtype, op and window."""
        cdef Py_buffer sv, rv
        cdef size_t es = nezha_dtype_size(dtype), nb = self.c.nranks
        cdef int rc, tmo = <int>(timeout * 1000)
        if es == 0:
            raise InvalidUsageError(f"unknown dtype {dtype}")
        if not lo <= hi <= block:
            raise InvalidUsageError(f"INA range [{lo}, {hi}) outside a block of {block}")
        PyObject_GetBuffer(send, &sv, PyBUF_C_CONTIGUOUS)
        try:
            PyObject_GetBuffer(recv, &rv, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
            try:
                if <size_t>sv.len != (1 if gather else nb) * block * es or \
                        <size_t>rv.len != (nb if gather else 1) * block * es:
                    raise InvalidUsageError(
                        f"INA {'allgather' if gather else 'reduce_scatter'}: buffers of "
                        f"{sv.len} and {rv.len} bytes for {nb} blocks of {block} x {es} bytes")
                self._enter()
                try:
                    with nogil:
                        if gather:
                            rc = ina_client_allgather(&self.c, sv.buf, rv.buf, block, lo, hi,
                                                      dtype, window, tmo)
                        else:
                            rc = ina_client_reduce_scatter(&self.c, sv.buf, rv.buf, block, lo,
                                                           hi, dtype, op, window, tmo)
                finally:
                    self.busy = False
            finally:
                PyBuffer_Release(&rv)
        finally:
            PyBuffer_Release(&sv)
        if rc < 0:
            _raise(rc, self.c.err.decode(errors="replace"))

    def small_handle(self):
        """(client, fresh, run) addresses for the communicator's fast path: fresh(client)
        says whether the job is surely still registered (else: the slow path, which
        registers again); run(client, buf, count, dtype, op, timeout_ms) is allreduce()
        without the GIL, 0 or -errno (then error() tells). The caller keeps this Client
        alive and calls run from one thread at a time, as allreduce."""
        return (<uintptr_t>&self.c, <uintptr_t>&_small_fresh, <uintptr_t>&_small_run)

    def error(self, int rc):
        """The exception of status rc (< 0) of the last call, with its message."""
        return _error(rc, self.c.err.decode(errors="replace"))

    @property
    def version(self):
        """The service's protocol version (1: allreduce only; 2: also reduce_scatter and
        allgather)."""
        return self.c.srv_version

    def _set_version(self, int version):
        """Test hook: act as if the service had said this protocol version."""
        self.c.srv_version = version

    def set_faults(self, int drop_every=0, int dup_every=0, int reorder_every=0,
                   int drop_result_every=0):
        """Test hook: drop / duplicate / swap-with-next every k-th data datagram sent, drop
        every k-th result received (0 = off)."""
        self.c.drop_every = drop_every
        self.c.dup_every = dup_every
        self.c.reorder_every = reorder_every
        self.c.drop_result_every = drop_result_every

    def set_rto(self, double min_ms=5.0, double max_ms=200.0, double probe_ms=1.0):
        """Bounds of the retransmission timeout (RTT-based in between), and the floor of the
        tail probe's timeout (0: no tail probe)."""
        self.c.min_rto_us = <int64_t>(min_ms * 1000)
        self.c.max_rto_us = <int64_t>(max_ms * 1000)
        self.c.probe_min_us = <int64_t>(probe_ms * 1000)

    def stats(self):
        """This rank's counters, plus the smoothed round trip of one chunk."""
        cdef ina_cli_stats_t st = self.c.st
        cdef dict d = st
        out = {k: d[k] for k in _CLI_FIELDS}
        out["srtt_us"] = self.c.srtt_us
        return out

    @property
    def token(self):
        """The job token (tests use it to play a stranger who learned it)."""
        return self.c.token

    def ping(self):
        """Send a heartbeat to the service (safe while another thread is in allreduce): the
        other ranks then wait for this one while it is late, instead of failing the rail."""
        with nogil:
            ina_client_ping(&self.c)

    def rtt(self, int n=5, double each=0.2):
        """Round trips (seconds) of n PINGs to the service, one after another, each waited
        for at most `each` seconds (a lost one is left out). Not while a collective runs."""
        cdef double out[64]
        cdef int rc, ms = <int>(each * 1000)
        if not 0 < n <= 64:
            raise ValueError("rtt: 1..64 pings")
        self._enter()
        try:
            with nogil:
                rc = ina_client_rtt(&self.c, n, ms, out)
        finally:
            self.busy = False
        if rc < 0:
            _raise(rc, f"INA service {self.where}: round-trip probe")
        return [out[i] * 1e-6 for i in range(rc)]

    def set_spin(self, double seconds):
        """Before sleeping in poll() for results, keep looking this long (0: never)."""
        self.c.spin_us = <int64_t>(seconds * 1e6 + 0.5)

    def set_late(self, double seconds):
        """How long a rank waits past the no-progress timeout while the service answers and
        hears every rank (one of them is late)."""
        self.c.late_ms = <int64_t>(seconds * 1000)

    @property
    def done_prefix(self):
        """Elements of the last allreduce's buffer that were final when it returned (all
        after success; after a failure those below the first chunk without a result)."""
        return self.c.done_prefix

    @property
    def chunk_bytes(self):
        """Payload bytes per datagram."""
        return self.c.chunk_bytes

    @property
    def nslots(self):
        """Slots of the job's share (the largest useful window)."""
        return self.c.nslots

    @property
    def rank(self):
        return self.c.rank

    @property
    def nranks(self):
        return self.c.nranks

    @property
    def job_timeout(self):
        """Seconds of silence after which the service frees the job's slots."""
        return self.c.job_timeout_ms / 1000.0

    @property
    def idle(self):
        """Seconds since this client last heard from the service."""
        return (ina_now_ms() - self.c.last_ms) / 1000.0

    @property
    def fd(self):
        return self.c.fd

    def close(self):
        """Say goodbye to the service (best effort) and close the socket."""
        if self.busy:
            raise InvalidUsageError("INA client is in a call")
        ina_client_close(&self.c)

    def __dealloc__(self):
        ina_client_close(&self.c)
