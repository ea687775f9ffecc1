"""Collectives against the numpy oracle; every rank runs this file under mpirun.

tests/test_coll_mpi.py launches it with 1, 2, 3, 4, 5 and 8 ranks (`make test-4` runs it
by hand). Run alone (no mpirun) it runs on one rank.
"""
import gc
import os
import struct
import time
import weakref

import numpy as np
import pytest

import nezha
from nezha.planner import ALGO_HIER
from nezha.types import DType, ReduceOp
from tests import bf16, oracle

# bfloat16 buffers (tests/bf16.py): torch tensors where NEZHA_TEST_TORCH=1 (test_coll_mpi sets
# it for some worlds), ml_dtypes arrays elsewhere; without either those cases skip
TORCH = os.environ.get("NEZHA_TEST_TORCH", "0") == "1"
torch = None
if TORCH:
    try:
        import torch
    except ImportError:  # bf16.available(TORCH) then skips the bfloat16 cases
        pass

SMALL = [0, 1, 2, 3, 7, 31, 97, 1009]
LARGE = [4099, 65537, 262147]   # 262147 float32 = 4 segments of 256 KiB + a prime tail
FULL = os.environ.get("NEZHA_TEST_FULL", "1") == "1"
# NEZHA_TEST_MATRIX=full (make test-matrix): full products instead of the covering arrays below
FULL_MATRIX = os.environ.get("NEZHA_TEST_MATRIX", "") == "full"


# NEZHA_TEST_HOSTS=0,1,1,2 makes hosts on this machine (rank r is on host entry r): ranks
# of one host use shared memory, the others tcp over lo (tests/test_coll_mpi.py)
HOSTS = [h for h in os.environ.get("NEZHA_TEST_HOSTS", "").split(",") if h]


def _config(**kw):
    if HOSTS:
        kw["HOST_ID"] = "host" + HOSTS[int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))]
    return kw


class ByAlgo:
    """comms(algo): the communicator with NEZHA_ALGO=algo, made on first use; the one made
    before is closed then (the tests list their cases algorithm by algorithm, so each
    algorithm gets one communicator, on every rank in the same order)."""

    def __init__(self):
        self.algo, self.comm = None, None

    def __call__(self, algo):
        if algo != self.algo:
            self.close()
            self.comm, self.algo = nezha.Communicator(config=_config(ALGO=algo)), algo
        return self.comm

    def close(self):
        if self.comm is not None:
            self.comm.close()
        self.algo, self.comm = None, None


@pytest.fixture(scope="module")
def comms():
    """Communicators for test_allreduce: NEZHA_ALGO auto and ring."""
    by = ByAlgo()
    yield by
    by.close()


@pytest.fixture(scope="module")
def world():
    c = nezha.Communicator(config=_config())
    yield c
    c.close()


def _true_hosts(world):
    """Each rank's host as the test sees it: NEZHA_TEST_HOSTS, else its network namespace
    (lab hosts are namespaces), gathered through MPI, not through nezha."""
    if HOSTS or world.size == 1:
        return HOSTS or ["0"]
    from mpi4py import MPI
    return [str(h) for h in MPI.COMM_WORLD.allgather(os.stat("/proc/self/ns/net").st_ino)]


def test_transports_and_algorithm_follow_the_hosts(world):
    hosts = _true_hosts(world)
    shm_on = "shm" in world.config["RAILS"]
    for p in range(world.size):
        if p != world.rank:
            same = hosts[p] == hosts[world.rank]
            assert world._mesh.transport(p) == ("shm" if same and shm_on else "tcp")
    counts = {h: hosts.count(h) for h in hosts}
    even = len(counts) > 1 and len(set(counts.values())) == 1 and max(counts.values()) > 1
    forced = world.config["ALGO"]
    want = {"ring": "ring", "rd": "rd", "rab": "rab"}.get(forced, "hier" if even else "ring")
    got = world.algorithm_for(1 << 24)
    # flat and auto: the cost model's bandwidth algorithm (rab where hosts are uneven and
    # fewer of its pairs than of the ring's cross hosts)
    assert got == want or (want == "ring" and forced == "auto" and got == "rab"), got
    assert world.local_rank == [p for p in range(world.size)
                                if hosts[p] == hosts[world.rank]].index(world.rank)


