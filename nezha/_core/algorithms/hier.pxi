# Included by engine.pyx. Hierarchical collectives for several ranks per host: within the
# host (shm), across hosts (the rails), within the host again; a host's rails carry its
# share once and every local rank drives them.
# Each builder appends the ops of one slice on one channel to a Schedule.
# owners: None, every local position carries a share of the slice across hosts (striped);
# else one flag per local position, and only the flagged ones do (rail-aligned,
# NEZHA_HIER_RAILS): the others' shares are empty and they send nothing across hosts, so
# the slice's cross-host bytes leave from the ranks its rail belongs to. allreduce and
# broadcast cut the slice in shares; allgather and reduce_scatter cut every block of it
# (_hier_ag_aligned, _hier_rs_aligned).


cdef int *_owner_bounds(list owners, int L) except NULL:
    # B[b] = owners among positions < b (B[L]: all of them); shares are (count*B[b])//B[L]
    cdef int *B = <int *>malloc((L + 1) * sizeof(int))
    cdef int b
    if B == NULL:
        raise MemoryError()
    B[0] = 0
    for b in range(L):
        B[b + 1] = B[b] + (1 if owners is None or owners[b] else 0)
    if B[L] == 0:
        free(B)
        raise ValueError("nezha: hierarchical slice with no local position to carry it")
    return B


def hier_allreduce(Schedule sch, int chan, uintptr_t out, uintptr_t a, uint64_t count,
                   list local, list cross, uint64_t chunk, list owners=None):
    """Hierarchical allreduce for several ranks per host, chunk elements at a time:
    reduce-scatter within the host (local: its ranks, in order), an allreduce of this
    rank's share across hosts with the ranks at the same local position (cross: one per
    host, in host order), allgather within the host. A host's NIC carries
    2(H-1)/H * S instead of a flat ring's 2(N-1)/N * S, and every local rank drives
    it at once.
    Chunks pipeline: ops on one endpoint run in post order, so chunk i+1's reduce-scatter
    within the host is posted before chunk i's allgather (which waits for chunk i to
    cross hosts); posted in chunk order, the next chunk could not start within the host
    until the previous one had crossed, and the rails would idle meanwhile.
    owners: see the top of this file (within the host the shares go to them only)."""
    cdef uint64_t es = sch.esize, off = 0, cnt, poff = 0, pcnt = 0
    cdef int L = len(local), H = len(cross), b, me, h, nchunk = 0
    cdef int last = -1, plast = -1
    if chunk == 0:
        chunk = count if count else 1
    me, h = local.index(sch.rank), cross.index(sch.rank)
    if L * H == 1:
        sch.pre_copy(<char *>out, <const char *>a, count * es)
        return
    cdef int m = max(L, H)
    cdef int *lg = <int *>malloc(L * sizeof(int))
    cdef int *xg = <int *>malloc(H * sizeof(int))
    cdef char **po = <char **>malloc(m * sizeof(char *))
    cdef const char **pa = <const char **>malloc(m * sizeof(char *))
    cdef uint64_t *nb = <uint64_t *>malloc(m * sizeof(uint64_t))
    # the local ring's send ops of this chunk and of the previous one (its allgather's
    # receives wait for them: they read the memory the receives overwrite)
    cdef int32_t *lsidx = <int32_t *>malloc(m * sizeof(int32_t))
    cdef int32_t *plsidx = <int32_t *>malloc(m * sizeof(int32_t))
    cdef int32_t *xsidx = <int32_t *>malloc(m * sizeof(int32_t))
    cdef int32_t *tmp
    cdef int *B = NULL
    try:
        B = _owner_bounds(owners, L)
        for b in range(L):
            lg[b] = local[b]
        for b in range(H):
            xg[b] = cross[b]
        while off < count or (count == 0 and off == 0):
            cnt = min(chunk, count - off)
            last = _hier_rs(sch, chan, out + off * es, a + off * es, cnt, lg, L, me,
                            po, pa, nb, lsidx, B)
            if nchunk:  # the previous chunk's allgather, behind this chunk's reduce-scatter
                _hier_ag(sch, chan, out + poff * es, pcnt, lg, L, me, po, nb, plast, plsidx, B)
            if B[me + 1] > B[me]:  # a position that carries none sends nothing across hosts
                last = _hier_x(sch, chan, out + off * es, a + off * es, cnt, xg, H, h, L, me,
                               po, pa, nb, xsidx, last, B)
            poff, pcnt, plast = off, cnt, last
            tmp = plsidx; plsidx = lsidx; lsidx = tmp
            nchunk += 1
            off += cnt
            if count == 0:
                break
        _hier_ag(sch, chan, out + poff * es, pcnt, lg, L, me, po, nb, plast, plsidx, B)
    finally:
        free(lg); free(xg); free(po); free(<void *>pa); free(nb); free(lsidx); free(plsidx)
        free(xsidx); free(B)


