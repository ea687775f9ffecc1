"""reduce_scatter and allgather offloaded to an INA service (protocol version 2), over
loopback: exact against numpy over dtypes, ops, sizes and rank counts; element ranges of
each block; lost, duplicated and reordered datagrams never double count; a rank that goes
silent leaves a final prefix of every block."""
import numpy as np
import pytest

from nezha._core import ina as _ina
from nezha.errors import InvalidUsageError
from nezha.rails.ina import InaClient
from nezha.types import DType, ReduceOp
from tests.test_ina import (SECRET, STORAGE, clients, faulty_clients, make_inputs,  # noqa: F401
                            on_ranks, oracle, service, silent_clients, silent_rank_prefixes)

pytestmark = pytest.mark.timeout(90)

DTYPES = [DType.FLOAT32, DType.FLOAT64, DType.INT32, DType.INT64, DType.FLOAT16, DType.BFLOAT16]
# elements per block: 0, 1, primes, around one 1408-byte datagram of float32 (352) and two
BLOCKS = [0, 1, 2, 7, 351, 352, 353, 701, 1409]


def check_reduce_scatter(cs, dtype, op, block, seed=0, window=None, start=0, stop=None):
    """Every rank's whole send buffer in, its own block of the reduction out: exact."""
    n = len(cs)
    inputs = make_inputs(dtype, n, n * block, seed)
    fill = np.zeros(block, STORAGE[dtype]) + STORAGE[dtype](7)   # outside the range: untouched
    outs = [fill.copy() for _ in range(n)]
    on_ranks(n, lambda r: cs[r].reduce_scatter(inputs[r], outs[r], op, dtype, window=window,
                                               start=start, stop=stop))
    want = oracle(dtype, op, inputs) if block else np.empty(0, STORAGE[dtype])
    hi = block if stop is None else stop
    for r in range(n):
        mine = fill.copy()
        mine[start:hi] = want[r * block + start:r * block + hi]
        assert outs[r].tobytes() == mine.tobytes(), \
            f"rank {r}: {dtype.name} {op.name} block {block}: {outs[r][:8]} != {mine[:8]}"


def check_allgather(cs, dtype, block, seed=0, window=None, start=0, stop=None):
    """Every rank's block in, the concatenation out on every rank: exact."""
    n = len(cs)
    inputs = make_inputs(dtype, n, block, seed)
    outs = [np.full(n * block, 7, STORAGE[dtype]) for _ in range(n)]
    on_ranks(n, lambda r: cs[r].allgather(inputs[r], outs[r], dtype, window=window,
                                          start=start, stop=stop))
    hi = block if stop is None else stop
    want = np.full(n * block, 7, STORAGE[dtype])
    for q in range(n):
        want[q * block + start:q * block + hi] = inputs[q][start:hi]
    for r in range(n):
        assert outs[r].tobytes() == want.tobytes(), \
            f"rank {r}: {dtype.name} block {block}: {outs[r][:8]} != {want[:8]}"


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_scatter_and_allgather_exact(service, n, dtype):
    srv = service()
    cs = clients(srv, n, window=3, chunk_bytes=_ina.MTU_CHUNK)
    assert cs[0].version == _ina.VERSION == 2
    ops = [ReduceOp.SUM, ReduceOp.MIN, ReduceOp.MAX] + ([ReduceOp.AVG] if dtype.is_float else [])
    seed = 0
    for block in BLOCKS:
        for op in ops:
            seed += 1
            check_reduce_scatter(cs, dtype, op, block, seed)
        check_allgather(cs, dtype, block, seed)
    # the three kinds interleaved on the same slots (use numbers run on across kinds)
    a = make_inputs(dtype, n, 999, 5)
    on_ranks(n, lambda r: cs[r].allreduce(a[r], ReduceOp.MAX, dtype))
    check_reduce_scatter(cs, dtype, ReduceOp.MAX, 333, seed=6)
    st = srv.stats()
    assert st["bad_meta"] == st["bad_token"] == st["bad_source"] == st["malformed"] == 0
    for c in cs:
        c.close()


