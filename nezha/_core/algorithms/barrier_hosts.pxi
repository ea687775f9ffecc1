# Included by engine.pyx. A barrier with several ranks per host: each host's ranks tell its
# first rank over shm, the first ranks run the dissemination barrier across hosts on the
# rails, and each releases its host. Why: with 2 x 4 and 4 x 2 ranks on 2 CPUs the flat
# dissemination barrier sends L times the TCP messages a host needs (each ~19 us of CPU on
# the lab's path), and its tail lands in the next collective (bench/ranks_per_host.py calls
# one after every timed call), as rd_hosts.pxi found for small allreduces.


cdef int _join(Schedule sch, int chan, char *j, int a, int b) except -1:
    """An op done once both a and b are (a < 0: b itself)."""
    if a < 0:
        return b
    return sch._push(NZ_LOCAL_REDUCE, -1, j, j + 16, sch.esize, a, b, chan, NZ_DEP_FULL)


def hosts_barrier(Schedule sch, int chan, list local, list cross):
    """local: the ranks of this rank's host (local[0] leads); cross: the first rank of every
    host (for the first ranks). Headers only, one per endpoint and direction, as
    dissemination_barrier. A first rank sends across hosts, and releases its host, only
    after all its host's ranks entered and all it heard of did."""
    cdef int L = len(local), H = len(cross), me = local.index(sch.rank), h, k, join = -1
    if L * H == 1:
        return
    if me != 0:
        sch.wait_spin_ns = LOCAL_WAIT_SPIN_NS  # the whole cross-host step: rd_hosts.pxi
        sch.hdr_send(sch.ep(chan, local[0]), -1, chan)
        sch.hdr_recv(sch.ep(chan, local[0]), chan)
        return
    h = cross.index(sch.rank)
    # a one-element local reduce joins two dependencies (an op has two): the host's
    # arrivals, then each round's news, which a round's send must carry
    scratch = np.zeros(32, np.uint8)
    sch.keep.append(scratch)
    cdef char *j = <char *><uintptr_t>scratch.ctypes.data
    for k in range(1, L):
        join = _join(sch, chan, j, join, sch.hdr_recv(sch.ep(chan, local[k]), chan))
    k = 1
    while k < H:
        sch.hdr_send(sch.ep(chan, cross[_mod(h + k, H)]), join, chan)
        join = _join(sch, chan, j, join, sch.hdr_recv(sch.ep(chan, cross[_mod(h - k, H)]), chan))
        k *= 2
    for k in range(1, L):
        sch.hdr_send(sch.ep(chan, local[k]), join, chan)