cdef int _hier_rs(Schedule sch, int chan, uintptr_t out, uintptr_t a, uint64_t count,
                  int *lg, int L, int me, char **po, const char **pa, uint64_t *nb,
                  int32_t *lsidx, int *B) except -2:
    """Reduce-scatter within the host: block me of out holds the host's sum. Returns the
    op that finishes it (-1: none, L == 1)."""
    cdef uint64_t es = sch.esize, lo, hi
    cdef int b
    if L == 1:
        return -1
    for b in range(L):
        lo, hi = (count * B[b]) // B[L], (count * B[b + 1]) // B[L]
        po[b], pa[b], nb[b] = <char *>out + lo * es, <const char *>a + lo * es, (hi - lo) * es
    return ring_rs(sch, chan, po, pa, nb, lsidx, lg, L, me)


cdef int _hier_x(Schedule sch, int chan, uintptr_t out, uintptr_t a, uint64_t count,
                 int *xg, int H, int h, int L, int me, char **po, const char **pa,
                 uint64_t *nb, int32_t *xsidx, int last, int *B) except -2:
    """Allreduce of block me across hosts (in place in out when L > 1). Returns the op
    that makes block me final."""
    cdef uint64_t es = sch.esize, lo, hi
    cdef uint64_t blo = (count * B[me]) // B[L]
    cdef uint64_t bcnt = (count * B[me + 1]) // B[L] - blo
    cdef const char *src = <const char *>out if L > 1 else <const char *>a
    cdef int b, first, last2
    if H == 1:
        return last
    for b in range(H):
        lo, hi = (bcnt * b) // H, (bcnt * (b + 1)) // H
        po[b] = <char *>out + (blo + lo) * es
        pa[b] = src + (blo + lo) * es
        nb[b] = (hi - lo) * es
    first = sch.nops
    last2 = ring_rs(sch, chan, po, pa, nb, xsidx, xg, H, h, last)
    ring_ag(sch, chan, po, NULL, nb, last2, xsidx, xg, H, h)
    # block me is final once the last non-empty receive of step 2 is: receives on one
    # endpoint finish in order, but an empty one counts as done at once
    for b in range(sch.nops - 1, first - 1, -1):
        if sch.ops[b].kind != NZ_SEND and sch.ops[b].kind != NZ_RECV_HDR \
                and sch.ops[b].nbytes > 0:
            return b
    return last


cdef int _hier_ag(Schedule sch, int chan, uintptr_t out, uint64_t count, int *lg, int L,
                  int me, char **po, uint64_t *nb, int last, int32_t *lsidx, int *B) except -2:
    """Allgather within the host, once block me is final (last)."""
    cdef uint64_t es = sch.esize, lo, hi
    cdef int b
    if L == 1:
        return 0
    for b in range(L):
        lo, hi = (count * B[b]) // B[L], (count * B[b + 1]) // B[L]
        po[b], nb[b] = <char *>out + lo * es, (hi - lo) * es
    ring_ag(sch, chan, po, NULL, nb, last, lsidx, lg, L, me)
    return 0


cdef int *hier_grid(Schedule sch, list hosts, int *H, int *L, int *h, int *me) except NULL:
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
            if G[j * L[0] + i] == sch.rank:
                h[0], me[0] = j, i
    return G


