# Included by engine.pyx. Recursive doubling between hosts for small allreduces with several
# ranks per host: each host's ranks hand their input to its first rank over shm, the first
# ranks run recursive doubling on the rails, and each hands the result back.
# Why: with 2 x 4 and 4 x 2 ranks on 2 CPUs a small allreduce is bound by the CPU the rails'
# TCP messages cost (a 4-host rd among one rank per host: ~200-290 us, against ~50-90 us for
# the shm steps of a host), and flat rd sends L times as many of them (every local rank
# crosses hosts). Here a host sends one per step, as Open MPI's coll/han does.

# A rank that waits on its host's first rank waits for the whole cross-host step (2 x 4,
# 4 x 2: 100-300 us), past NEZHA_SPIN_US: it slept in 40-70 % of the calls, and the next
# call waited for its wake-up. It spins this long instead (yielding the CPU between tries;
# only if the engine spins at all). 1 and 3 ms measured alike (session23/small-rph2).
LOCAL_WAIT_SPIN_NS = 1000000


def rd_hosts_allreduce(Schedule sch, int chan, uintptr_t out, uintptr_t a, uint64_t count,
                       list local, list cross):
    """local: the ranks of this rank's host, in order (local[0] leads); cross: one rank per
    host at this rank's local position (for the first ranks: the first rank of every host).
    The first rank sums its host's inputs in local order, so every rank of every host gets
    the same bits (rd's exchanges add two partial sums, which commute)."""
    cdef int L = len(local), H = len(cross), me = local.index(sch.rank)
    cdef int h, k, p2 = 1, rem, slots, partner, si, ri, last = -1
    cdef uint64_t nbytes = count * sch.esize
    cdef char *buf = <char *>out
    cdef char *tmp
    sch.pre_copy(buf, <const char *>a, nbytes)
    if L * H == 1:
        return
    if me != 0:
        sch.wait_spin_ns = LOCAL_WAIT_SPIN_NS
        si = sch.add(NZ_SEND, chan, local[0], buf, NULL, nbytes)
        sch.add(NZ_RECV, chan, local[0], buf, NULL, nbytes, si, -1, NZ_DEP_FULL)
        return
    h = cross.index(sch.rank)
    slots = L  # the host's other inputs, the fold's receive, then one per exchange
    while p2 * 2 <= H:
        p2 *= 2
        slots += 1
    rem = H - p2
    scratch = np.empty(slots * nbytes + 1, np.uint8)
    sch.keep.append(scratch)
    tmp = <char *><uintptr_t>scratch.ctypes.data
    for k in range(1, L):  # in local order: the sum's bits do not depend on arrival order
        ri = sch.add(NZ_RECV, chan, local[k], tmp, NULL, nbytes)
        last = sch.add(NZ_LOCAL_REDUCE, chan, -1, buf, tmp, nbytes, ri, last)
        tmp += nbytes
    if h >= p2:  # beyond the largest power of two: fold into a partner, get the result
        si = sch.add(NZ_SEND, chan, cross[h - p2], buf, NULL, nbytes, last)
        last = sch.add(NZ_RECV, chan, cross[h - p2], buf, NULL, nbytes, si, -1, NZ_DEP_FULL)
    else:
        if h < rem:
            ri = sch.add(NZ_RECV, chan, cross[h + p2], tmp, NULL, nbytes)
            last = sch.add(NZ_LOCAL_REDUCE, chan, -1, buf, tmp, nbytes, ri, last)
            tmp += nbytes
        k = 1
        while k < p2:
            partner = cross[h ^ k]
            si = sch.add(NZ_SEND, chan, partner, buf, NULL, nbytes, last)
            ri = sch.add(NZ_RECV, chan, partner, tmp, NULL, nbytes)
            last = sch.add(NZ_LOCAL_REDUCE, chan, -1, buf, tmp, nbytes, ri, si)
            tmp += nbytes
            k *= 2
        if h < rem:
            sch.add(NZ_SEND, chan, cross[h + p2], buf, NULL, nbytes, last)
    for k in range(1, L):
        sch.add(NZ_SEND, chan, local[k], buf, NULL, nbytes, last)
