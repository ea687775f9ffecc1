# C declarations of include/nezha/*.h used by the engine (mpi4py's libmpi.pxd role).
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t


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


cdef extern from "nezha/nezha_engine.h" nogil:
    enum:
        NZ_SEND
        NZ_RECV
        NZ_RECV_REDUCE
        NZ_RECV_HDR
        NZ_LOCAL_REDUCE
        NZ_DEP_FULL
        NZ_OK
        NZ_ERR_TIMEOUT
        NZ_ERR_CLOSED
        NZ_ERR_SOCKET
        NZ_ERR_MISMATCH
        NZ_ERR_CTRL
        NZ_ERR_REDUCE
        NZ_ERR_INTERNAL

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
        int fd
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

    ctypedef struct nz_engine_t:
        nz_ep_t *eps
        int32_t nep
        int *ctrl_fds
        int32_t nctrl
        int err
        int32_t err_op
        int32_t err_ep
        int err_errno
        int32_t err_ctrl
        int64_t *chan_ns
        uint64_t *chan_bytes
        int32_t nchan
        int64_t spin_ns
        int32_t *qbuf
        int64_t qcap

    int64_t nz_now_ns()
    int nz_start(nz_engine_t *e, nz_op_t *ops, int32_t nops, int dtype, int op)
    int nz_progress(nz_engine_t *e, nz_op_t *ops, int32_t nops, int64_t deadline_ns)