def wrap(storage, dt):
    """A buffer nezha accepts holding storage's bits (bfloat16: tests/bf16.py)."""
    if dt != DType.BFLOAT16:
        return storage
    if not bf16.available(TORCH):
        pytest.skip("bfloat16 buffers need ml_dtypes or torch (neither installed)")
    return bf16.view(storage, TORCH)


def unwrap(buf, dt):
    """The storage array behind a buffer made by wrap."""
    if dt == DType.BFLOAT16:
        return bf16.bits(buf)
    return buf


# ---- the case matrices: covering arrays, not full products ----------------------------
# The reduction kernels have their own full dtype x op x size matrix (test_reduce_kernels.py).
# Here every collective still meets every dtype, every op of each dtype, every size and (for
# allreduce) both algorithms and both buffer modes, but the factors are combined so that
# each pair that matters occurs at least once instead of every combination: what a run over
# all ranks' transports and algorithms can get wrong depends on the element size and the
# count (how the bytes are cut into pieces), the op (the kernel called on each piece) and
# the algorithm. test_case_matrices_cover_what_they_claim checks the coverage stated here.


def cases(sizes):
    """Every (dtype, op) pair once, the sizes rotating under them: every dtype meets every
    size (each dtype has at least as many ops as there are sizes here) and every op meets
    every size over the dtypes."""
    assert len(sizes) <= 5
    if FULL_MATRIX:
        return full_cases(sizes)
    return [(dt, op, sizes[(oi + di) % len(sizes)])
            for di, dt in enumerate(oracle.ALL_DTYPES)
            for oi, op in enumerate(oracle.ops_for(dt))]


def full_cases(sizes):
    """Every (dtype, op, size): the full product, for the few large-size dtypes below."""
    return [(dt, op, n) for dt in oracle.ALL_DTYPES for op in oracle.ops_for(dt) for n in sizes]


LARGE_DTYPES = (DType.INT32, DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16, DType.UINT8,
                DType.FLOAT64)


