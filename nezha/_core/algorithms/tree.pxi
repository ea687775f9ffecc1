# Included by engine.pyx. Broadcast from a root: a binomial tree (small) or a pipelined
# chain (large).
# Each builder appends the ops of one slice on one channel to a Schedule.


def tree_broadcast(Schedule sch, int chan, int root, uintptr_t buf, uint64_t count, bint tree,
                   uintptr_t src=0, bint flat=False):
    """Broadcast from root: a binomial tree (small) or a pipelined chain (large). src: what
    the root sends when not buf (a lazy tree re-run after the root returned: its kept copy,
    buf being scratch). flat (with tree): a one-round tree, the root sending to every other
    rank itself (latency-bound payloads: one step instead of log2(n))."""
    cdef int n = sch.size, v = _mod(sch.rank - root, n), ri = -1, k, low
    cdef uint64_t nbytes = count * sch.esize
    cdef char *p = <char *>buf
    if n == 1:
        return
    if v == 0 and src != 0:
        p = <char *>src
    if not tree:
        if v != 0:
            ri = sch.add(NZ_RECV, chan, sch.rank - 1, p, NULL, nbytes)
        if v != n - 1:
            sch.add(NZ_SEND, chan, sch.rank + 1, p, NULL, nbytes, ri)
        return
    if flat:  # the root's sends in rank order after it: the same on every rank
        if v != 0:
            sch.add(NZ_RECV, chan, root, p, NULL, nbytes)
        else:
            for k in range(1, n):
                sch.add(NZ_SEND, chan, root + k, p, NULL, nbytes)
        return
    low = n
    if v != 0:
        low = v & -v
        ri = sch.add(NZ_RECV, chan, root + v - low, p, NULL, nbytes)
    k = 1
    while k * 2 < low and k * 2 < n:
        k *= 2
    # farthest child first: it heads the largest subtree
    while k >= 1:
        if k < low and v + k < n:
            sch.add(NZ_SEND, chan, root + v + k, p, NULL, nbytes, ri)
        k //= 2
