"""The engine: schedules of send/receive/reduce ops run over every rail without the GIL."""
# Vocabulary (docs/glossary.md): a *channel* is one lane of one rail (a rail with
# NEZHA_SOCKET_NCONNS=2 has two channels); endpoint index = channel * size + peer.
# A *slice* is the part of a collective's buffer that one channel carries; each builder
# below lays out one algorithm for one slice. Builders run once per collective per
# channel (never per chunk): the pipelining happens inside the C loop.

from cpython.buffer cimport (PyBUF_ANY_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_GetBuffer)
from cpython.bytes cimport PyBytes_FromStringAndSize
from posix.unistd cimport close
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


def now_ns():
    """CLOCK_MONOTONIC in nanoseconds (the engine's clock)."""
    return nz_now_ns()


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
        cdef int32_t i
        self.hdr.seq = seq
        for i in range(self.nops):
            self.ops[i].done = 0

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

    # ---- ring building blocks ------------------------------------------------------

    cdef int ring_rs(self, int chan, char **out, const char **a, uint64_t *nb,
                     int32_t *send_idx, const int *grp=NULL, int n=0, int me=-1,
                     int base_dep=-1, const int32_t *bdep=NULL) except -1:
        """Ring reduce-scatter over n blocks among the ranks grp[0..n) (default: every rank,
        n = size); the rank at position me ends with block me reduced.

        Step s sends block me-s-1 (own data at s=0, else the partial just reduced) and
        receives block me-s-2, reducing it with the own contribution a[b]. base_dep, when
        given, must finish before a[] may be read; bdep[b], when given, is the op that
        produces a[b] instead (of the same size: it streams). Returns the op that finishes
        block me."""
        if grp == NULL:
            n, me = self.size, self.rank
        cdef int s, sb, rb, last = -1
        cdef int nxt = _gpeer(grp, n, me + 1), prv = _gpeer(grp, n, me - 1)
        for s in range(n - 1):
            sb = _mod(me - s - 1, n)
            rb = _mod(me - s - 2, n)
            if s == 0:
                send_idx[s] = self.add(NZ_SEND, chan, nxt, <char *>a[sb], NULL, nb[sb],
                                       bdep[sb] if bdep != NULL else base_dep)
            else:
                send_idx[s] = self.add(NZ_SEND, chan, nxt, out[sb], NULL, nb[sb], last)
            last = self.add(NZ_RECV_REDUCE, chan, prv, out[rb], a[rb], nb[rb],
                            bdep[rb] if bdep != NULL else base_dep)
        return last

    cdef int ring_ag(self, int chan, char **out, const char *own, uint64_t *nb,
                     int first_dep, int32_t *free_idx, const int *grp=NULL, int n=0,
                     int me=-1, int32_t *recv_idx=NULL) except -1:
        """Ring allgather among grp[0..n) (default: every rank); the rank at position me
        starts owning block me (at own, or out[me] when own is NULL).

        Step s forwards block me-s and receives block me-s-1 (its op goes to recv_idx[s]
        when given); a receive waits until free_idx[s] (an earlier send of that block's
        memory) is done."""
        if grp == NULL:
            n, me = self.size, self.rank
        cdef int s, sb, rb, last = first_dep
        cdef int nxt = _gpeer(grp, n, me + 1), prv = _gpeer(grp, n, me - 1)
        for s in range(n - 1):
            sb = _mod(me - s, n)
            rb = _mod(me - s - 1, n)
            if s == 0 and own != NULL:
                self.add(NZ_SEND, chan, nxt, <char *>own, NULL, nb[sb])
            else:
                self.add(NZ_SEND, chan, nxt, out[sb], NULL, nb[sb], last)
            last = self.add(NZ_RECV, chan, prv, out[rb], NULL, nb[rb],
                            free_idx[s] if free_idx != NULL else -1)
            if recv_idx != NULL:
                recv_idx[s] = last
        return last

    cdef int blocks(self, uint64_t count, char *out, const char *a, char **po, const char **pa,
                    uint64_t *nb) except -1:
        # Split count elements into size nearly equal blocks (sizes differ by at most one).
        cdef int b, n = self.size
        cdef uint64_t lo, hi
        for b in range(n):
            lo = (count * b) // n
            hi = (count * (b + 1)) // n
            po[b] = out + lo * self.esize
            pa[b] = a + lo * self.esize
            nb[b] = (hi - lo) * self.esize
        return 0

    # ---- algorithms, one slice on one channel each --------------------------------

    def ring_allreduce(self, int chan, uintptr_t out, uintptr_t a, uint64_t count):
        """Pipelined ring allreduce: reduce-scatter then allgather (2(n-1)/n S on the wire)."""
        cdef int n = self.size
        if n == 1:
            self.pre_copy(<char *>out, <const char *>a, count * self.esize)
            return
        cdef char **po = <char **>malloc(n * sizeof(char *))
        cdef const char **pa = <const char **>malloc(n * sizeof(char *))
        cdef uint64_t *nb = <uint64_t *>malloc(n * sizeof(uint64_t))
        cdef int32_t *sidx = <int32_t *>malloc(n * sizeof(int32_t))
        try:
            self.blocks(count, <char *>out, <const char *>a, po, pa, nb)
            last = self.ring_rs(chan, po, pa, nb, sidx)
            self.ring_ag(chan, po, NULL, nb, last, sidx)
        finally:
            free(po); free(<void *>pa); free(nb); free(sidx)

    def hier_allreduce(self, int chan, uintptr_t out, uintptr_t a, uint64_t count,
                       list local, list cross, uint64_t chunk):
        """Hierarchical allreduce for several ranks per host, chunk elements at a time:
        reduce-scatter within the host (local: its ranks, in order), an allreduce of this
        rank's share across hosts with the ranks at the same local position (cross: one per
        host, in host order), allgather within the host. A host's NIC carries
        2(H-1)/H * S instead of a flat ring's 2(N-1)/N * S, and every local rank drives
        it at once. Chunks pipeline: one chunk crosses hosts while the next is reduced."""
        cdef uint64_t es = self.esize, off = 0, cnt
        if chunk == 0:
            chunk = count if count else 1
        while off < count or (count == 0 and off == 0):
            cnt = min(chunk, count - off)
            self._hier_chunk(chan, out + off * es, a + off * es, cnt, local, cross)
            off += cnt
            if count == 0:
                break

    cdef _hier_chunk(self, int chan, uintptr_t out, uintptr_t a, uint64_t count,
                     list local, list cross):
        cdef int L = len(local), H = len(cross), b, me, h, last = -1, first, last2
        cdef uint64_t es = self.esize, lo, hi, blo, bcnt
        cdef const char *src
        me, h = local.index(self.rank), cross.index(self.rank)
        if L * H == 1:
            self.pre_copy(<char *>out, <const char *>a, count * es)
            return
        cdef int m = max(L, H)
        cdef int *lg = <int *>malloc(L * sizeof(int))
        cdef int *xg = <int *>malloc(H * sizeof(int))
        cdef char **po = <char **>malloc(m * sizeof(char *))
        cdef const char **pa = <const char **>malloc(m * sizeof(char *))
        cdef uint64_t *nb = <uint64_t *>malloc(m * sizeof(uint64_t))
        cdef int32_t *lsidx = <int32_t *>malloc(m * sizeof(int32_t))
        cdef int32_t *xsidx = <int32_t *>malloc(m * sizeof(int32_t))
        try:
            for b in range(L):
                lg[b] = local[b]
            for b in range(H):
                xg[b] = cross[b]
            # 1. reduce-scatter within the host: block me of out holds the host's sum
            for b in range(L):
                lo, hi = (count * b) // L, (count * (b + 1)) // L
                po[b], pa[b], nb[b] = <char *>out + lo * es, <const char *>a + lo * es, (hi - lo) * es
            blo, bcnt = (count * me) // L, (count * (me + 1)) // L - (count * me) // L
            if L > 1:
                last = self.ring_rs(chan, po, pa, nb, lsidx, lg, L, me)
            src = <const char *>out if L > 1 else <const char *>a
            # 2. allreduce of that block across hosts (in place in out when L > 1)
            if H > 1:
                for b in range(H):
                    lo, hi = (bcnt * b) // H, (bcnt * (b + 1)) // H
                    po[b] = <char *>out + (blo + lo) * es
                    pa[b] = src + (blo + lo) * es
                    nb[b] = (hi - lo) * es
                first = self.nops
                last2 = self.ring_rs(chan, po, pa, nb, xsidx, xg, H, h, last)
                self.ring_ag(chan, po, NULL, nb, last2, xsidx, xg, H, h)
                # block me is final once the last non-empty receive of step 2 is: receives
                # on one endpoint finish in order, but an empty one counts as done at once
                for b in range(self.nops - 1, first - 1, -1):
                    if self.ops[b].kind != NZ_SEND and self.ops[b].kind != NZ_RECV_HDR \
                            and self.ops[b].nbytes > 0:
                        last = b
                        break
            # 3. allgather within the host
            if L > 1:
                for b in range(L):
                    lo, hi = (count * b) // L, (count * (b + 1)) // L
                    po[b], nb[b] = <char *>out + lo * es, (hi - lo) * es
                self.ring_ag(chan, po, NULL, nb, last, lsidx, lg, L, me)
        finally:
            free(lg); free(xg); free(po); free(<void *>pa); free(nb); free(lsidx); free(xsidx)

    cdef int *_grid(self, list hosts, int *H, int *L, int *h, int *me) except NULL:
        # hosts: every host's ranks (host order, then local order), as many on each; gives
        # G[j * L + i] = rank at local position i of host j, and this rank's (h, me)
        cdef int j, i
        H[0], L[0] = len(hosts), len(hosts[0])
        cdef int *G = <int *>malloc(H[0] * L[0] * sizeof(int))
        if G == NULL:
            raise MemoryError()
        for j in range(H[0]):
            for i in range(L[0]):
                G[j * L[0] + i] = hosts[j][i]
                if G[j * L[0] + i] == self.rank:
                    h[0], me[0] = j, i
        return G

    def hier_allgather(self, int chan, uintptr_t out, uintptr_t own, uint64_t block_count,
                       uint64_t off, uint64_t cnt, list hosts):
        """Hierarchical allgather of elements [off, off+cnt) of every rank's block (hosts:
        every host's ranks, see _grid). A ring across hosts among the ranks at this rank's
        local position gathers their H blocks (a host's rails carry (H-1)/H of the result,
        every local rank driving them at once); then, host by host in the order their
        blocks arrive (h, h-1, ...), a ring within the host gathers that host's L blocks,
        each streaming from the receive that brought it."""
        cdef int H, L, h = 0, me = 0, t, j, i
        cdef uint64_t es = self.esize, nbb = cnt * es
        cdef char *base = <char *>out + off * es
        cdef const char *mine = <const char *>own + off * es
        self.pre_copy(base + self.rank * block_count * es, mine, nbb)
        cdef int *G = self._grid(hosts, &H, &L, &h, &me)
        cdef int m = max(H, L)
        cdef int *xg = <int *>malloc(H * sizeof(int))
        cdef char **po = <char **>malloc(m * sizeof(char *))
        cdef uint64_t *nb = <uint64_t *>malloc(m * sizeof(uint64_t))
        cdef int32_t *xr = <int32_t *>malloc(H * sizeof(int32_t))  # cross receive of step s
        try:
            for i in range(m):
                nb[i] = nbb
            if H > 1:
                for j in range(H):
                    xg[j] = G[j * L + me]
                    po[j] = base + xg[j] * block_count * es
                self.ring_ag(chan, po, mine, nb, -1, NULL, xg, H, h, xr)
            for t in range(H if L > 1 else 0):
                j = _mod(h - t, H)
                for i in range(L):
                    po[i] = base + G[j * L + i] * block_count * es
                self.ring_ag(chan, po, mine if t == 0 else NULL, nb,
                             -1 if t == 0 else xr[t - 1], NULL, G + h * L, L, me)
        finally:
            free(G); free(xg); free(po); free(nb); free(xr)

    def hier_reduce_scatter(self, int chan, uintptr_t out, uintptr_t a, uint64_t block_count,
                            uint64_t off, uint64_t cnt, list hosts, object work):
        """Hierarchical reduce_scatter of elements [off, off+cnt) of every block (hosts: see
        _grid): host by host (h-1, h-2, ..., h: the order the next step reads them), a ring
        within the host reduces that host's L blocks, leaving at local position i the host's
        sum of the block of its rank at position i; then a ring across hosts among the ranks
        at this local position reduces those H sums, block h (this rank's own) landing in
        out. Each step streams from the one that produces its input. work (>= (size + H) *
        cnt elements): the partial sums, within the host then across hosts."""
        cdef int H, L, h = 0, me = 0, t, j, i, r
        cdef uint64_t es = self.esize, nbb = cnt * es
        cdef int *G = self._grid(hosts, &H, &L, &h, &me)
        if H * L == 1:
            free(G)
            self.pre_copy(<char *>out + off * es, <const char *>a + off * es, nbb)
            return
        self.keep.append(work)
        cdef char *w = <char *><uintptr_t>work.ctypes.data
        cdef int m = max(H, L)
        cdef int *xg = <int *>malloc(H * sizeof(int))
        cdef char **po = <char **>malloc(m * sizeof(char *))
        cdef const char **pa = <const char **>malloc(m * sizeof(char *))
        cdef const char **xa = <const char **>malloc(H * sizeof(char *))  # host sums
        cdef uint64_t *nb = <uint64_t *>malloc(m * sizeof(uint64_t))
        cdef int32_t *sidx = <int32_t *>malloc(m * sizeof(int32_t))
        cdef int32_t *xdep = <int32_t *>malloc(H * sizeof(int32_t))   # op making xa[j]
        try:
            for i in range(m):
                nb[i] = nbb
            for t in range(1, H + 1):
                j = _mod(h - t, H)
                for i in range(L):
                    r = G[j * L + i]
                    pa[i] = <const char *>a + (r * block_count + off) * es
                    po[i] = w + r * nbb
                if H == 1:
                    po[me] = <char *>out + off * es
                xa[j], xdep[j] = pa[me], -1
                if L > 1:
                    xdep[j] = self.ring_rs(chan, po, pa, nb, sidx, G + h * L, L, me)
                    xa[j] = po[me]
            if H > 1:
                for j in range(H):
                    xg[j] = G[j * L + me]
                    po[j] = w + (H * L + j) * nbb
                po[h] = <char *>out + off * es
                self.ring_rs(chan, po, xa, nb, sidx, xg, H, h, -1, xdep)
        finally:
            free(G); free(xg); free(po); free(<void *>pa); free(<void *>xa); free(nb)
            free(sidx); free(xdep)

    def hier_broadcast(self, int chan, int root, uintptr_t buf, uint64_t count, list hosts):
        """Hierarchical broadcast (hosts: see _grid): the buffer in L shares; the root hands
        share i to the rank at local position i of its host (over shm), which carries it
        down a chain across hosts, host hr -> hr+1 -> ..., to the ranks at position i (a
        host's rails carry S once, every local rank driving them); then a ring within every
        host gathers the L shares, each streaming from the receive that brought it. The
        root's buffer is only read (it may be read-only; a re-run reads it again): its ring
        receives go to scratch."""
        cdef int H, L, h = 0, me = 0, hr = 0, ir = 0, t, i, r0 = -1
        cdef uint64_t es = self.esize
        cdef int *G = self._grid(hosts, &H, &L, &h, &me)
        cdef char **po = <char **>malloc(L * sizeof(char *))
        cdef uint64_t *nb = <uint64_t *>malloc(L * sizeof(uint64_t))
        cdef const char *own = NULL
        cdef char *sink
        try:
            if H * L == 1:
                return
            for i in range(H * L):
                if G[i] == root:
                    hr, ir = i // L, i % L
            for i in range(L):
                po[i] = <char *>buf + (count * i // L) * es
                nb[i] = (count * (i + 1) // L - count * i // L) * es
            if self.rank == root:
                for t in range(1, L):
                    i = _mod(ir + t, L)
                    self.add(NZ_SEND, chan, G[hr * L + i], po[i], NULL, nb[i])
            elif h == hr:
                r0 = self.add(NZ_RECV, chan, root, po[me], NULL, nb[me])
            else:
                r0 = self.add(NZ_RECV, chan, G[_mod(h - 1, H) * L + me], po[me], NULL, nb[me])
            if _mod(h - hr, H) < H - 1:
                self.add(NZ_SEND, chan, G[_mod(h + 1, H) * L + me], po[me], NULL, nb[me], r0)
            if L > 1:
                if self.rank == root:
                    scratch = np.empty(count * es + 1, np.uint8)
                    self.keep.append(scratch)
                    sink = <char *><uintptr_t>scratch.ctypes.data
                    own = po[me]
                    for i in range(L):
                        po[i] = sink + (count * i // L) * es
                self.ring_ag(chan, po, own, nb, r0, NULL, G + h * L, L, me)
        finally:
            free(G); free(po); free(nb)

    def rd_allreduce(self, int chan, uintptr_t out, uintptr_t a, uint64_t count):
        """Recursive doubling for small payloads: log2(n) exchanges of the whole buffer.

        Ranks beyond the largest power of two first fold into a partner and get the result
        back at the end. Each receive lands in its own slot of a scratch buffer the schedule
        keeps ((log2(n)+1) * nbytes)."""
        cdef int r = self.rank, n = self.size, p2 = 1, rem, k, partner, prev = -1, si, ri
        cdef uint64_t nbytes = count * self.esize
        cdef char *buf = <char *>out
        cdef char *tmp
        self.pre_copy(buf, <const char *>a, nbytes)
        if n == 1:
            return
        cdef int slots = 1  # the fold's receive, then one per exchange
        while p2 * 2 <= n:
            p2 *= 2
            slots += 1
        rem = n - p2
        scratch = np.empty(slots * nbytes + 1, np.uint8)
        self.keep.append(scratch)
        tmp = <char *><uintptr_t>scratch.ctypes.data
        if r >= p2:
            si = self.add(NZ_SEND, chan, r - p2, buf, NULL, nbytes)
            self.add(NZ_RECV, chan, r - p2, buf, NULL, nbytes, si, -1, NZ_DEP_FULL)
            return
        if r < rem:
            ri = self.add(NZ_RECV, chan, r + p2, tmp, NULL, nbytes)
            prev = self.add(NZ_LOCAL_REDUCE, chan, -1, buf, tmp, nbytes, ri)
            tmp += nbytes
        k = 1
        while k < p2:
            partner = r ^ k
            si = self.add(NZ_SEND, chan, partner, buf, NULL, nbytes, prev)
            ri = self.add(NZ_RECV, chan, partner, tmp, NULL, nbytes)
            prev = self.add(NZ_LOCAL_REDUCE, chan, -1, buf, tmp, nbytes, ri, si)
            tmp += nbytes
            k *= 2
        if r < rem:
            self.add(NZ_SEND, chan, r + p2, buf, NULL, nbytes, prev)

    def reduce_scatter(self, int chan, uintptr_t out, uintptr_t a, uint64_t block_count,
                       uint64_t off, uint64_t cnt, object work):
        """Ring reduce-scatter of elements [off, off+cnt) of every block; block r lands in out.

        work (>= size*cnt elements) holds the partial sums of the other blocks."""
        cdef int n = self.size, b
        cdef uint64_t es = self.esize
        if n == 1:
            self.pre_copy(<char *>out + off * es, <const char *>a + off * es, cnt * es)
            return
        self.keep.append(work)
        cdef char *w = <char *><uintptr_t>work.ctypes.data
        cdef char **po = <char **>malloc(n * sizeof(char *))
        cdef const char **pa = <const char **>malloc(n * sizeof(char *))
        cdef uint64_t *nb = <uint64_t *>malloc(n * sizeof(uint64_t))
        cdef int32_t *sidx = <int32_t *>malloc(n * sizeof(int32_t))
        try:
            for b in range(n):
                pa[b] = <const char *>a + (b * block_count + off) * es
                po[b] = w + b * cnt * es
                nb[b] = cnt * es
            po[self.rank] = <char *>out + off * es
            self.ring_rs(chan, po, pa, nb, sidx)
        finally:
            free(po); free(<void *>pa); free(nb); free(sidx)

    def reduce(self, int chan, int root, uintptr_t out, uintptr_t a, uint64_t count, object work):
        """Reduce to root: ring reduce-scatter, then every rank sends its block to root."""
        cdef int n = self.size, r = self.rank, b, last, s
        cdef uint64_t es = self.esize
        if n == 1:
            self.pre_copy(<char *>out, <const char *>a, count * es)
            return
        cdef char *dst = <char *>out
        if r != root:
            self.keep.append(work)
            dst = <char *><uintptr_t>work.ctypes.data
        cdef char **po = <char **>malloc(n * sizeof(char *))
        cdef const char **pa = <const char **>malloc(n * sizeof(char *))
        cdef uint64_t *nb = <uint64_t *>malloc(n * sizeof(uint64_t))
        cdef int32_t *sidx = <int32_t *>malloc(n * sizeof(int32_t))
        try:
            self.blocks(count, dst, <const char *>a, po, pa, nb)
            last = self.ring_rs(chan, po, pa, nb, sidx)
            if r != root:
                self.add(NZ_SEND, chan, root, po[r], NULL, nb[r], last)
            else:
                for b in range(n):
                    if b != r:
                        # root's block b may still be leaving in the reduce-scatter
                        s = _mod(r - b - 1, n)
                        self.add(NZ_RECV, chan, b, po[b], NULL, nb[b], sidx[s])
        finally:
            free(po); free(<void *>pa); free(nb); free(sidx)

    def rh_reduce_scatter(self, int chan, uintptr_t out, uintptr_t a, uint64_t block_count,
                          uint64_t off, uint64_t cnt, object work):
        """Recursive halving (size a power of two, small payloads): log2(size) steps instead
        of size-1. At distance k a rank sends the half of its current range of blocks that
        holds its partner, and reduces the partner's contribution into its own half; each
        step's partial sums go to fresh slots of work (>= size*cnt elements), so a reduce
        streams from the one before it. Block r lands in out."""
        cdef int n = self.size, r = self.rank, k, b, base, mlo, plo, slot = 0, op
        cdef uint64_t es = self.esize, nb = cnt * es
        if n == 1 or n & (n - 1):
            return self.reduce_scatter(chan, out, a, block_count, off, cnt, work)
        self.keep.append(work)
        cdef char *w = <char *><uintptr_t>work.ctypes.data
        cdef const char **cur = <const char **>malloc(n * sizeof(char *))
        cdef int32_t *wr = <int32_t *>malloc(n * sizeof(int32_t))
        cdef char *dst
        try:
            for b in range(n):
                cur[b] = <const char *>a + (b * block_count + off) * es
                wr[b] = -1
            k = n // 2
            while k >= 1:
                base = r & ~(2 * k - 1)
                mlo, plo = base + (r & k), base + ((r ^ k) & k)
                for b in range(plo, plo + k):
                    self.add(NZ_SEND, chan, r ^ k, <char *>cur[b], NULL, nb, wr[b])
                for b in range(mlo, mlo + k):
                    if k == 1:
                        dst = <char *>out + off * es
                    else:
                        dst = w + slot * nb
                        slot += 1
                    op = self.add(NZ_RECV_REDUCE, chan, r ^ k, dst, cur[b], nb, wr[b])
                    cur[b], wr[b] = dst, op
                k //= 2
        finally:
            free(<void *>cur); free(wr)

    def rd_allgather(self, int chan, uintptr_t out, uintptr_t own, uint64_t block_count,
                     uint64_t off, uint64_t cnt):
        """Recursive doubling (size a power of two, small payloads): log2(size) steps
        instead of size-1. At distance k a rank holds an aligned run of k blocks and swaps
        it with its partner's; a forwarded block streams from the receive that brought it."""
        cdef int n = self.size, r = self.rank, k, b, mlo, plo
        cdef uint64_t es = self.esize, nb = cnt * es
        if n & (n - 1):
            return self.allgather(chan, out, own, block_count, off, cnt)
        self.pre_copy(<char *>out + (r * block_count + off) * es,
                      <const char *>own + off * es, nb)
        if n == 1:
            return
        cdef int32_t *wr = <int32_t *>malloc(n * sizeof(int32_t))
        try:
            for b in range(n):
                wr[b] = -1
            k = 1
            while k < n:
                mlo, plo = r & ~(k - 1), (r ^ k) & ~(k - 1)
                for b in range(mlo, mlo + k):
                    self.add(NZ_SEND, chan, r ^ k, <char *>out + (b * block_count + off) * es,
                             NULL, nb, wr[b])
                for b in range(plo, plo + k):
                    wr[b] = self.add(NZ_RECV, chan, r ^ k,
                                     <char *>out + (b * block_count + off) * es, NULL, nb)
                k *= 2
        finally:
            free(wr)

    def allgather(self, int chan, uintptr_t out, uintptr_t own, uint64_t block_count,
                  uint64_t off, uint64_t cnt):
        """Ring allgather of elements [off, off+cnt) of every rank's block into out."""
        cdef int n = self.size, b
        cdef uint64_t es = self.esize
        self.pre_copy(<char *>out + (self.rank * block_count + off) * es,
                      <const char *>own + off * es, cnt * es)
        if n == 1:
            return
        cdef char **po = <char **>malloc(n * sizeof(char *))
        cdef uint64_t *nb = <uint64_t *>malloc(n * sizeof(uint64_t))
        try:
            for b in range(n):
                po[b] = <char *>out + (b * block_count + off) * es
                nb[b] = cnt * es
            self.ring_ag(chan, po, <const char *>own + off * es, nb, -1, NULL)
        finally:
            free(po); free(nb)

    def broadcast(self, int chan, int root, uintptr_t buf, uint64_t count, bint tree):
        """Broadcast from root: a binomial tree (small) or a pipelined chain (large)."""
        cdef int n = self.size, v = _mod(self.rank - root, n), ri = -1, k, low
        cdef uint64_t nbytes = count * self.esize
        cdef char *p = <char *>buf
        if n == 1:
            return
        if not tree:
            if v != 0:
                ri = self.add(NZ_RECV, chan, self.rank - 1, p, NULL, nbytes)
            if v != n - 1:
                self.add(NZ_SEND, chan, self.rank + 1, p, NULL, nbytes, ri)
            return
        low = n
        if v != 0:
            low = v & -v
            ri = self.add(NZ_RECV, chan, root + v - low, p, NULL, nbytes)
        k = 1
        while k * 2 < low and k * 2 < n:
            k *= 2
        # farthest child first: it heads the largest subtree
        while k >= 1:
            if k < low and v + k < n:
                self.add(NZ_SEND, chan, root + v + k, p, NULL, nbytes, ri)
            k //= 2

    def alltoall(self, int chan, uintptr_t out, uintptr_t a, uint64_t block_count,
                 uint64_t off, uint64_t cnt):
        """Pairwise exchange: block j of every rank goes to rank j (all pairs in flight)."""
        cdef int n = self.size, r = self.rank, k, dst, src
        cdef uint64_t es = self.esize
        self.pre_copy(<char *>out + (r * block_count + off) * es,
                      <const char *>a + (r * block_count + off) * es, cnt * es)
        for k in range(1, n):
            dst = _mod(r + k, n)
            src = _mod(r - k, n)
            self.add(NZ_SEND, chan, dst, <char *>a + (dst * block_count + off) * es, NULL,
                     cnt * es)
            self.add(NZ_RECV, chan, src, <char *>out + (src * block_count + off) * es, NULL,
                     cnt * es)

    def barrier(self, int chan):
        """Dissemination barrier: round k tells rank r+2^k that r and all it heard of arrived."""
        cdef int n = self.size, r = self.rank, k = 1, prev = -1
        while k < n:
            self.hdr_send(self.ep(chan, r + k), prev, chan)
            prev = self.hdr_recv(self.ep(chan, r - k), chan)
            k *= 2

    def send(self, int chan, int peer, uintptr_t buf, uint64_t nbytes):
        """Point-to-point send (header, then data) on one channel."""
        self.add(NZ_SEND, chan, peer, <char *>buf, NULL, nbytes)

    def recv(self, int chan, int peer, uintptr_t buf, uint64_t nbytes):
        """Point-to-point receive (header checked, then data) on one channel."""
        self.add(NZ_RECV, chan, peer, <char *>buf, NULL, nbytes)

    # ---- inspection (tests, error messages) ---------------------------------------

    def op_info(self, int i):
        """(kind, endpoint, nbytes, done, channel) of op i."""
        if i < 0 or i >= self.nops:
            return None
        cdef nz_op_t *o = &self.ops[i]
        return (o.kind, o.ep, o.nbytes, o.done, o.chan)

    def header_expected(self):
        """The header this rank sends and expects, as a dict."""
        return _hdr_dict(&self.hdr)

    def header_received(self, int ep):
        """The header that arrived on endpoint ep, as a dict."""
        return _hdr_dict(&self.hdr_in[ep])

    def ops_list(self):
        """Every op as (kind, ep, nbytes, dep0, dep1, chan): for tests of the layouts."""
        return [(self.ops[i].kind, self.ops[i].ep, self.ops[i].nbytes, self.ops[i].dep[0],
                 self.ops[i].dep[1], self.ops[i].chan) for i in range(self.nops)]


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
        self.h.interval_ns = <int64_t>(heartbeat * 1e9)
        self.h.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        self.h.gfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        if self.h.evfd < 0 or self.h.gfd < 0:
            raise OSError("eventfd failed")
        self.e.health = &self.h
        self.e.data_heard = <int64_t *>calloc(n, sizeof(int64_t))
        if self.e.data_heard == NULL:
            raise MemoryError()
        self.has_health = True
        if nz_health_start(&self.h) != 0:
            raise OSError("cannot start the health thread")

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

    def set_spin(self, double seconds):
        """Busy-poll this long before sleeping when nothing moves."""
        self.e.spin_ns = <int64_t>(seconds * 1e9)

    def set_failover(self, bint on, list chan_rail, double silent):
        """Set channels aside on errors or silence (instead of failing the run)."""
        cdef int c
        self.e.failover = on and self.has_health
        for c in range(self.nchan):
            self.e.chan_rail[c] = chan_rail[c]
        self.e.silent_ns = <int64_t>(silent * 1e9)

    def set_failover_on(self, bint on, int64_t vote_seq=-1, list slice_chans=None,
                        int64_t coll=-1, bint lazy=False):
        """Failover for the next run (off for point-to-point, which cannot vote): the next
        vote (-1: none; a run that knows it stops when a rank behind calls it), the channel
        of each slice, the collective's index, and whether the run ends without a vote
        (lazy) unless something fails."""
        cdef int i
        self.e.failover = on and self.has_health and self.e.silent_ns > 0
        self.e.vote_seq = vote_seq if self.has_health else -1
        self.e.vote_coll = coll
        self.e.lazy = lazy
        self.e.nslices = 0
        if on and slice_chans is not None:
            self.e.nslices = min(len(slice_chans), 64)
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
        self.endpoints[ep] = endpoint

    def start(self, Schedule s):
        """Do the local copies and prepare the run of s."""
        cdef int i, rc
        with nogil:
            for i in range(s.npre):
                memcpy(s.pre_dst[i], s.pre_src[i], s.pre_n[i])
            rc = nz_start(&self.e, s.ops, s.nops, s.dtype, s.op)
        return rc

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
                    nezha_avg_finish(s.avg_ptr[i], s.avg_count[i], s.dtype, s.avg_div)

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

    def heard_rails(self, int nrails, int rank, double steady):
        """Rails on which every peer has been heard without a gap for steady seconds."""
        return nz_heard_rails(&self.e, nrails, rank, <int64_t>(steady * 1e9))

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

    def channel_times_ns(self):
        """Per channel: (ns from start to its last op, bytes moved) in the last run."""
        return [(self.e.chan_ns[c], self.e.chan_bytes[c]) for c in range(self.nchan)]

    def endpoint_bytes(self):
        """Per endpoint: (bytes sent, bytes received) since the engine was made."""
        return [(self.e.eps[i].bytes_sent, self.e.eps[i].bytes_recv) for i in range(self.e.nep)]

    def endpoint_kinds(self):
        """Per endpoint: the transport it is driven through now ("tcp", "shm", None)."""
        return [ep.kind if ep is not None else None for ep in self.endpoints]


include "fastpath.pxi"