def hier_allgather(Schedule sch, int chan, uintptr_t out, uintptr_t own, uint64_t block_count,
                   uint64_t off, uint64_t cnt, list hosts, list owners=None):
    """Hierarchical allgather of elements [off, off+cnt) of every rank's block (hosts:
    every host's ranks, see _grid). A ring across hosts among the ranks at this rank's
    local position gathers their H blocks (a host's rails carry (H-1)/H of the result,
    every local rank driving them at once); then, host by host in the order their
    blocks arrive (h, h-1, ...), a ring within the host gathers that host's L blocks,
    each streaming from the receive that brought it. owners: see the top of this file."""
    cdef int H, L, h = 0, me = 0, t, j, i
    cdef uint64_t es = sch.esize, nbb = cnt * es
    cdef char *base = <char *>out + off * es
    cdef const char *mine = <const char *>own + off * es
    sch.pre_copy(base + sch.rank * block_count * es, mine, nbb)
    cdef int *G = hier_grid(sch, hosts, &H, &L, &h, &me)
    if owners is not None and H > 1 and L > 1:
        try:
            _hier_ag_aligned(sch, chan, base, mine, block_count, cnt, G, H, L, h, me, owners)
        finally:
            free(G)
        return
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
            ring_ag(sch, chan, po, mine, nb, -1, NULL, xg, H, h, xr)
        for t in range(H if L > 1 else 0):
            j = _mod(h - t, H)
            for i in range(L):
                po[i] = base + G[j * L + i] * block_count * es
            ring_ag(sch, chan, po, mine if t == 0 else NULL, nb,
                         -1 if t == 0 else xr[t - 1], NULL, G + h * L, L, me)
    finally:
        free(G); free(xg); free(po); free(nb); free(xr)


def hier_reduce_scatter(Schedule sch, int chan, uintptr_t out, uintptr_t a, uint64_t block_count,
                        uint64_t off, uint64_t cnt, list hosts, object work, list owners=None):
    """Hierarchical reduce_scatter of elements [off, off+cnt) of every block (hosts: see
    _grid): host by host (h-1, h-2, ..., h: the order the next step reads them), a ring
    within the host reduces that host's L blocks, leaving at local position i the host's
    sum of the block of its rank at position i; then a ring across hosts among the ranks
    at this local position reduces those H sums, block h (this rank's own) landing in
    out. Each step streams from the one that produces its input. work (>= (size + H) *
    cnt elements): the partial sums, within the host then across hosts. owners: see the
    top of this file."""
    cdef int H, L, h = 0, me = 0, t, j, i, r
    cdef uint64_t es = sch.esize, nbb = cnt * es
    cdef int *G = hier_grid(sch, hosts, &H, &L, &h, &me)
    if H * L == 1:
        free(G)
        sch.pre_copy(<char *>out + off * es, <const char *>a + off * es, nbb)
        return
    sch.keep.append(work)
    cdef char *w = <char *><uintptr_t>work.ctypes.data
    if owners is not None and H > 1 and L > 1:
        try:
            _hier_rs_aligned(sch, chan, <char *>out + off * es, <const char *>a + off * es,
                             w, block_count, cnt, G, H, L, h, me, owners)
        finally:
            free(G)
        return
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
                xdep[j] = ring_rs(sch, chan, po, pa, nb, sidx, G + h * L, L, me)
                xa[j] = po[me]
        if H > 1:
            for j in range(H):
                xg[j] = G[j * L + me]
                po[j] = w + (H * L + j) * nbb
            po[h] = <char *>out + off * es
            ring_rs(sch, chan, po, xa, nb, sidx, xg, H, h, -1, xdep)
    finally:
        free(G); free(xg); free(po); free(<void *>pa); free(<void *>xa); free(nb)
        free(sidx); free(xdep)


