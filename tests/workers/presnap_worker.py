"""One rank of tests/test_presnap.py (two loop rails: failover on): when the failover snapshot
of an in-place input is taken (executor._presnap), and that finished requests leave nothing
behind. Prints RESULT {json}: the checks that failed (empty when all held) and counters."""
import gc
import os
import sys
import time
import weakref

import numpy as np

import nezha
from tests._result import report

N = 100_003  # int64: 800 KiB, above the lazy limit (failover.LAZY_MAX_BYTES): never lazy


def _snaps(comm):
    s = comm.stats()["snapshots"]
    return s["at_post"], s["at_run"], s["out_of_place"]


def _inp(r, k):
    return (np.arange(N, dtype=np.int64) % 97) * (k + 1) + r


def _sum(n, k):
    return sum(_inp(q, k) for q in range(n))


def posted(comm, bad):
    """Distinct buffers: the first, posted with nothing ahead, runs out of place (no copy);
    each later one's copy taken by iallreduce itself (the counter moved before it
    returned), none at the runs; results exact. Rank 1 posts 0.3 s late, so rank 0's first
    request is unfinished for sure while it posts the others."""
    r, n = comm.rank, comm.size
    if r == 1:
        time.sleep(0.3)
    xs = [_inp(r, k) for k in range(4)]
    reqs = []
    for k, x in enumerate(xs):
        before = _snaps(comm)[0]
        reqs.append(comm.iallreduce(x))
        if r == 0 and _snaps(comm)[0] != before + (k > 0):
            bad.append(f"posted {k}: at_post {before} -> {_snaps(comm)[0]}")
    for req in reqs:
        req.wait(60)
    for k, x in enumerate(xs):
        if not np.array_equal(x, _sum(n, k)):
            bad.append(f"posted {k}: wrong result")
    post, run, oop = _snaps(comm)
    if run != 0 or post + oop != 4 or (r == 0 and (post, oop) != (3, 1)):
        bad.append(f"posted: snapshots {_snaps(comm)}, want (3, 0, 1) on rank 0")


def clash(comm, bad):
    """An earlier unfinished request that writes the buffer (in place on it, or another
    input's result into it): no copy when posted; it runs out of place (so does the first,
    with nothing ahead). One that only reads it: a copy when posted. Rank 1 posts half a
    second late, so rank 0's first request is unfinished for sure."""
    r, n = comm.rank, comm.size
    if r == 1:
        time.sleep(0.5)
    x = _inp(r, 0)
    y, out = _inp(r, 1), np.zeros(N, np.int64)
    z, zout = _inp(r, 2), np.zeros(N, np.int64)
    p0, r0, o0 = _snaps(comm)
    reqs = [comm.iallreduce(x), comm.iallreduce(x),           # the second: out of place
            comm.iallreduce(y, out), comm.iallreduce(out),    # out written first: same
            comm.iallreduce(z, zout), comm.iallreduce(z)]     # z only read before: posted
    posted_now = _snaps(comm)[0] - p0
    for req in reqs:
        req.wait(60)
    p1, r1, o1 = _snaps(comm)
    got = (posted_now, p1 - p0, r1 - r0, o1 - o0)
    if r == 0 and got != (1, 1, 0, 3):
        bad.append(f"clash: at post {got[:2]}, at run {got[2]}, out of place {got[3]}; "
                   "want 1, 1, 0, 3")
    want = [(x, _sum(n, 0) * n), (out, _sum(n, 1) * n), (zout, _sum(n, 2)), (z, _sum(n, 2))]
    for i, (got, exp) in enumerate(want):
        if not np.array_equal(got, exp):
            bad.append(f"clash: result {i} wrong")