def allreduce_cases():
    """(algorithm, (dtype, op, n), inplace) rows, grouped by algorithm (ByAlgo).

    Small sizes: every (algorithm, dtype, size) triple; under each (algorithm, dtype) the
    ops rotate (8 sizes: every op of the dtype at least once per algorithm) and every op
    meets every size; in place / out of place alternate so that every
    (dtype, size) is run both ways (once per algorithm) and every (algorithm, dtype) and
    (algorithm, size) both ways. Large sizes (NEZHA_TEST_FULL): for a few dtypes every op,
    every (algorithm, size) per dtype, in place and out."""
    algos = ("auto", "ring")
    if FULL_MATRIX:
        big = [c for c in full_cases(LARGE) if c[0] in LARGE_DTYPES] if FULL else []
        return [(a, c, i) for a in algos for c in full_cases(SMALL) + big for i in (False, True)]
    rows = []
    for ai, algo in enumerate(algos):
        for di, dt in enumerate(oracle.ALL_DTYPES):
            ops = oracle.ops_for(dt)
            for si, n in enumerate(SMALL):
                rows.append((algo, (dt, ops[(si + di + 3 * ai) % len(ops)], n),
                             (si + di + ai) % 2 == 1))
        if not FULL:
            continue
        for di, dt in enumerate(LARGE_DTYPES):
            ops = oracle.ops_for(dt)
            for k in range(max(2 * len(LARGE), len(ops))):
                if k % 2 == ai:
                    li = (k // 2) % len(LARGE)
                    rows.append((algo, (dt, ops[k % len(ops)], LARGE[li]), (li + di) % 2 == 1))
    return rows


def by_itemsize(sizes):
    """(dtype, n) for data-moving collectives (no arithmetic): every (element size, n)
    pair, the dtypes of one element size taking turns; every dtype gets two sizes at least
    (the largest ones again where a group has more than half as many dtypes as sizes)."""
    groups = {}
    for dt in oracle.ALL_DTYPES:
        groups.setdefault(np.dtype(oracle.numpy_dtype(dt)).itemsize, []).append(dt)
    if FULL_MATRIX:
        return [(dt, n) for dt in oracle.ALL_DTYPES for n in sizes]
    out = []
    for g in groups.values():
        for i in range(max(len(sizes), 2 * len(g))):
            n = sizes[i] if i < len(sizes) else sizes[2 * len(sizes) - 1 - i]
            out.append((g[i % len(g)], n))
    return out


def ids(c):
    return f"{c[0].name.lower()}-{c[1].name}-{c[2]}"


def test_case_matrices_cover_what_they_claim():
    """The covering arrays above keep every pair (and the triples named) they promise."""
    pairs = {(dt, op) for dt in oracle.ALL_DTYPES for op in oracle.ops_for(dt)}
    ops = {op for _, op in pairs}
    rows = allreduce_cases()
    small = [(a, c, i) for a, c, i in rows if c[2] in SMALL]
    for algo in ("auto", "ring"):
        mine = [(c, i) for a, c, i in small if a == algo]
        assert {(c[0], c[1]) for c, _ in mine} == pairs, algo
        assert {(c[0], c[2]) for c, _ in mine} == {(d, n) for d in oracle.ALL_DTYPES
                                                   for n in SMALL}, algo
        for d in oracle.ALL_DTYPES:
            assert {i for c, i in mine if c[0] == d} == {False, True}, (algo, d)
        for n in SMALL:
            assert {i for c, i in mine if c[2] == n} == {False, True}, (algo, n)
    assert {(c[1], c[2]) for _, c, _ in small} == {(op, n) for op in ops for n in SMALL}
    assert {(c[0], c[2], i) for _, c, i in small} == {(d, n, i) for d in oracle.ALL_DTYPES
                                                      for n in SMALL for i in (False, True)}
    if FULL:
        large = [(a, c, i) for a, c, i in rows if c[2] in LARGE]
        assert {(c[0], c[1]) for _, c, _ in large} == {p for p in pairs if p[0] in LARGE_DTYPES}
        assert {(a, c[0], c[2]) for a, c, _ in large} == {
            (a, d, n) for a in ("auto", "ring") for d in LARGE_DTYPES for n in LARGE}
        assert {i for _, _, i in large} == {False, True}
    assert [a for a, _, _ in rows] == sorted(a for a, _, _ in rows)  # one communicator each
    for sizes in ([0, 1, 7, 97], [0, 1, 3]):
        cs = cases(sizes)
        assert {(c[0], c[1]) for c in cs} == pairs
        assert {(c[0], c[2]) for c in cs} == {(d, n) for d in oracle.ALL_DTYPES for n in sizes}
        assert {(c[1], c[2]) for c in cs} == {(op, n) for op in ops for n in sizes}
    for sizes in (SMALL + LARGE, [0, 1, 5, 97, 4099, 65537]):
        got = by_itemsize(sizes)
        assert {d for d, _ in got} == set(oracle.ALL_DTYPES)
        assert {(np.dtype(oracle.numpy_dtype(d)).itemsize, n) for d, n in got} == {
            (k, n) for k in (1, 2, 4, 8) for n in sizes}
        assert all(len({n for d2, n in got if d2 == d}) >= 2 for d in oracle.ALL_DTYPES)
    hc = hier_cases()
    assert {(c, n) for _, c, n in hc} == {(c, n) for c in HIER_CASES for n in HIER_SIZES}
    for algo in ("auto", "hier"):
        assert {c for a, c, _ in hc if a == algo} == set(HIER_CASES)
        assert {n for a, _, n in hc if a == algo} == set(HIER_SIZES)
    assert [a for a, _, _ in hc] == sorted(a for a, _, _ in hc)
    flat = [(a, c, n) for a, c, n in hc if _flat_sample(c, n)]
    assert {c for _, c, _ in flat} == set(HIER_CASES)
    assert {a for a, _, n in flat if n == HIER_SIZES[-1]} == {"auto", "hier"}


@pytest.mark.parametrize("algo,case,inplace", allreduce_cases(),
                         ids=[f"{a}-{ids(c)}-{'inplace' if i else 'out'}"
                              for a, c, i in allreduce_cases()])
def test_allreduce(comms, algo, case, inplace):
    comm = comms(algo)
    dt, op, n = case
    inputs = [oracle.values(dt, n, r, op) for r in range(comm.size)]
    expected = oracle.reduce(dt, op, inputs)
    send = wrap(inputs[comm.rank].copy(), dt)
    if inplace:
        comm.allreduce(send, op=op)
        got = unwrap(send, dt)
    else:
        recv = wrap(np.full_like(inputs[0], 0x55), dt)
        comm.allreduce(send, recv, op=op)
        got = unwrap(recv, dt)
        np.testing.assert_array_equal(unwrap(send, dt), inputs[comm.rank])  # input untouched
    oracle.assert_result(got, expected, dt, op)
    # every rank must hold the very same bits
    digest = np.frombuffer(got.tobytes(), np.uint8).astype(np.uint64).sum() if n else 0
    assert len(set(comm._boot.allgather(int(digest)))) == 1


def test_repeated_calls_on_the_same_buffers(world):
    """Calls on buffers used before take the fast path (fastpath.pxi). Between calls on the
    same addresses change what changes the result: contents, op, and views of another
    dtype or size, in place or not; a stale schedule or input copy would show."""
    store, outs = np.zeros(8 * 1009, np.uint8), np.zeros(8 * 1009, np.uint8)
    hits = world.stats()["fast_path_calls"]
    calls = 0
    for rnd in range(2):  # the second round repeats every entry the first made
        for dt in (DType.INT32, DType.FLOAT64, DType.UINT8, DType.FLOAT32):
            npdt = oracle.numpy_dtype(dt)
            for n in (1, 97, 1009):
                for op in oracle.ops_for(dt)[:3]:
                    for inplace in (False, True):
                        for rep in range(2):
                            seed = rnd * 2 + rep
                            inputs = [oracle.values(dt, n, r, op, seed) for r in range(world.size)]
                            send = store[: n * npdt.itemsize].view(npdt)
                            send[:] = inputs[world.rank]
                            if inplace:
                                assert world.allreduce(send, op=op) is send
                                got = send
                            else:
                                recv = outs[: n * npdt.itemsize].view(npdt)
                                recv[:] = 0x55
                                assert world.allreduce(send, recv, op=op) is recv
                                got = recv
                                np.testing.assert_array_equal(send, inputs[world.rank])
                            oracle.assert_result(got, oracle.reduce(dt, op, inputs), dt, op)
                            calls += 1
    # every second call repeats the one before (entries are per pair of addresses)
    assert world.stats()["fast_path_calls"] - hits >= calls // 2


def test_small_collectives_need_no_vote(world):
    """With failover (two rails) small collectives of every kind return without a vote
    (lazy); one above the lazy limit ends with one. Without failover nothing votes."""
    n, r = world.size, world.rank
    before = world.stats()["votes"]
    for root in range(n):
        a = np.arange(5, dtype=np.int64) + r
        b = a.copy() if r == root else np.zeros(5, np.int64)
        world.broadcast(b, root=root)
        assert (b == np.arange(5) + root).all()
        out = np.zeros(5, np.int64)
        world.reduce(a, out, root=root)
        if r == root:
            assert (out == np.arange(5) * n + n * (n - 1) // 2).all()
        world.allreduce(a)
        g = np.zeros(5 * n, np.int64)
        world.allgather(np.full(5, r, np.int64), g)
        assert (g == np.repeat(np.arange(n), 5)).all()
        world.barrier()
    assert world.stats()["votes"] == before
    world.allreduce(np.ones(1 << 17, np.float32))  # 512 KiB: above the lazy limit
    assert (world.stats()["votes"] > before) == world._failover


def _sent_to_other_hosts(world):
    """A function giving the bytes this rank has sent so far to ranks on other hosts (every
    channel): the hier-layout tests check that only a host's first rank crosses hosts."""
    n, hosts = world.size, world.planner.hosts
    away = [p for p in range(n) if hosts[p] != hosts[world.rank]]

    def sent_away():
        b = world._engine.endpoint_bytes()
        return sum(b[c * n + p][0] for c in range(world.nchan) for p in away)
    return sent_away


def test_hier_layout_small_allreduce_crosses_hosts_from_one_rank_per_host(world):
    """With several ranks on each host a small (rd) allreduce or reduce crosses hosts from
    each host's first rank only (rd_hosts.pxi: TCP messages cost the CPU that bounds small
    collectives there); results exact, the same bits on every rank."""
    if not world.planner.hier_ok or world.algorithm_for(8) != "rd":
        pytest.skip("needs several ranks on each host (even) and rd for small payloads")
    n, r = world.size, world.rank
    sent_away = _sent_to_other_hosts(world)
    before = sent_away()
    for dt, op, count in ((DType.INT64, ReduceOp.SUM, 1), (DType.FLOAT32, ReduceOp.SUM, 7),
                          (DType.INT32, ReduceOp.MAX, 97), (DType.FLOAT64, ReduceOp.AVG, 3)):
        inputs = [oracle.values(dt, count, q, op) for q in range(n)]
        out = np.full_like(inputs[0], 0x55)
        world.allreduce(inputs[r].copy(), out, op=op)
        oracle.assert_result(out, oracle.reduce(dt, op, inputs), dt, op)
        assert len(set(world._boot.allgather(out.tobytes()))) == 1
        red = np.full_like(inputs[0], 0x55)
        world.reduce(inputs[r].copy(), red, op=op, root=n - 1)
        if r == n - 1:
            oracle.assert_result(red, oracle.reduce(dt, op, inputs), dt, op)
    first = world.local_rank == 0
    assert (sent_away() > before) == first, (world.local_rank, sent_away() - before)


def test_hier_layout_barrier_crosses_hosts_from_one_rank_per_host(world):
    """With several ranks on each host the barrier crosses hosts from each host's first
    rank only (barrier_hosts.pxi), and still no rank leaves before the last one entered:
    each round one rank (a first one, then not) enters 30 ms late; CLOCK_MONOTONIC is
    one clock for all the ranks of a test."""
    if not world.planner.hier_ok:
        pytest.skip("needs several ranks on each host (even)")
    n, r = world.size, world.rank
    sent_away = _sent_to_other_hosts(world)
    world.barrier()
    before = sent_away()
    for late in sorted({0, 1, n - 1, n // 2}):
        if r == late:
            time.sleep(0.03)
        entered = time.monotonic()
        world.barrier()
        left = time.monotonic()
        times = [struct.unpack("dd", b) for b in world._boot.allgather(struct.pack("dd", entered, left))]
        assert min(t[1] for t in times) >= times[late][0], (late, times)
    for _ in range(20):
        world.barrier()
    first = world.local_rank == 0
    assert (sent_away() > before) == first, (world.local_rank, sent_away() - before)


def test_buffers_are_not_kept_alive(world):
    """The plan cache and the fast path keep addresses, not buffers: a job that reduces
    fresh arrays every step must not pile them up (nor the requests that took a failover
    snapshot when posted, in place: executor._presnap)."""
    refs = []
    for n in (5, 70001):
        a, b = np.ones(n, np.float32), np.zeros(n, np.float32)
        for _ in range(3):  # the second and third calls take the fast path
            world.allreduce(a, b)
            assert (b == world.size).all()
        c = np.ones(n, np.float32)
        world.iallreduce(c).wait()
        assert (c == world.size).all()
        refs += [weakref.ref(a), weakref.ref(b), weakref.ref(c)]
        del a, b, c
    world.barrier()  # the last lazy collective's input copy is the library's own
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)


@pytest.mark.parametrize("dt,n", by_itemsize(SMALL + LARGE),
                         ids=[f"{d.name.lower()}-{n}" for d, n in by_itemsize(SMALL + LARGE)])
def test_broadcast(world, dt, n):
    for root in sorted({0, world.size - 1, world.size // 2}):
        inputs = oracle.values(dt, n, root, ReduceOp.SUM, seed=root + 1)
        buf = inputs.copy() if world.rank == root else np.zeros_like(inputs)
        world.broadcast(wrap(buf, dt), root=root)
        np.testing.assert_array_equal(buf, inputs)


@pytest.mark.parametrize("case", cases([0, 1, 7, 97]) + [
    c for c in full_cases([4099]) if c[0] in (DType.INT64, DType.FLOAT32)], ids=ids)
def test_reduce(world, case):
    dt, op, n = case
    inputs = [oracle.values(dt, n, r, op) for r in range(world.size)]
    expected = oracle.reduce(dt, op, inputs)
    root = world.size - 1
    send = wrap(inputs[world.rank].copy(), dt)
    recv = wrap(np.zeros_like(inputs[0]), dt)
    world.reduce(send, recv, op=op, root=root)
    if world.rank == root:
        oracle.assert_result(unwrap(recv, dt), expected, dt, op)
    np.testing.assert_array_equal(unwrap(send, dt), inputs[world.rank])


@pytest.mark.parametrize("dt,n", by_itemsize([0, 1, 5, 97, 4099, 65537]),
                         ids=[f"{d.name.lower()}-{n}"
                              for d, n in by_itemsize([0, 1, 5, 97, 4099, 65537])])
def test_allgather(world, dt, n):
    inputs = [oracle.values(dt, n, r, ReduceOp.SUM) for r in range(world.size)]
    recv = np.full(n * world.size, 0x33, dtype=inputs[0].dtype)
    world.allgather(wrap(inputs[world.rank].copy(), dt), wrap(recv, dt))
    np.testing.assert_array_equal(recv, np.concatenate(inputs))


@pytest.mark.parametrize("case", cases([0, 1, 3]) + [
    c for c in full_cases([97, 4099]) if c[0] in (DType.INT32, DType.FLOAT64, DType.BFLOAT16)],
    ids=ids)
def test_reduce_scatter(world, case):
    dt, op, n = case
    inputs = [oracle.values(dt, n * world.size, r, op) for r in range(world.size)]
    expected = oracle.reduce(dt, op, inputs)[world.rank * n:(world.rank + 1) * n]
    recv = np.full(n, 0x11, dtype=inputs[0].dtype)
    world.reduce_scatter(wrap(inputs[world.rank].copy(), dt), wrap(recv, dt), op=op)
    oracle.assert_result(recv, expected, dt, op)


@pytest.mark.parametrize("dt", [DType.UINT8, DType.INT32, DType.FLOAT64, DType.BFLOAT16],
                         ids=lambda d: d.name.lower())
@pytest.mark.parametrize("n", [0, 1, 3, 1009, 65537])
def test_alltoall(world, dt, n):
    inputs = [oracle.values(dt, n * world.size, r, ReduceOp.SUM) for r in range(world.size)]
    recv = np.zeros(n * world.size, dtype=inputs[0].dtype)
    world.alltoall(wrap(inputs[world.rank].copy(), dt), wrap(recv, dt))
    expected = np.concatenate([inputs[src][world.rank * n:(world.rank + 1) * n]
                               for src in range(world.size)])
    np.testing.assert_array_equal(recv, expected)


def test_barrier_and_sequence(world):
    for _ in range(20):
        world.barrier()
    a = np.array([world.rank], np.int64)
    world.allreduce(a)
    assert a[0] == world.size * (world.size - 1) // 2


@pytest.mark.parametrize("n", [0, 1, 1000, 300001])
def test_send_recv_ring(world, n):
    if world.size == 1:
        pytest.skip("needs two ranks")
    nxt, prv = (world.rank + 1) % world.size, (world.rank - 1) % world.size
    out = oracle.values(DType.INT32, n, world.rank, ReduceOp.SUM)
    got = np.zeros(n, np.int32)
    # evens send first, odds receive first: no rank waits on a send that nobody receives
    reqs = [world.isend(out, nxt), world.irecv(got, prv)]
    for r in reqs:
        r.wait()
    np.testing.assert_array_equal(got, oracle.values(DType.INT32, n, prv, ReduceOp.SUM))


def test_nonblocking_many_outstanding(world):
    n = world.size
    bufs = [np.full(1000 + 17 * i, world.rank + i, np.int64) for i in range(6)]
    bc = np.arange(50001, dtype=np.float32) if world.rank == 0 else np.zeros(50001, np.float32)
    ag = np.zeros(3 * n, np.int16)
    reqs = [world.iallreduce(b) for b in bufs[:3]]
    reqs.append(world.ibroadcast(bc, root=0))
    reqs.append(world.iallgather(np.full(3, world.rank, np.int16), ag))
    reqs += [world.iallreduce(b, op=nezha.MAX) for b in bufs[3:]]
    for r in reversed(reqs):  # any order of waiting works
        r.wait(timeout=60)
    assert all(r.test() for r in reqs)
    for i, b in enumerate(bufs[:3]):
        assert (b == sum(r + i for r in range(n))).all()
    for i, b in enumerate(bufs[3:], start=3):
        assert (b == n - 1 + i).all()
    np.testing.assert_array_equal(bc, np.arange(50001, dtype=np.float32))
    np.testing.assert_array_equal(ag, np.repeat(np.arange(n, dtype=np.int16), 3))


def test_buffer_kinds(world):
    import array
    b = bytearray([world.rank + 1] * 11)
    world.allreduce(b, op=nezha.MAX)
    assert b == bytearray([world.size] * 11)
    arr = array.array("d", [1.5] * 7)
    world.allreduce(memoryview(arr))
    assert list(arr) == [1.5 * world.size] * 7
    if torch is not None:
        t = torch.full((5, 3), float(world.rank), dtype=torch.float32)
        ptr = t.data_ptr()
        world.allreduce(t)
        assert t.data_ptr() == ptr  # in place, no copy
        assert bool((t == sum(range(world.size))).all())


def test_every_rank_makes_the_same_plans(world):
    plans = []
    for i in range(40):  # enough striped traffic for several cost-model syncs
        n = [10, 5000, 70001, 300007, 1 << 20][i % 5]
        a = np.ones(n, np.float32)
        world.allreduce(a)
        assert (a == world.size).all()
        # the caller's collective (not the model sync that may follow it), covered once
        assert sum(cnt for _, _, cnt in world._st.last_plan.slices) == n
        plans.append(repr(world._st.last_plan))
    assert len({tuple(p) for p in world._boot.allgather(plans)}) == 1
    st = world.stats()
    assert st["rails"] and st["collectives"] >= 40


# ---- hierarchical collectives (several ranks per host: tests/test_coll_mpi.py HIER_CONFIGS)

HIER_SIZES = [0, 1, 2, 3, 5, 7, 13, 97, 1009, 4099, 65537]
HIER_CASES = [(DType.INT32, ReduceOp.SUM), (DType.INT32, ReduceOp.BXOR),
              (DType.INT64, ReduceOp.MIN), (DType.UINT8, ReduceOp.BOR),
              (DType.FLOAT32, ReduceOp.AVG), (DType.FLOAT64, ReduceOp.PROD),
              (DType.FLOAT16, ReduceOp.MAX), (DType.BFLOAT16, ReduceOp.SUM)]


@pytest.fixture(scope="module")
def hcomms():
    """Communicators for test_hier_collectives: NEZHA_ALGO auto and hier (ByAlgo)."""
    by = ByAlgo()
    yield by
    by.close()


def _hier_expected(c, coll, nbytes, root=0):
    """Whether the call must have run hierarchically: always with NEZHA_ALGO=hier where
    hosts are even, never where they are not; with auto as the planner decides."""
    if not c.planner.hier_ok:
        return False
    if c.config["ALGO"] == "hier":
        return True
    return c.planner.algorithm(coll, nbytes, root) == ALGO_HIER


def _ran_hier(c, want):
    assert (c._st.last_plan.algo == ALGO_HIER) == want, c._st.last_plan


def hier_cases():
    """(algorithm, case, n): every (case, n) once, auto and hier alternating over both, so
    that every size and every case meets both algorithms; grouped by algorithm."""
    rows = [(algo, c, n) for algo in ("auto", "hier")
            for ci, c in enumerate(HIER_CASES) for si, n in enumerate(HIER_SIZES)
            if FULL_MATRIX or ("auto", "hier")[(ci + si) % 2] == algo]
    return rows


def _flat_sample(case, n):
    """The rows test_hier_collectives runs where hierarchical collectives cannot apply
    (one host, one rank per host, uneven hosts): every case at small sizes, the large size
    with both algorithms (rows 0 and 1), instead of all 88 (a third of an 8-rank world's
    time, spent on what test_allreduce, test_broadcast, ... check)."""
    return n in (0, 1, 97, 4099) or (n == HIER_SIZES[-1] and HIER_CASES.index(case) < 2)


@pytest.mark.parametrize("algo,case,n", hier_cases(),
                         ids=[f"{a}-{n}-{c[0].name.lower()}-{c[1].name}"
                              for a, c, n in hier_cases()])
def test_hier_collectives(hcomms, algo, case, n):
    """allreduce, broadcast (every root), allgather and reduce_scatter, exact against the
    oracle, and run hierarchically exactly when they should."""
    hcomm = hcomms(algo)
    if not (hcomm.planner.hier_ok or FULL_MATRIX or _flat_sample(case, n)):
        pytest.skip("flat layout: these run as the flat collectives the tests above cover; "
                    "a sample checks that they stay flat")
    c, (dt, op) = hcomm, case
    size, rank, es = hcomm.size, hcomm.rank, np.dtype(oracle.numpy_dtype(dt)).itemsize
    inputs = [oracle.values(dt, n, r, op) for r in range(size)]
    recv = wrap(np.full_like(inputs[0], 0x55), dt)
    c.allreduce(wrap(inputs[rank].copy(), dt), recv, op=op)
    oracle.assert_result(unwrap(recv, dt), oracle.reduce(dt, op, inputs), dt, op)
    _ran_hier(c, _hier_expected(c, "allreduce", n * es))

    for root in range(size):
        buf = inputs[root].copy() if rank == root else np.full_like(inputs[root], 0x22)
        if rank == root and dt != DType.BFLOAT16:
            buf.setflags(write=False)  # the root's buffer is only read
        c.broadcast(wrap(buf, dt), root=root)
        np.testing.assert_array_equal(buf, inputs[root])
        # lazy or not: a lazy one is hier wherever the planner says so (session 29)
        _ran_hier(c, _hier_expected(c, "broadcast", n * es, root))

    got = np.full(n * size, 0x33, dtype=inputs[0].dtype)
    c.allgather(wrap(inputs[rank].copy(), dt), wrap(got, dt))
    np.testing.assert_array_equal(got, np.concatenate(inputs))
    _ran_hier(c, _hier_expected(c, "allgather", n * size * es))

    blocks = [oracle.values(dt, n * size, r, op, seed=1) for r in range(size)]
    part = wrap(np.full(n, 0x11, dtype=inputs[0].dtype), dt)
    c.reduce_scatter(wrap(blocks[rank].copy(), dt), part, op=op)
    oracle.assert_result(unwrap(part, dt), oracle.reduce(dt, op, blocks)[rank * n:(rank + 1) * n],
                         dt, op)
    _ran_hier(c, _hier_expected(c, "reduce_scatter", n * size * es))
