# Included by engine.pyx. Pairwise exchange (alltoall), the dissemination barrier and
# point-to-point send/recv.
# Each builder appends the ops of one slice on one channel to a Schedule.


def direct_alltoall(Schedule sch, int chan, uintptr_t out, uintptr_t a, uint64_t block_count,
                    uint64_t off, uint64_t cnt):
    """Pairwise exchange: block j of every rank goes to rank j (all pairs in flight)."""
    cdef int n = sch.size, r = sch.rank, k, dst, src
    cdef uint64_t es = sch.esize
    sch.pre_copy(<char *>out + (r * block_count + off) * es,
                  <const char *>a + (r * block_count + off) * es, cnt * es)
    for k in range(1, n):
        dst = _mod(r + k, n)
        src = _mod(r - k, n)
        sch.add(NZ_SEND, chan, dst, <char *>a + (dst * block_count + off) * es, NULL,
                 cnt * es)
        sch.add(NZ_RECV, chan, src, <char *>out + (src * block_count + off) * es, NULL,
                 cnt * es)


def dissemination_barrier(Schedule sch, int chan):
    """Dissemination barrier: round k tells rank r+2^k that r and all it heard of arrived."""
    cdef int n = sch.size, r = sch.rank, k = 1, prev = -1
    while k < n:
        sch.hdr_send(sch.ep(chan, r + k), prev, chan)
        prev = sch.hdr_recv(sch.ep(chan, r - k), chan)
        k *= 2


def p2p_send(Schedule sch, int chan, int peer, uintptr_t buf, uint64_t nbytes):
    """Point-to-point send (header, then data) on one channel."""
    sch.add(NZ_SEND, chan, peer, <char *>buf, NULL, nbytes)


def p2p_recv(Schedule sch, int chan, int peer, uintptr_t buf, uint64_t nbytes):
    """Point-to-point receive (header checked, then data) on one channel."""
    sch.add(NZ_RECV, chan, peer, <char *>buf, NULL, nbytes)


def direct_allgather(Schedule sch, int chan, uintptr_t out, uintptr_t own, uint64_t block_count,
                     uint64_t off, uint64_t cnt):
    """Direct allgather: this rank's slice straight to every other rank, and every other
    rank's straight from it, all in flight at once (one step; the ring's and rd's bytes).
    Nothing is forwarded, so a late link delays only the rank it leads to: with rd the
    step-2 partner of a rank whose step-1 receive is late waits for it too (the forwarded
    block; session 29, docs/results/session29/allgather-small). Peers in the order r+1,
    r+2, ... (sends) and r-1, r-2, ... (receives), as the pairwise alltoall."""
    cdef int n = sch.size, r = sch.rank, k, dst, src
    cdef uint64_t es = sch.esize, nb = cnt * es
    sch.pre_copy(<char *>out + (r * block_count + off) * es,
                  <const char *>own + off * es, nb)
    for k in range(1, n):
        dst = _mod(r + k, n)
        src = _mod(r - k, n)
        sch.add(NZ_SEND, chan, dst, <char *>own + off * es, NULL, nb)
        sch.add(NZ_RECV, chan, src, <char *>out + (src * block_count + off) * es, NULL, nb)