def blocking(comm, bad):
    """Blocking in place, nothing ahead: each run goes out of place into the spare (no copy
    before it), its result copied back. Growing sizes move the spare (the plan cache keys
    on its address), then a smaller one reuses it; a second call on the same buffer runs
    the cached schedule. Every result exact, in int64, int32 and float64 (small integers)."""
    r, n = comm.rank, comm.size
    for k, (count, dt) in enumerate([(N, np.int64), (N, np.int64), (3 * N + 2, np.int32),
                                     (4 * N + 1, np.float64), (N, np.int64)]):
        x = _inp(r, k)[: min(count, N)].astype(dt)
        x = np.resize(x, count) + r  # not a multiple of the ranks or of the chunk size
        want = sum(np.resize(_inp(q, k)[: min(count, N)].astype(dt), count) + q
                   for q in range(n))
        before = _snaps(comm)
        comm.allreduce(x)
        after = _snaps(comm)
        if (after[0] - before[0], after[1] - before[1], after[2] - before[2]) != (0, 0, 1):
            bad.append(f"blocking {k}: snapshots {before} -> {after}, want one out of place")
        if x.dtype != dt or not np.array_equal(x, want):
            bad.append(f"blocking {k}: wrong result ({count} x {np.dtype(dt).name})")


def forgotten(comm, bad):
    """Finished requests (and so their inputs, through req.spec) are not kept by the
    library, also those that finished behind an unfinished one; lent buffers go back."""
    r, n = comm.rank, comm.size
    refs = []
    for step in range(3):
        a, b = _inp(r, step), np.zeros(N, np.int64)
        comm.allreduce(a)                              # blocking, in place
        comm.allreduce(a, b)                           # blocking, out of place
        reqs = [comm.iallreduce(_inp(r, k)) for k in range(3)]
        if r == 1 and step == 1:
            time.sleep(0.3)  # rank 0's later requests wait behind an unfinished one
        for q in reqs:
            refs.append(weakref.ref(q.wait(60)))
        refs += [weakref.ref(a), weakref.ref(b)] + [weakref.ref(q) for q in reqs]
        del a, b, reqs, q
    comm.barrier()  # the last lazy collective's input copy is the library's own
    gc.collect()
    alive = sum(ref() is not None for ref in refs)
    if alive:
        bad.append(f"forgotten: {alive} of {len(refs)} buffers or requests still alive")
    if comm._writing:
        bad.append(f"forgotten: {len(comm._writing)} finished requests still listed")
    if comm._spares.lent_bytes() > 3 * N * 8:  # three in place at once, reused
        bad.append(f"forgotten: {comm._spares.lent_bytes()} bytes lent")


def _resident(buf):
    """Pages of buf (page-aligned) the kernel holds in memory (mincore), and its pages."""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    pages = -(-buf.nbytes // mmap.PAGESIZE)
    vec = (ctypes.c_ubyte * pages)()
    if libc.mincore(ctypes.c_void_p(buf.ctypes.data), ctypes.c_size_t(buf.nbytes), vec):
        raise OSError(ctypes.get_errno(), "mincore")
    return sum(v & 1 for v in vec), pages


def spare(comm, bad):
    """NEZHA_SPARE_BYTES: the out-of-place run's target made and touched in Communicator();
    an in-place allreduce of that size runs into it (no new buffer) and is exact."""
    want = int(os.environ["NEZHA_SPARE_BYTES"])
    snap = comm._spares._named.get("snap")
    if not want:
        if snap is not None:
            bad.append(f"spare: a spare of {snap.nbytes} B with NEZHA_SPARE_BYTES=0")
        return
    if snap is None or snap.nbytes != want:
        bad.append(f"spare: {None if snap is None else snap.nbytes} B made, {want} wanted")
        return
    res, pages = _resident(snap)
    if res != pages:
        bad.append(f"spare: {res} of {pages} pages resident after Communicator()")
    n = want // 8
    x = (np.arange(n, dtype=np.int64) % 1009) * (comm.rank + 1)
    comm.allreduce(x)
    exp = (np.arange(n, dtype=np.int64) % 1009) * sum(r + 1 for r in range(comm.size))
    if not np.array_equal(x, exp):
        bad.append("spare: wrong sum")
    if comm._spares._named.get("snap") is not snap or _snaps(comm)[2] != 1:
        bad.append(f"spare: the allreduce did not run into it ({_snaps(comm)})")


def main(scenario):
    comm = nezha.Communicator()
    bad = []
    try:
        if not comm._failover:
            bad.append("failover is off")
        else:
            {"posted": posted, "clash": clash, "blocking": blocking,
             "forgotten": forgotten, "spare": spare}[scenario](comm, bad)
        report(dict(bad=bad, snaps=list(_snaps(comm)) if "snapshots" in comm.stats() else None))
    finally:
        comm.close()


if __name__ == "__main__":
    main(sys.argv[1])