cdef int _hier_ag_aligned(Schedule sch, int chan, char *base, const char *mine,
                          uint64_t block_count, uint64_t cnt, int *G, int H, int L, int h,
                          int me, list owners) except -1:
    """Rail-aligned hierarchical allgather, H > 1 and L > 1 (base: element off of out;
    mine: of this rank's block, already copied to its place). Owner q carries part q of
    every block across hosts (parts: _owner_bounds), the other positions none:
    1. a ring within the host gathers the host's L blocks whole (every rank needs them);
    2. per local position i, a ring across hosts among the ranks at this position gathers
       this rank's part of the H blocks at position i, each from the receive of step 1
       that brought this host's one;
    3. per block of another host, a ring within the host gathers its parts from the
       owners, streaming from the receive of step 2 that brought this rank's part.
    Every rank of a host posts steps 1 and 3 in the same order (they share the rings'
    endpoints), and the ranks at one position post step 2 in the same order."""
    cdef uint64_t es = sch.esize, nbb = cnt * es, lo, hi
    cdef int m = max(H, L), t, j, i, b, x
    cdef int *B = _owner_bounds(owners, L)
    cdef char **po = <char **>malloc(m * sizeof(char *))
    cdef uint64_t *nb = <uint64_t *>malloc(m * sizeof(uint64_t))
    cdef int *xg = <int *>malloc(H * sizeof(int))
    cdef int32_t *lr = <int32_t *>malloc(L * sizeof(int32_t))       # step 1's receives
    cdef int32_t *xr = <int32_t *>malloc(L * H * sizeof(int32_t))   # step 2's, per (i, t)
    cdef uint64_t mlo = (cnt * B[me]) // B[L]
    cdef uint64_t mnb = (cnt * B[me + 1]) // B[L] * es - mlo * es
    try:
        if po == NULL or nb == NULL or xg == NULL or lr == NULL or xr == NULL:
            raise MemoryError()
        for i in range(L * H):
            xr[i] = -1
        for i in range(L):
            po[i], nb[i] = base + G[h * L + i] * block_count * es, nbb
        ring_ag(sch, chan, po, mine, nb, -1, NULL, G + h * L, L, me, lr)
        if mnb > 0:
            for t in range(L):  # in the order step 1 brings the blocks: me, me-1, ...
                i = _mod(me - t, L)
                for j in range(H):
                    xg[j] = G[j * L + me]
                    po[j], nb[j] = base + (G[j * L + i] * block_count + mlo) * es, mnb
                ring_ag(sch, chan, po, NULL, nb, -1 if t == 0 else lr[t - 1], NULL, xg, H, h,
                        xr + i * H)
        for i in range(L):
            for t in range(1, H):
                x = G[_mod(h - t, H) * L + i]
                for b in range(L):
                    lo, hi = (cnt * B[b]) // B[L], (cnt * B[b + 1]) // B[L]
                    po[b], nb[b] = base + (x * block_count + lo) * es, (hi - lo) * es
                ring_ag(sch, chan, po, NULL, nb, xr[i * H + t - 1], NULL, G + h * L, L, me)
    finally:
        free(B); free(po); free(nb); free(xg); free(lr); free(xr)
    return 0


cdef int _hier_rs_aligned(Schedule sch, int chan, char *out, const char *a, char *w,
                          uint64_t block_count, uint64_t cnt, int *G, int H, int L, int h,
                          int me, list owners) except -1:
    """Rail-aligned hierarchical reduce_scatter, H > 1 and L > 1 (out, a: at element off;
    w: >= size * cnt elements of scratch, block x's partial sums at x * cnt). Owner q
    carries part q of every block across hosts (parts: _owner_bounds), the other positions
    none:
    1. per block, a ring within the host reduces it, leaving owner q the host's sum of
       part q (in w);
    2. per local position i, a ring across hosts among the ranks at this position reduces
       this rank's part of the H blocks at position i, streaming from step 1; this host's
       one ends final (in place, or in out when i is this rank's position);
    3. every owner sends its final part of each other local rank's block to that rank.
    Every rank of a host posts step 1 in the same order (its rings share endpoints), and
    the ranks at one position post step 2 in the same order."""
    cdef uint64_t es = sch.esize, nbb = cnt * es, lo, hi
    cdef int m = max(H, L), t, j, i, b, x
    cdef int *B = _owner_bounds(owners, L)
    cdef char **po = <char **>malloc(m * sizeof(char *))
    cdef const char **pa = <const char **>malloc(m * sizeof(char *))
    cdef uint64_t *nb = <uint64_t *>malloc(m * sizeof(uint64_t))
    cdef int *xg = <int *>malloc(H * sizeof(int))
    cdef int32_t *sidx = <int32_t *>malloc(m * sizeof(int32_t))
    cdef int32_t *xdep = <int32_t *>malloc(H * L * sizeof(int32_t))  # step 1's, per block
    cdef int32_t *fin = <int32_t *>malloc(L * sizeof(int32_t))       # step 2's, per position
    cdef int32_t *bd = <int32_t *>malloc(H * sizeof(int32_t))
    cdef uint64_t mlo = (cnt * B[me]) // B[L]
    cdef uint64_t mnb = (cnt * B[me + 1]) // B[L] * es - mlo * es
    try:
        if (po == NULL or pa == NULL or nb == NULL or xg == NULL or sidx == NULL
                or xdep == NULL or fin == NULL or bd == NULL):
            raise MemoryError()
        for i in range(L):  # in the order step 2 reads them: position, then h-1, h-2, ...
            for t in range(1, H + 1):
                x = G[_mod(h - t, H) * L + i]
                for b in range(L):
                    lo, hi = (cnt * B[b]) // B[L], (cnt * B[b + 1]) // B[L]
                    po[b] = w + x * nbb + lo * es
                    pa[b] = a + (x * block_count + lo) * es
                    nb[b] = (hi - lo) * es
                xdep[x] = ring_rs(sch, chan, po, pa, nb, sidx, G + h * L, L, me)
        for i in range(L):
            if mnb == 0:
                continue
            for j in range(H):  # in place: ring_rs never reduces into the block it sends first
                x = G[j * L + i]
                xg[j], nb[j], bd[j] = G[j * L + me], mnb, xdep[x]
                po[j] = w + x * nbb + mlo * es
                pa[j] = po[j]
            if i == me:
                po[h] = out + mlo * es
            fin[i] = ring_rs(sch, chan, po, pa, nb, sidx, xg, H, h, -1, bd)
        for i in range(L):  # step 3: parts to their block's rank
            if i == me:
                for b in range(L):
                    lo, hi = (cnt * B[b]) // B[L], (cnt * B[b + 1]) // B[L]
                    if b != me and hi > lo:
                        sch.add(NZ_RECV, chan, G[h * L + b], out + lo * es, NULL,
                                (hi - lo) * es)
            elif mnb > 0:
                x = G[h * L + i]
                sch.add(NZ_SEND, chan, x, w + x * nbb + mlo * es, NULL, mnb, fin[i])
    finally:
        free(B); free(po); free(<void *>pa); free(nb); free(xg); free(sidx); free(xdep)
        free(fin); free(bd)
    return 0


