# Included by engine.pyx. Rabenseifner's allreduce for medium payloads: a reduce-scatter by
# recursive halving, then an allgather by recursive doubling, 2 log2(p2) steps moving
# 2(p2-1)/p2 of the slice (rd moves all of it log2(p2) times, ring takes 2(n-1) steps).
# The builder appends the ops of one slice on one channel to a Schedule, like ring_allreduce.


def rab_allreduce(Schedule sch, int chan, uintptr_t out, uintptr_t a, uint64_t count):
    """Rabenseifner: reduce-scatter by recursive halving, allgather by recursive doubling,
    in place in out (no scratch).

    Ranks beyond the largest power of two p2 first send their buffer to rank r - p2, which
    reduces it in (the fold, as rd_allreduce and MPICH do), and get the result back at the
    end. The slice is cut into p2 nearly equal blocks (ring_blocks' rule); at distance k a
    rank holds an aligned run of 2k blocks, sends the half that holds its partner and
    reduces the partner's copy of its own half in place; the allgather walks back up.
    Every receive of the allgather waits for the one before it (so a send covering several
    runs waits for all of them) and streams behind the reduce-scatter's send of the same
    blocks (their memory). An empty op (fewer elements than p2) is done at once whatever
    it waits for, so the chain skips it: prev is the last op that moves bytes, and its
    range holds the range of the op that waits for it (same length: the same bytes, so
    streaming behind it is right)."""
    cdef int r = sch.rank, n = sch.size, p2 = 1, rem, k, partner, mlo, plo
    cdef int32_t prev = -1, si, ri, i
    cdef uint64_t es = sch.esize
    cdef char *buf = <char *>out
    sch.pre_copy(buf, <const char *>a, count * es)
    if n == 1:
        return
    while p2 * 2 <= n:
        p2 *= 2
    rem = n - p2
    if r >= p2:
        si = sch.add(NZ_SEND, chan, r - p2, buf, NULL, count * es)
        sch.add(NZ_RECV, chan, r - p2, buf, NULL, count * es, si, -1, NZ_DEP_FULL)
        return
    if r < rem and count:
        prev = sch.add(NZ_RECV_REDUCE, chan, r + p2, buf, buf, count * es)
    elif r < rem:
        sch.add(NZ_RECV_REDUCE, chan, r + p2, buf, buf, 0)
    cdef uint64_t *lo = <uint64_t *>malloc((p2 + 1) * sizeof(uint64_t))
    cdef int32_t *rs_send = <int32_t *>malloc(32 * sizeof(int32_t))
    try:
        for i in range(p2 + 1):
            lo[i] = (count * <uint64_t>i) // <uint64_t>p2 * es
        # reduce-scatter: k = p2/2 .. 1; after step k this rank holds blocks
        # [r & ~(k-1), +k) reduced over the 2k ranks of its group
        k, i = p2 // 2, 0
        while k >= 1:
            partner = r ^ k
            mlo = r & ~(k - 1)
            plo = partner & ~(k - 1)
            rs_send[i] = sch.add(NZ_SEND, chan, partner, buf + lo[plo], NULL,
                                  lo[plo + k] - lo[plo], prev)
            ri = sch.add(NZ_RECV_REDUCE, chan, partner, buf + lo[mlo], buf + lo[mlo],
                          lo[mlo + k] - lo[mlo], prev)
            if lo[mlo + k] > lo[mlo]:
                prev = ri
            k //= 2
            i += 1
        # allgather: k = 1 .. p2/2, swapping the run of k blocks each side holds
        k = 1
        while k < p2:
            i -= 1
            partner = r ^ k
            mlo = r & ~(k - 1)
            plo = partner & ~(k - 1)
            sch.add(NZ_SEND, chan, partner, buf + lo[mlo], NULL, lo[mlo + k] - lo[mlo], prev)
            # the partner's run lands where this rank's reduce-scatter sent from at step k
            ri = sch.add(NZ_RECV, chan, partner, buf + lo[plo], NULL,
                          lo[plo + k] - lo[plo], prev, rs_send[i])
            if lo[plo + k] > lo[plo]:
                prev = ri
            k *= 2
    finally:
        free(lo); free(rs_send)
    if r < rem:
        sch.add(NZ_SEND, chan, r + p2, buf, NULL, count * es, prev)
