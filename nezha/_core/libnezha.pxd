# C declarations of include/nezha/*.h used by the engine (mpi4py's libmpi.pxd role).
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef extern from "nezha/nezha_types.h" nogil:
    size_t nezha_dtype_size(int dt)
    int nezha_dtype_is_float(int dt)


cdef extern from "nezha/nezha_wire.h" nogil:
    enum: NEZHA_WIRE_MAGIC
    ctypedef struct nezha_hdr_t:
        uint32_t magic
        uint32_t seq
        uint8_t coll
        uint8_t dtype
        uint8_t op
        uint8_t algo
        int32_t root
        uint64_t count
        uint32_t plan
        int32_t src_rank


cdef extern from "nezha/nezha_transport.h" nogil:
    enum: NZ_TRANSPORT_VERSION
    enum: NZ_CAP_ORDERED
    enum: NZ_CAP_PEEK
    enum: NZ_CAP_SHARED
    ctypedef struct nz_transport_ops_t:
        int version
        const char *name
        uint32_t caps
        void (*close)(void *ctx)


cdef extern from "nezha/nezha_tcp.h" nogil:
    ctypedef struct nz_tcp_ep_t:
        int fd
        uint64_t zc_min
        uint32_t zc_next, zc_tail
        uint64_t zc_sends, zc_bytes, zc_copied, zc_nobufs, zc_full
    const nz_transport_ops_t nz_tcp_ops
    const nz_transport_ops_t nz_tcp_zc_ops
    int nz_tcp_zc_enable(nz_tcp_ep_t *t, uint64_t min_bytes)


cdef extern from "nezha/nezha_shm.h" nogil:
    enum: NZ_SHM_NONCE
    ctypedef struct nz_shm_hdr_t:
        uint32_t closed[2]
    ctypedef struct nz_shm_ep_t:
        nz_shm_hdr_t *hdr
        int side
        int my_bell, peer_bell, pidfd
        uint64_t cap
        uint64_t head, tail
    const nz_transport_ops_t nz_shm_ops
    size_t nz_shm_len(uint64_t cap)
    int nz_shm_create(nz_shm_ep_t *s, const char *name, const char *bell0, const char *bell1,
                      uint64_t cap, const uint8_t *nonce)
    int nz_shm_open_peer(nz_shm_ep_t *s, const char *name, const char *bell0,
                         const char *bell1, uint64_t cap, const uint8_t *nonce)
    int nz_shm_pidfd(int pid)
    void nz_shm_unmap(nz_shm_ep_t *s)
    void nz_shm_corrupt(nz_shm_ep_t *s)


cdef extern from "nezha/nezha_hostcoll.h" nogil:
    enum: NZ_HC_NONCE
    enum: NZ_HC_MAX
    enum: NZ_HC_EMISMATCH, NZ_HC_EDEAD, NZ_HC_ETIMEOUT, NZ_HC_EABORT, NZ_HC_EOP
    ctypedef struct nz_hc_hdr_t:
        uint64_t abort
    ctypedef struct nz_hc_t:
        nz_hc_hdr_t *hdr
        int me, n
        int64_t spin_us
        int pidfd[256]
        int bad_peer
        uint64_t bad_seq, bad_count
        uint32_t bad_dtype, bad_op, bad_coll
    void nz_hc_init(nz_hc_t *h)
    int nz_hc_map(nz_hc_t *h, const char *name, int me, int n, uint64_t chunk,
                  const uint8_t *nonce)
    void nz_hc_unmap(nz_hc_t *h)
    void nz_hc_abort(nz_hc_t *h, int code, int peer)
    int nz_hc_abort_rank(nz_hc_t *h)
    int nz_hc_abort_code(nz_hc_t *h)
    int nz_hc_abort_peer(nz_hc_t *h)
    void nz_hc_announce(nz_hc_t *h, uint64_t seq, uint32_t coll, uint64_t count,
                        uint32_t dtype, uint32_t op)
    int nz_hc_allreduce(nz_hc_t *h, const char *inp, char *out, uint64_t count, int es,
                        int dtype, int op, double divisor, uint32_t coll, uint64_t seq,
                        double timeout_s)


cdef extern from "nezha/nezha_fault.h" nogil:
    enum:
        NZ_FAULT_STALL_TX
        NZ_FAULT_STALL_RX
        NZ_FAULT_RESET
        NZ_FAULT_CLOSE
        NZ_FAULT_CORRUPT
    ctypedef struct nz_fault_ep_t:
        nz_transport_ops_t ops
    void nz_fault_init(nz_fault_ep_t *f, const nz_transport_ops_t *inner, void *in_tx,
                       uint32_t *word, int ctrl)