def hier_broadcast(Schedule sch, int chan, int root, uintptr_t buf, uint64_t count, list hosts,
                   list owners=None, uintptr_t src=0):
    """Hierarchical broadcast (hosts: see _grid): the buffer in L shares; the root hands
    share i to the rank at local position i of its host (over shm), which carries it
    down a chain across hosts, host hr -> hr+1 -> ..., to the ranks at position i (a
    host's rails carry S once, every local rank driving them); then a ring within every
    host gathers the L shares, each streaming from the receive that brought it. The
    root's buffer is only read (it may be read-only; a re-run reads it again): its ring
    receives go to scratch. owners: see the top of this file (the shares are theirs only;
    an empty share is neither handed over nor chained). src: what the root sends when not
    buf (a lazy one's re-run after the root returned: its kept copy, buf being scratch)."""
    cdef int H, L, h = 0, me = 0, hr = 0, ir = 0, t, i, r0 = -1
    cdef uint64_t es = sch.esize
    cdef int *G = hier_grid(sch, hosts, &H, &L, &h, &me)
    cdef char **po = <char **>malloc(L * sizeof(char *))
    cdef uint64_t *nb = <uint64_t *>malloc(L * sizeof(uint64_t))
    cdef const char *own = NULL
    cdef char *sink
    cdef int *B = NULL
    try:
        if H * L == 1:
            return
        B = _owner_bounds(owners, L)
        for i in range(H * L):
            if G[i] == root:
                hr, ir = i // L, i % L
        if sch.rank == root and src != 0:
            buf = src  # only read at the root: its ring receives go to scratch below
        for i in range(L):
            po[i] = <char *>buf + (count * B[i] // B[L]) * es
            nb[i] = (count * B[i + 1] // B[L] - count * B[i] // B[L]) * es
        if sch.rank == root:
            for t in range(1, L):
                i = _mod(ir + t, L)
                if B[i + 1] > B[i]:
                    sch.add(NZ_SEND, chan, G[hr * L + i], po[i], NULL, nb[i])
        elif B[me + 1] == B[me]:
            pass  # no share: this position takes no part outside the host's ring
        elif h == hr:
            r0 = sch.add(NZ_RECV, chan, root, po[me], NULL, nb[me])
        else:
            r0 = sch.add(NZ_RECV, chan, G[_mod(h - 1, H) * L + me], po[me], NULL, nb[me])
        if _mod(h - hr, H) < H - 1 and B[me + 1] > B[me]:
            sch.add(NZ_SEND, chan, G[_mod(h + 1, H) * L + me], po[me], NULL, nb[me], r0)
        if L > 1:
            if sch.rank == root:
                scratch = np.empty(count * es + 1, np.uint8)
                sch.keep.append(scratch)
                sink = <char *><uintptr_t>scratch.ctypes.data
                own = po[me]
                for i in range(L):
                    po[i] = sink + (count * B[i] // B[L]) * es
            ring_ag(sch, chan, po, own, nb, r0, NULL, G + h * L, L, me)
    finally:
        free(G); free(po); free(nb); free(B)