def test_reduce_scatter_gets_only_its_own_block(service):
    """The service sends rank r only r's block's values, the others a header each: a
    reduce_scatter of S bytes per rank brings back S / n bytes of values, not S; an
    allgather brings back all n blocks."""
    srv = service()
    n, block = 4, 100_003
    cs = clients(srv, n, window=8)
    check_reduce_scatter(cs, DType.FLOAT32, ReduceOp.SUM, block, seed=3)
    assert [c.stats()["result_bytes"] for c in cs] == [block * 4] * n
    check_allgather(cs, DType.FLOAT32, block, seed=4)
    assert [c.stats()["result_bytes"] for c in cs] == [block * 4 * (n + 1)] * n
    ce = cs[0].chunk_bytes // 4
    assert srv.stats()["results"] == 2 * n * -(-block // ce)   # one completion per chunk


def test_large_blocks_many_windows(service):
    srv = service(quota=64)
    cs = clients(srv, 3)
    for window in (1, 5, 64):
        check_reduce_scatter(cs, DType.FLOAT32, ReduceOp.SUM, 50_021, seed=window, window=window)
        check_allgather(cs, DType.INT64, 30_011, seed=window, window=window)
    check_reduce_scatter(cs, DType.BFLOAT16, ReduceOp.AVG, 40_009, seed=9)
    check_allgather(cs, DType.FLOAT16, 40_009, seed=9)


def test_element_range_of_every_block(service):
    """[start, stop) of every block only: what the communicator gives INA beside the TCP
    rails (those do [0, start) of every block)."""
    srv = service()
    cs = clients(srv, 3, chunk_bytes=_ina.MTU_CHUNK, window=4)
    for start, stop in [(0, 0), (5, 5), (0, 1), (1000, 3001), (2999, 3001), (17, 2503)]:
        check_reduce_scatter(cs, DType.INT32, ReduceOp.SUM, 3001, seed=start, start=start,
                             stop=stop)
        check_allgather(cs, DType.FLOAT64, 3001, seed=stop, start=start, stop=stop)


def test_allgather_takes_any_dtype(service):
    """Nothing is reduced: uint8, int16 and uint64 go too (reduce_support is not asked)."""
    srv = service()
    cs = clients(srv, 3, chunk_bytes=_ina.MTU_CHUNK)
    for dt in (np.uint8, np.int16, np.uint64):
        ins = [np.arange(2003, dtype=dt) * (r + 3) for r in range(3)]
        outs = [np.zeros(3 * 2003, dt) for _ in range(3)]
        on_ranks(3, lambda r: cs[r].allgather(ins[r], outs[r]))
        for r in range(3):
            assert np.array_equal(outs[r], np.concatenate(ins)), dt


def test_unsupported_reductions_refused(service):
    srv = service()
    cs = clients(srv, 2)
    for dt, op in [(np.float32, ReduceOp.PROD), (np.int32, ReduceOp.AVG),
                   (np.int64, ReduceOp.BXOR), (np.uint8, ReduceOp.SUM)]:
        with pytest.raises(InvalidUsageError):
            cs[0].reduce_scatter(np.ones(8, dt), np.ones(4, dt), op)
    with pytest.raises(InvalidUsageError):   # recvbuf is one block: 8 / 2 = 4, not 3
        cs[0].reduce_scatter(np.ones(8, np.float32), np.ones(3, np.float32))
    with pytest.raises(InvalidUsageError):
        cs[0].allgather(np.ones(4, np.float32), np.ones(7, np.float32))
    with pytest.raises(InvalidUsageError):
        cs[0].allgather(np.ones(4, np.float32), np.ones(8, np.float32), start=3, stop=5)


def test_faults_never_double_count(service):
    """Lost, duplicated and reordered datagrams and lost results: every reduce_scatter and
    allgather exact; duplicates reached the service and lost results were sent again."""
    srv = service()
    cs = faulty_clients(srv)
    for dtype, op in [(DType.FLOAT32, ReduceOp.SUM), (DType.INT64, ReduceOp.SUM),
                      (DType.FLOAT64, ReduceOp.AVG), (DType.INT32, ReduceOp.MAX)]:
        for block in (1, 353, 10_007):
            check_reduce_scatter(cs, dtype, op, block, seed=block)
            check_allgather(cs, dtype, block, seed=block + 1)
    st = srv.stats()
    assert st["dup_pending"] + st["dup_resent"] > 0 and st["dup_resent"] > 0
    assert st["bad_meta"] == st["malformed"] == 0
    got = [c.stats() for c in cs]
    assert got[0]["fault_dropped"] > 0 and got[0]["retrans"] + got[0]["fast_retrans"] > 0
    assert got[1]["fault_duplicated"] > 0 and got[2]["fault_reordered"] > 0
    assert got[3]["fault_results_dropped"] > 0


def test_many_small_collectives_under_faults(service):
    """1500 small reduce_scatters and allgathers back to back with ~2 % loss: all exact."""
    srv = service()
    n = 3
    cs = clients(srv, n, window=4, chunk_bytes=256)
    for c in cs:
        c.set_rto(1.0, 10.0)
    cs[0].set_faults(drop_every=53, dup_every=31)
    cs[1].set_faults(drop_result_every=47, reorder_every=5)
    cs[2].set_faults(drop_every=61)
    blocks = np.random.default_rng(11).integers(1, 200, 1500)
    wrong = [0] * n

    def rank(r):
        for i, b in enumerate(blocks):
            send = np.arange(n * b, dtype=np.int64) * (r + 1) + i
            out = np.empty(b, np.int64)
            cs[r].reduce_scatter(send, out)
            want = (np.arange(n * b, dtype=np.int64) * 6 + 3 * i)[r * b:(r + 1) * b]
            wrong[r] += not np.array_equal(out, want)
            mine = np.arange(b, dtype=np.int64) + 1000 * r + i
            got = np.empty(n * b, np.int64)
            cs[r].allgather(mine, got)
            wrong[r] += not np.array_equal(got, np.concatenate(
                [np.arange(b, dtype=np.int64) + 1000 * q + i for q in range(n)]))

    on_ranks(n, rank, timeout=80)
    assert wrong == [0] * n
    assert sum(c.stats()["fault_dropped"] for c in cs) > 20


def test_silent_rank_leaves_a_final_prefix_of_every_block(service):
    """A rank goes silent mid-reduce_scatter: every rank times out, and each block's
    elements before the done_prefix a rank reports are final (the communicator re-runs
    only the rest of every block on TCP)."""
    cs = silent_clients(service())
    block = 2 << 20
    sends = [np.full(2 * block, r + 1, np.int32) for r in range(2)]
    outs = [np.zeros(block, np.int32) for _ in range(2)]
    done = silent_rank_prefixes(cs, lambda r: cs[r].reduce_scatter(sends[r], outs[r]),
                                block)
    for r in range(2):
        assert np.all(outs[r][:done[r]] == 3), f"rank {r}: a non-final element before its prefix"
    for c in cs:
        c.close()


def test_version_one_service_gets_allreduces_only(service):
    """A client of a service that says version 1 (or nothing) refuses reduce_scatter and
    allgather with a clear error rather than sending datagrams that service would sum."""
    srv = service()
    c = InaClient(("127.0.0.1", srv.port), secret=SECRET, rank=0, size=1, timeout=5)
    c._c._set_version(1)
    with pytest.raises(InvalidUsageError, match="protocol version 1"):
        c.reduce_scatter(np.ones(4, np.float32), np.ones(4, np.float32))
    buf = np.ones(4, np.float32)
    c.allreduce(buf)
    assert np.array_equal(buf, np.ones(4, np.float32))
    c.close()
