# Included by engine.pyx. Recursive doubling and halving for small payloads: log2(n) steps
# instead of n-1.
# Each builder appends the ops of one slice on one channel to a Schedule.


def rd_allreduce(Schedule sch, int chan, uintptr_t out, uintptr_t a, uint64_t count):
    """Recursive doubling for small payloads: log2(n) exchanges of the whole buffer.

    Ranks beyond the largest power of two first fold into a partner and get the result
    back at the end. Each receive lands in its own slot of a scratch buffer the schedule
    keeps ((log2(n)+1) * nbytes)."""
    cdef int r = sch.rank, n = sch.size, p2 = 1, rem, k, partner, prev = -1, si, ri
    cdef uint64_t nbytes = count * sch.esize
    cdef char *buf = <char *>out
    cdef char *tmp
    sch.pre_copy(buf, <const char *>a, nbytes)
    if n == 1:
        return
    cdef int slots = 1  # the fold's receive, then one per exchange
    while p2 * 2 <= n:
        p2 *= 2
        slots += 1
    rem = n - p2
    scratch = np.empty(slots * nbytes + 1, np.uint8)
    sch.keep.append(scratch)
    tmp = <char *><uintptr_t>scratch.ctypes.data
    if r >= p2:
        si = sch.add(NZ_SEND, chan, r - p2, buf, NULL, nbytes)
        sch.add(NZ_RECV, chan, r - p2, buf, NULL, nbytes, si, -1, NZ_DEP_FULL)
        return
    if r < rem:
        ri = sch.add(NZ_RECV, chan, r + p2, tmp, NULL, nbytes)
        prev = sch.add(NZ_LOCAL_REDUCE, chan, -1, buf, tmp, nbytes, ri)
        tmp += nbytes
    k = 1
    while k < p2:
        partner = r ^ k
        si = sch.add(NZ_SEND, chan, partner, buf, NULL, nbytes, prev)
        ri = sch.add(NZ_RECV, chan, partner, tmp, NULL, nbytes)
        prev = sch.add(NZ_LOCAL_REDUCE, chan, -1, buf, tmp, nbytes, ri, si)
        tmp += nbytes
        k *= 2
    if r < rem:
        sch.add(NZ_SEND, chan, r + p2, buf, NULL, nbytes, prev)


