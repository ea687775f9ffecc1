# Included by engine.pyx. Ring algorithms for large payloads: a rank's link carries
# 2(n-1)/n of the data and every link is busy at once. ring_rs / ring_ag (reduce-scatter and
# allgather around a ring of ranks) are the building blocks of the hierarchical ones too.
# Each builder appends the ops of one slice on one channel to a Schedule.


cdef int ring_rs(Schedule sch, int chan, char **out, const char **a, uint64_t *nb,
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
        n, me = sch.size, sch.rank
    cdef int s, sb, rb, last = -1
    cdef int nxt = _gpeer(grp, n, me + 1), prv = _gpeer(grp, n, me - 1)
    for s in range(n - 1):
        sb = _mod(me - s - 1, n)
        rb = _mod(me - s - 2, n)
        if s == 0:
            send_idx[s] = sch.add(NZ_SEND, chan, nxt, <char *>a[sb], NULL, nb[sb],
                                   bdep[sb] if bdep != NULL else base_dep)
        else:
            send_idx[s] = sch.add(NZ_SEND, chan, nxt, out[sb], NULL, nb[sb], last)
        last = sch.add(NZ_RECV_REDUCE, chan, prv, out[rb], a[rb], nb[rb],
                        bdep[rb] if bdep != NULL else base_dep)
    return last


cdef int ring_ag(Schedule sch, int chan, char **out, const char *own, uint64_t *nb,
                 int first_dep, int32_t *free_idx, const int *grp=NULL, int n=0,
                 int me=-1, int32_t *recv_idx=NULL) except -1:
    """Ring allgather among grp[0..n) (default: every rank); the rank at position me
    starts owning block me (at own, or out[me] when own is NULL).

    Step s forwards block me-s and receives block me-s-1 (its op goes to recv_idx[s]
    when given); a receive waits until free_idx[s] (an earlier send of that block's
    memory) is done."""
    if grp == NULL:
        n, me = sch.size, sch.rank
    cdef int s, sb, rb, last = first_dep
    cdef int nxt = _gpeer(grp, n, me + 1), prv = _gpeer(grp, n, me - 1)
    for s in range(n - 1):
        sb = _mod(me - s, n)
        rb = _mod(me - s - 1, n)
        if s == 0 and own != NULL:
            sch.add(NZ_SEND, chan, nxt, <char *>own, NULL, nb[sb])
        else:
            sch.add(NZ_SEND, chan, nxt, out[sb], NULL, nb[sb], last)
        last = sch.add(NZ_RECV, chan, prv, out[rb], NULL, nb[rb],
                        free_idx[s] if free_idx != NULL else -1)
        if recv_idx != NULL:
            recv_idx[s] = last
    return last


cdef int ring_blocks(Schedule sch, uint64_t count, char *out, const char *a, char **po,
                     const char **pa, uint64_t *nb) except -1:
    # Split count elements into size nearly equal blocks (sizes differ by at most one).
    cdef int b, n = sch.size
    cdef uint64_t lo, hi
    for b in range(n):
        lo = (count * b) // n
        hi = (count * (b + 1)) // n
        po[b] = out + lo * sch.esize
        pa[b] = a + lo * sch.esize
        nb[b] = (hi - lo) * sch.esize
    return 0

# ---- algorithms, one slice on one channel each --------------------------------


def ring_allreduce(Schedule sch, int chan, uintptr_t out, uintptr_t a, uint64_t count):
    """Pipelined ring allreduce: reduce-scatter then allgather (2(n-1)/n S on the wire)."""
    cdef int n = sch.size
    if n == 1:
        sch.pre_copy(<char *>out, <const char *>a, count * sch.esize)
        return
    cdef char **po = <char **>malloc(n * sizeof(char *))
    cdef const char **pa = <const char **>malloc(n * sizeof(char *))
    cdef uint64_t *nb = <uint64_t *>malloc(n * sizeof(uint64_t))
    cdef int32_t *sidx = <int32_t *>malloc(n * sizeof(int32_t))
    try:
        ring_blocks(sch, count, <char *>out, <const char *>a, po, pa, nb)
        last = ring_rs(sch, chan, po, pa, nb, sidx)
        ring_ag(sch, chan, po, NULL, nb, last, sidx)
    finally:
        free(po); free(<void *>pa); free(nb); free(sidx)


def ring_reduce_scatter(Schedule sch, int chan, uintptr_t out, uintptr_t a, uint64_t block_count,
                        uint64_t off, uint64_t cnt, object work):
    """Ring reduce-scatter of elements [off, off+cnt) of every block; block r lands in out.

    work (>= size*cnt elements) holds the partial sums of the other blocks."""
    cdef int n = sch.size, b
    cdef uint64_t es = sch.esize
    if n == 1:
        sch.pre_copy(<char *>out + off * es, <const char *>a + off * es, cnt * es)
        return
    sch.keep.append(work)
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
        po[sch.rank] = <char *>out + off * es
        ring_rs(sch, chan, po, pa, nb, sidx)
    finally:
        free(po); free(<void *>pa); free(nb); free(sidx)


def ring_allgather(Schedule sch, int chan, uintptr_t out, uintptr_t own, uint64_t block_count,
                   uint64_t off, uint64_t cnt):
    """Ring allgather of elements [off, off+cnt) of every rank's block into out."""
    cdef int n = sch.size, b
    cdef uint64_t es = sch.esize
    sch.pre_copy(<char *>out + (sch.rank * block_count + off) * es,
                  <const char *>own + off * es, cnt * es)
    if n == 1:
        return
    cdef char **po = <char **>malloc(n * sizeof(char *))
    cdef uint64_t *nb = <uint64_t *>malloc(n * sizeof(uint64_t))
    try:
        for b in range(n):
            po[b] = <char *>out + (b * block_count + off) * es
            nb[b] = cnt * es
        ring_ag(sch, chan, po, <const char *>own + off * es, nb, -1, NULL)
    finally:
        free(po); free(nb)


def ring_reduce(Schedule sch, int chan, int root, uintptr_t out, uintptr_t a, uint64_t count,
                object work):
    """Reduce to root: ring reduce-scatter, then every rank sends its block to root."""
    cdef int n = sch.size, r = sch.rank, b, last, s
    cdef uint64_t es = sch.esize
    if n == 1:
        sch.pre_copy(<char *>out, <const char *>a, count * es)
        return
    cdef char *dst = <char *>out
    if r != root:
        sch.keep.append(work)
        dst = <char *><uintptr_t>work.ctypes.data
    cdef char **po = <char **>malloc(n * sizeof(char *))
    cdef const char **pa = <const char **>malloc(n * sizeof(char *))
    cdef uint64_t *nb = <uint64_t *>malloc(n * sizeof(uint64_t))
    cdef int32_t *sidx = <int32_t *>malloc(n * sizeof(int32_t))
    try:
        ring_blocks(sch, count, dst, <const char *>a, po, pa, nb)
        last = ring_rs(sch, chan, po, pa, nb, sidx)
        if r != root:
            sch.add(NZ_SEND, chan, root, po[r], NULL, nb[r], last)
        else:
            for b in range(n):
                if b != r:
                    # root's block b may still be leaving in the reduce-scatter
                    s = _mod(r - b - 1, n)
                    sch.add(NZ_RECV, chan, b, po[b], NULL, nb[b], sidx[s])
    finally:
        free(po); free(<void *>pa); free(nb); free(sidx)