cdef extern from "nezha/nezha_health.h" nogil:
    enum:
        NZ_CTRL_MAGIC
        NZ_FRAME_HEARTBEAT
        NZ_FRAME_ABORT
        NZ_FRAME_STATUS
        NZ_VOTE_RUNNING
        NZ_VOTE_CLOSING
    ctypedef struct nz_frame_t:
        uint32_t magic
        uint16_t type
        uint16_t kind
        uint32_t seq
        uint32_t len
        uint64_t mask
        uint64_t heard
        int64_t coll
    ctypedef struct nz_ctrl_t:
        const nz_transport_ops_t *tr
        void *tx
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct nz_health_t:
        int32_t n
        int32_t size
        nz_ctrl_t *ctrl
        int64_t *last_heard
        int64_t *since
        uint8_t *closed
        pthread_mutex_t *wlock
        pthread_mutex_t *rlock
        int64_t interval_ns
        int evfd
        int gfd
        int64_t voting_seq
        int hwake
        int64_t own_seq[2]
        uint64_t vote_resends
        uint64_t pokes_answered
        uint64_t polls
        uint64_t refused
        uint64_t beats_skipped
        int64_t *status_seq
        uint64_t *status_mask
        uint64_t *status_heard
        int64_t *status_coll
        uint16_t *status_flags
        pthread_mutex_t ilock
        pthread_mutex_t slock
        char *inbox
        size_t ilen
        size_t icap
        char *rbuf
        uint32_t *rlen
    int nz_health_start(nz_health_t *h)
    void nz_health_stop(nz_health_t *h)
    int nz_health_realtime(nz_health_t *h, int prio)
    int nz_health_send(nz_health_t *h, int32_t i, const nz_frame_t *f, const char *payload)
    int nz_health_wait_vote(nz_health_t *h, int ms)
    int pthread_mutex_init(pthread_mutex_t *m, void *attr)
    int pthread_mutex_lock(pthread_mutex_t *m)
    int pthread_mutex_trylock(pthread_mutex_t *m)
    int pthread_mutex_unlock(pthread_mutex_t *m)
    int eventfd(unsigned int initval, int flags)
    enum: EFD_NONBLOCK
    enum: EFD_CLOEXEC


cdef extern from "nezha/nezha_engine.h" nogil:
    enum:
        NZ_SEND
        NZ_RECV
        NZ_RECV_REDUCE
        NZ_RECV_HDR
        NZ_LOCAL_REDUCE
        NZ_DEP_FULL
        NZ_DEP_STARTED
        NZ_OK
        NZ_ERR_TIMEOUT
        NZ_ERR_CLOSED
        NZ_ERR_SOCKET
        NZ_ERR_MISMATCH
        NZ_ERR_CTRL
        NZ_ERR_REDUCE
        NZ_ERR_INTERNAL
        NZ_ERR_CHANFAIL
        NZ_ERR_VOTE
        NZ_WHY_ERROR
        NZ_WHY_CLOSED
        NZ_WHY_SILENT
        NZ_WHY_PEER

    ctypedef struct nz_op_t:
        char *ptr
        const char *src
        uint64_t nbytes
        uint64_t done
        int32_t ep
        int32_t dep[2]
        int16_t chan
        uint8_t kind
        uint8_t flags

    ctypedef struct nz_ep_t:
        const nz_transport_ops_t *tr
        void *tx
        int32_t chan
        int32_t peer
        char *stage
        uint64_t stage_cap
        uint64_t stage_len
        int32_t *sq
        int32_t *rq
        int32_t nsq, nrq, sh, rh
        uint64_t bytes_sent
        uint64_t bytes_recv
        uint64_t reads
        int tx_watch

    ctypedef struct nz_engine_t:
        nz_ep_t *eps
        int32_t nep
        int err
        int32_t err_op
        int32_t err_ep
        int err_errno
        int32_t err_ctrl
        int64_t *chan_ns
        uint64_t *chan_bytes
        int32_t nchan
        int64_t spin_ns
        int64_t run_spin_ns
        int failover
        nz_health_t *health
        int32_t *chan_rail
        int64_t silent_ns
        uint64_t live_rails
        uint64_t chan_failed
        uint8_t *fail_why
        int32_t *fail_peer
        int32_t *fail_errno
        int64_t *fail_ns
        int64_t vote_seq
        int64_t vote_coll
        int lazy
        int32_t *slice_chan
        int32_t nslices
        int64_t *data_heard
        int32_t *qbuf
        int64_t qcap
        uint64_t tx_kicks
        uint64_t run_polls
        nz_op_t *trace_ops
        int64_t *trace_t
        const nz_op_t *trace_base
        int32_t trace_cap
        int32_t trace_min
        int32_t trace_n
        int64_t trace_t0

    int64_t nz_now_ns()
    int nz_start(nz_engine_t *e, nz_op_t *ops, int32_t nops, int dtype, int op)
    int nz_progress(nz_engine_t *e, nz_op_t *ops, int32_t nops, int64_t deadline_ns)
    void nz_set_no_spin(int on)
    uint64_t nz_heard_rails(nz_engine_t *e, int32_t nrails, int32_t rank, int64_t steady_ns,
                            int64_t quiet_ns)
    void nz_rail_restart_steady(nz_engine_t *e, int32_t r)
    int nz_vote(nz_engine_t *e, int32_t rank, uint32_t seq, int64_t coll, uint64_t mask,
                uint16_t flags, uint64_t heard, uint64_t live_rails, int32_t nrails,
                int64_t deadline_ns, int64_t *colls, uint64_t *masks, uint16_t *oflags,
                uint64_t *iheard)