def rh_reduce_scatter(Schedule sch, int chan, uintptr_t out, uintptr_t a, uint64_t block_count,
                      uint64_t off, uint64_t cnt, object work):
    """Recursive halving (size a power of two, small payloads): log2(size) steps instead
    of size-1. At distance k a rank sends the half of its current range of blocks that
    holds its partner, and reduces the partner's contribution into its own half; each
    step's partial sums go to fresh slots of work (>= size*cnt elements), so a reduce
    streams from the one before it. Block r lands in out.

    A whole slice (cnt == block_count) has each half in one piece of memory (the input's
    blocks, then consecutive slots): one send and one receive per step instead of one per
    block, the same bytes in the same order on the wire (fewer system calls, segments and
    wake-ups: log2(size) ops each way instead of size-1)."""
    cdef int n = sch.size, r = sch.rank, k, b, base, mlo, plo, slot = 0, op, dep
    cdef uint64_t es = sch.esize, nb = cnt * es
    if n == 1 or n & (n - 1):
        return ring_reduce_scatter(sch, chan, out, a, block_count, off, cnt, work)
    sch.keep.append(work)
    cdef char *w = <char *><uintptr_t>work.ctypes.data
    cdef const char **cur = <const char **>malloc(n * sizeof(char *))
    cdef int32_t *wr = <int32_t *>malloc(n * sizeof(int32_t))
    cdef char *dst
    cdef bint whole = cnt == block_count and off == 0
    try:
        for b in range(n):
            cur[b] = <const char *>a + (b * block_count + off) * es
            wr[b] = -1
        k = n // 2
        while k >= 1:
            base = r & ~(2 * k - 1)
            mlo, plo = base + (r & k), base + ((r ^ k) & k)
            if whole and k > 1:
                # the partner's half: one run (input blocks, or slots of one earlier
                # receive), ready once that receive is (a dependency of another length
                # waits for all of it)
                dep = wr[plo]
                sch.add(NZ_SEND, chan, r ^ k, <char *>cur[plo], NULL, k * nb, dep, -1,
                        NZ_DEP_FULL if dep >= 0 else 0)
                dst = w + slot * nb
                op = sch.add(NZ_RECV_REDUCE, chan, r ^ k, dst, cur[mlo], k * nb, wr[mlo],
                             -1, NZ_DEP_FULL if wr[mlo] >= 0 else 0)
                for b in range(mlo, mlo + k):
                    cur[b], wr[b] = dst + (b - mlo) * nb, op
                slot += k
                k //= 2
                continue
            for b in range(plo, plo + k):
                sch.add(NZ_SEND, chan, r ^ k, <char *>cur[b], NULL, nb, wr[b],
                        -1, NZ_DEP_FULL if whole and wr[b] >= 0 else 0)
            for b in range(mlo, mlo + k):
                if k == 1:
                    dst = <char *>out + off * es
                else:
                    dst = w + slot * nb
                    slot += 1
                op = sch.add(NZ_RECV_REDUCE, chan, r ^ k, dst, cur[b], nb, wr[b],
                             -1, NZ_DEP_FULL if whole and wr[b] >= 0 else 0)
                cur[b], wr[b] = dst, op
            k //= 2
    finally:
        free(<void *>cur); free(wr)


def rd_allgather(Schedule sch, int chan, uintptr_t out, uintptr_t own, uint64_t block_count,
                 uint64_t off, uint64_t cnt):
    """Recursive doubling (size a power of two, small payloads): log2(size) steps
    instead of size-1. At distance k a rank holds an aligned run of k blocks and swaps
    it with its partner's; a forwarded block streams from the receive that brought it.

    A whole slice (cnt == block_count) has each run in one piece of the output: one send
    and one receive per step instead of one per block, the same bytes in the same order on
    the wire. The send waits for the previous step's receive and send (its run is theirs:
    the send covers the receives before it)."""
    cdef int n = sch.size, r = sch.rank, k, b, mlo, plo, si = -1, ri = -1
    cdef uint64_t es = sch.esize, nb = cnt * es
    if n & (n - 1):
        return ring_allgather(sch, chan, out, own, block_count, off, cnt)
    sch.pre_copy(<char *>out + (r * block_count + off) * es,
                  <const char *>own + off * es, nb)
    if n == 1:
        return
    if cnt == block_count and off == 0:
        k = 1
        while k < n:
            mlo, plo = r & ~(k - 1), (r ^ k) & ~(k - 1)
            si = sch.add(NZ_SEND, chan, r ^ k, <char *>out + mlo * nb, NULL, k * nb,
                         ri, si, NZ_DEP_FULL if ri >= 0 else 0)
            ri = sch.add(NZ_RECV, chan, r ^ k, <char *>out + plo * nb, NULL, k * nb)
            k *= 2
        return
    cdef int32_t *wr = <int32_t *>malloc(n * sizeof(int32_t))
    try:
        for b in range(n):
            wr[b] = -1
        k = 1
        while k < n:
            mlo, plo = r & ~(k - 1), (r ^ k) & ~(k - 1)
            for b in range(mlo, mlo + k):
                sch.add(NZ_SEND, chan, r ^ k, <char *>out + (b * block_count + off) * es,
                         NULL, nb, wr[b])
            for b in range(plo, plo + k):
                wr[b] = sch.add(NZ_RECV, chan, r ^ k,
                                 <char *>out + (b * block_count + off) * es, NULL, nb)
            k *= 2
    finally:
        free(wr)
