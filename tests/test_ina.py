"""The INA rail: service and client over loopback (threads, one service thread), then the
lab parts (service in the switch namespace, nftables loss), which skip without root."""
import hashlib
import hmac
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from nezha._core import ina as _ina
from nezha.errors import AuthenticationError, InvalidUsageError, NezhaTimeout, RailSystemError
from nezha.rails.ina import InaClient, parse_addrs, reduce_support
from nezha.types import DType, ReduceOp

pytestmark = pytest.mark.timeout(60)

SECRET = bytes(range(32))
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def service():
    """start(**Server kwargs) -> a running in-process service on 127.0.0.1 (stopped after)."""
    running = []

    def start(**kw):
        kw.setdefault("slots", 256)
        kw.setdefault("quota", 64)
        kw.setdefault("job_timeout", 30.0)
        srv = _ina.Server("127.0.0.1", 0, **kw)
        t = threading.Thread(target=srv.serve, daemon=True)
        t.start()
        running.append((srv, t))
        return srv

    yield start
    for srv, t in running:
        srv.stop()
        t.join(5)
        srv.close()


def on_ranks(n, fn, timeout=30):
    """Run fn(rank) on n threads; re-raise the first error; never hang."""
    out, errs = [None] * n, [None] * n

    def body(r):
        try:
            out[r] = fn(r)
        except BaseException as e:  # noqa: BLE001 - reported below
            errs[r] = e

    ts = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
        assert not t.is_alive(), "a rank hung"
    for e in errs:
        if e is not None:
            raise e
    return out


def clients(srv, n, secret=SECRET, tag=b"t", **kw):
    kw.setdefault("timeout", 5.0)
    return on_ranks(n, lambda r: InaClient(("127.0.0.1", srv.port), secret=secret, rank=r, size=n,
                                           tag=tag, **kw))


# ---- oracle ---------------------------------------------------------------------------------
def f32_to_bf16(a):
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(b):
    return (np.asarray(b, np.uint16).astype(np.uint32) << 16).view(np.float32)


STORAGE = {DType.INT32: np.int32, DType.INT64: np.int64, DType.FLOAT16: np.float16,
           DType.BFLOAT16: np.uint16, DType.FLOAT32: np.float32, DType.FLOAT64: np.float64}


def make_inputs(dtype, n, count, seed):
    """Per-rank inputs whose float sums are exact in any order (small integers), and full-range
    integers (whose sums wrap around, as numpy's)."""
    rng = np.random.default_rng(seed)
    if dtype in (DType.INT32, DType.INT64):
        info = np.iinfo(STORAGE[dtype])
        return [rng.integers(info.min, info.max, count, dtype=STORAGE[dtype], endpoint=True)
                for _ in range(n)]
    vals = [rng.integers(-50, 51, count).astype(np.float32) for _ in range(n)]
    if dtype == DType.BFLOAT16:
        return [f32_to_bf16(v) for v in vals]
    return [v.astype(STORAGE[dtype]) for v in vals]


def oracle(dtype, op, inputs):
    n = len(inputs)
    if dtype == DType.BFLOAT16:
        x = np.stack([bf16_to_f32(v) for v in inputs])
    elif dtype == DType.FLOAT16:
        x = np.stack(inputs).astype(np.float32)   # the service accumulates halves in float32
    else:
        x = np.stack(inputs)
    if op == ReduceOp.SUM:
        r = np.sum(x, axis=0, dtype=x.dtype)
    elif op == ReduceOp.MIN:
        r = np.min(x, axis=0)
    elif op == ReduceOp.MAX:
        r = np.max(x, axis=0)
    else:
        r = np.sum(x, axis=0, dtype=x.dtype) / x.dtype.type(n)
    if dtype == DType.BFLOAT16:
        return f32_to_bf16(r)
    return r.astype(STORAGE[dtype])


def check_allreduce(cs, dtype, op, count, seed=0, window=None):
    n = len(cs)
    inputs = make_inputs(dtype, n, count, seed)
    bufs = [v.copy() for v in inputs]
    on_ranks(n, lambda r: cs[r].allreduce(bufs[r], op, dtype, window=window))
    want = oracle(dtype, op, inputs)
    for r in range(n):
        assert bufs[r].view(np.uint8).tobytes() == want.view(np.uint8).tobytes(), \
            f"rank {r}: {dtype.name} {op.name} count {count}: {bufs[r][:8]} != {want[:8]}"


# ---- unit pieces ----------------------------------------------------------------------------
def test_hmac_sha256_matches_hashlib():
    for key, msg in [(b"", b""), (b"k", b"abc"), (b"x" * 64, b"y" * 55), (b"z" * 100, b"w" * 1000),
                     (SECRET, bytes(range(256)) * 3)]:
        assert _ina.hmac_sha256(key, msg) == hmac.new(key, msg, hashlib.sha256).digest()


def test_job_credentials_are_hmacs_of_the_secret():
    id_, key = _ina.job_credentials(SECRET, b"abcdefgh")
    assert id_ == hmac.new(SECRET, b"nezha-ina-id", hashlib.sha256).digest()[:8] + b"abcdefgh"
    assert key == hmac.new(SECRET, b"nezha-ina-key", hashlib.sha256).digest()


def test_reduce_support():
    ok = {DType.INT32, DType.INT64, DType.FLOAT16, DType.BFLOAT16, DType.FLOAT32, DType.FLOAT64}
    for dt in DType:
        for op in ReduceOp:
            want = dt in ok and (op in (ReduceOp.SUM, ReduceOp.MIN, ReduceOp.MAX)
                                 or (op == ReduceOp.AVG and dt.is_float))
            assert reduce_support(dt, op) == want, (dt, op)


def test_parse_addrs():
    assert parse_addrs("10.11.0.254:17017, 10.12.0.254") == [("10.11.0.254", 17017), ("10.12.0.254", 17017)]
    assert parse_addrs("") == []
    with pytest.raises(InvalidUsageError):
        parse_addrs("10.0.0.1:x")


# ---- exact results --------------------------------------------------------------------------
SIZES = [0, 1, 2, 351, 352, 353, 701, 1409, 4099]   # 352 float32 per 1408 B datagram; window 3


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("dtype", [DType.FLOAT32, DType.FLOAT64, DType.INT32, DType.INT64,
                                   DType.FLOAT16, DType.BFLOAT16])
def test_exact_results(service, n, dtype):
    srv = service()
    cs = clients(srv, n, window=3, chunk_bytes=_ina.MTU_CHUNK)
    ops = [ReduceOp.SUM, ReduceOp.MIN, ReduceOp.MAX] + ([ReduceOp.AVG] if dtype.is_float else [])
    seed = 0
    for op in ops:
        for count in SIZES:
            seed += 1
            check_allreduce(cs, dtype, op, count, seed)
    st = srv.stats()
    assert st["bad_meta"] == st["bad_token"] == st["bad_source"] == st["malformed"] == 0
    for c in cs:
        c.close()


def test_large_message_many_windows(service):
    srv = service(quota=64)
    cs = clients(srv, 4)
    assert cs[0].chunk_bytes == _ina.MAX_PAYLOAD   # loopback's MTU allows the largest chunk
    for window in (1, 7, 64):
        check_allreduce(cs, DType.FLOAT32, ReduceOp.SUM, 100_003, seed=window, window=window)
    for dtype in (DType.FLOAT16, DType.BFLOAT16, DType.INT64):
        check_allreduce(cs, dtype, ReduceOp.SUM, 50_001, seed=int(dtype))


def test_chunk_sizes(service):
    srv = service()
    for chunk in (8, 72, 1432, 8192):
        cs = clients(srv, 3, tag=str(chunk).encode(), chunk_bytes=chunk)
        check_allreduce(cs, DType.FLOAT64, ReduceOp.SUM, 3001, seed=chunk)
        check_allreduce(cs, DType.FLOAT16, ReduceOp.MAX, 3001, seed=chunk)
    with pytest.raises(InvalidUsageError):
        InaClient(("127.0.0.1", srv.port), secret=SECRET, rank=0, size=1, chunk_bytes=12)


def test_unsupported_ops_refused(service):
    srv = service()
    (c,) = clients(srv, 1)
    with pytest.raises(InvalidUsageError):
        c.allreduce(np.ones(4, np.float32), ReduceOp.PROD)
    with pytest.raises(InvalidUsageError):
        c.allreduce(np.ones(4, np.int32), ReduceOp.AVG)
    with pytest.raises(InvalidUsageError):
        c.allreduce(np.ones(4, np.int32), ReduceOp.BXOR)


def test_element_range_only_touches_the_range(service):
    srv = service()
    cs = clients(srv, 3)
    inputs = [np.arange(10_000, dtype=np.float32) + r for r in range(3)]
    bufs = [v.copy() for v in inputs]
    on_ranks(3, lambda r: cs[r].allreduce(bufs[r], start=1234, stop=7777))
    want = inputs[0].copy()
    want[1234:7777] = sum(v[1234:7777] for v in inputs)
    for r in range(3):
        mine = inputs[r].copy()
        mine[1234:7777] = want[1234:7777]
        assert np.array_equal(bufs[r], mine)


def test_iallreduce_beside_other_work(service):
    """The shape the communicator will use: INA reduces one range on its thread while this
    thread reduces the rest by other means."""
    srv = service()
    cs = clients(srv, 2)
    inputs = [np.arange(20_000, dtype=np.float64) * (r + 1) for r in range(2)]
    bufs = [v.copy() for v in inputs]

    def rank(r):
        req = cs[r].iallreduce(bufs[r], start=5000)
        bufs[r][:5000] = inputs[0][:5000] + inputs[1][:5000]   # "the engine's part"
        assert req.wait(20)
        assert req.test()

    on_ranks(2, rank)
    for r in range(2):
        assert np.array_equal(bufs[r], inputs[0] + inputs[1])


def test_gil_is_released_during_the_collective(service):
    """A Python thread keeps running while every rank waits in C for a missing rank."""
    srv = service()
    cs = clients(srv, 2, timeout=1.0)
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.005)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        with pytest.raises(NezhaTimeout):
            cs[0].allreduce(np.ones(1000, np.float32), timeout=0.5)   # rank 1 never joins
    finally:
        stop.set()
        t.join()
    assert len(ticks) > 10


# ---- loss, duplicates, reordering -----------------------------------------------------------
def faulty_clients(srv):
    """4 clients losing, duplicating and reordering datagrams and losing results, each
    its own way (test_faults_never_double_count here and in test_ina_blocks.py)."""
    cs = clients(srv, 4, window=8, chunk_bytes=_ina.MTU_CHUNK)
    for c in cs:
        c.set_rto(1.0, 20.0)
    cs[0].set_faults(drop_every=7)
    cs[1].set_faults(dup_every=3)
    cs[2].set_faults(reorder_every=2, dup_every=5)
    cs[3].set_faults(drop_result_every=5, drop_every=11)
    return cs


def test_faults_never_double_count(service):
    srv = service()
    cs = faulty_clients(srv)
    for dtype, op in [(DType.FLOAT32, ReduceOp.SUM), (DType.INT64, ReduceOp.SUM),
                      (DType.FLOAT64, ReduceOp.AVG), (DType.INT32, ReduceOp.MAX)]:
        for count in (1, 353, 30_011):
            check_allreduce(cs, dtype, op, count, seed=count)
    st = srv.stats()
    assert st["dup_pending"] + st["dup_resent"] > 0   # duplicates reached the service...
    assert st["dup_resent"] > 0                        # ...and lost results were re-sent
    got = [c.stats() for c in cs]
    assert got[0]["fault_dropped"] > 0 and got[0]["retrans"] + got[0]["fast_retrans"] > 0
    assert got[1]["fault_duplicated"] > 0
    assert got[2]["fault_reordered"] > 0
    assert got[3]["fault_results_dropped"] > 0


@pytest.mark.parametrize("nchunks", [1, 40])
def test_tail_loss_resent_by_the_probe_not_the_timer(service, nchunks):
    """A datagram lost among a collective's last ones (nothing sent after it for fast
    retransmit to notice) is resent by the tail probe after a quiet spell (its floor 0.2 s
    here), not by the retransmission timer (5 s): exact, one probe at least, no timer
    resend. With the probe off the timer resends it."""
    srv = service()
    # the probe's floor far above a thread's start-up skew (a late rank also sets it off)
    for probe_ms, rto_ms in ((200.0, 5000.0), (0.0, 300.0)):
        cs = clients(srv, 2, window=8, chunk_bytes=256, tag=b"p%d" % probe_ms)
        for c in cs:
            c.set_rto(rto_ms, 2 * rto_ms, probe_ms=probe_ms)
        count = nchunks * 64  # float32, 256 B chunks
        # rank 0 loses the last datagram of its second collective: a single chunk, or the
        # 40th of 40 (sent after every other, so none after it)
        cs[0].set_faults(drop_every=nchunks * 2)
        for i in range(2):
            bufs = [np.arange(count, dtype=np.float32) % 1000 + 3 * r + i for r in range(2)]
            want = bufs[0] + bufs[1]
            on_ranks(2, lambda r: cs[r].allreduce(bufs[r], timeout=20.0))
            for r in range(2):
                assert np.array_equal(bufs[r], want), (probe_ms, i, r)
        st = cs[0].stats()
        assert st["fault_dropped"] >= 1
        if probe_ms:
            assert st["tail_probes"] >= 1 and st["retrans"] == 0, st
        else:
            assert st["tail_probes"] == 0 and st["retrans"] >= 1, st
        for c in cs:
            c.close()


def test_many_checked_collectives_under_faults(service):
    """4000 small collectives back to back, ~2 % of datagrams lost, some duplicated or reordered:
    every one exact (the slot use numbers run on across collectives)."""
    srv = service()
    cs = clients(srv, 3, window=4, chunk_bytes=256)
    for c in cs:
        c.set_rto(1.0, 10.0)
    cs[0].set_faults(drop_every=53, dup_every=31)
    cs[1].set_faults(drop_result_every=47, reorder_every=5)
    cs[2].set_faults(drop_every=61)
    rng = np.random.default_rng(7)
    counts = rng.integers(1, 300, 4000)
    wrong = [0] * 3

    def rank(r):
        for i, count in enumerate(counts):
            buf = np.arange(count, dtype=np.int64) * (r + 1) + i
            cs[r].allreduce(buf)
            want = np.arange(count, dtype=np.int64) * 6 + 3 * i
            wrong[r] += not np.array_equal(buf, want)

    on_ranks(3, rank, timeout=50)
    assert wrong == [0, 0, 0]
    assert sum(c.stats()["fault_dropped"] for c in cs) > 50


# ---- strangers ------------------------------------------------------------------------------
def _data_dgram(token, rank, slot=0, use=0, seq=1, chunk=0, values=np.full(4, 1e6, np.float32)):
    hdr = struct.pack("<IBBBBQHHIIIHH", 0x315A494E, 1, int(DType.FLOAT32), int(ReduceOp.SUM), 0,
                      token, slot, rank, use, seq, chunk, len(values), 0)
    assert len(hdr) == _ina.HEADER_BYTES
    return hdr + values.tobytes()


def test_strangers_are_ignored_and_counted(service):
    srv = service()
    cs = clients(srv, 2)
    token = cs[0]._c.token
    stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stranger.bind(("127.0.0.1", 0))
    dest = ("127.0.0.1", srv.port)
    stop = threading.Event()
    sent = {"wrong_token": 0, "stolen_token": 0, "garbage": 0}

    def spam():
        use = 0
        while not stop.is_set():
            for slot in range(4):
                stranger.sendto(_data_dgram(token ^ 0xDEAD00, 0, slot, use), dest)   # wrong token
                stranger.sendto(_data_dgram(token, 1, slot, use), dest)              # right token, wrong source
                stranger.sendto(b"\x00" * 17, dest)
                sent["wrong_token"] += 1
                sent["stolen_token"] += 1
                sent["garbage"] += 1
            use += 1
            time.sleep(0.001)

    t = threading.Thread(target=spam)
    t.start()
    try:
        for count in (5, 3000, 20_000):
            check_allreduce(cs, DType.FLOAT32, ReduceOp.SUM, count, seed=count)
    finally:
        stop.set()
        t.join()
    st = srv.stats()
    assert st["bad_token"] == sent["wrong_token"]
    assert st["bad_source"] == sent["stolen_token"]
    assert st["malformed"] == sent["garbage"]
    stranger.close()


def test_service_with_a_secret_refuses_other_jobs(service):
    srv = service(secrets=[SECRET])
    cs = clients(srv, 2)                   # the admitted job
    check_allreduce(cs, DType.FLOAT32, ReduceOp.SUM, 100)
    with pytest.raises(AuthenticationError, match="does not admit"):
        InaClient(("127.0.0.1", srv.port), secret=b"another job's secret", rank=0, size=1, timeout=2)
    assert srv.stats()["auth_fail"] >= 1


def test_wrong_secret_cannot_join_a_registered_job(service):
    """An open service learns the key from the job's first rank; a rank with the same job id but
    another key is refused (played here by forging the AUTH exchange)."""
    srv = service()
    cs = clients(srv, 2)   # kept: a job whose ranks all left is gone
    id_, _ = _ina.job_credentials(SECRET, b"t".ljust(8, b"\0"))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    dest = ("127.0.0.1", srv.port)
    hdr = struct.pack("<IBBBBQHHIIIHH", 0x315A494E, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    hello = id_ + struct.pack("<HHHH", 1, 2, 0, 0)
    s.sendto(hdr + hello, dest)
    ch = s.recv(2048)[_ina.HEADER_BYTES:]
    nonce_s = ch[16:32]
    bad_key = b"\x01" * 32
    nonce_c = os.urandom(16)
    mac = hmac.new(bad_key, b"nezha-ina-auth" + hello + nonce_s + nonce_c, hashlib.sha256).digest()
    auth = hello + nonce_s + nonce_c + mac + bad_key + b"\x01\0\0\0"
    s.sendto(hdr[:4] + bytes([18]) + hdr[5:] + auth, dest)
    reply = s.recv(2048)
    assert reply[4] == 20 and b"proof of the job secret failed" in reply
    s.close()
    check_allreduce(cs, DType.FLOAT32, ReduceOp.SUM, 100)


# ---- jobs, slots, timeouts ------------------------------------------------------------------
def test_two_jobs_at_once_stay_separate(service):
    srv = service(slots=64, quota=32)
    a = clients(srv, 3, secret=b"job A secret", tag=b"a")
    b = clients(srv, 2, secret=b"job B secret", tag=b"b")
    assert a[0].nslots == b[0].nslots == 32
    errs = []

    def job(cs, seed):
        try:
            for i in range(4):
                check_allreduce(cs, DType.FLOAT32, ReduceOp.SUM, 25_000 + i, seed=seed + i)
                check_allreduce(cs, DType.INT64, ReduceOp.MAX, 777, seed=seed + i)
        except BaseException as e:  # noqa: BLE001
            errs.append(e)

    ts = [threading.Thread(target=job, args=(a, 100)), threading.Thread(target=job, args=(b, 200))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(40)
    assert not errs, errs
    assert srv.stats()["jobs_active"] == 2 and srv.stats()["bad_meta"] == 0


def test_full_pool_makes_a_job_wait(service):
    srv = service(slots=16, quota=16)
    a = clients(srv, 1, tag=b"a")
    with pytest.raises(RailSystemError, match="slot pool"):
        InaClient(("127.0.0.1", srv.port), secret=SECRET, tag=b"b", rank=0, size=1, timeout=0.5)
    assert srv.stats()["refused_busy"] >= 1
    late = []
    t = threading.Thread(target=lambda: late.append(
        InaClient(("127.0.0.1", srv.port), secret=SECRET, tag=b"b", rank=0, size=1, timeout=5)))
    t.start()
    time.sleep(0.2)
    a[0].close()        # the last rank leaves: its slots go back to the pool
    t.join(10)
    assert late and late[0].nslots == 16
    check_allreduce(late, DType.FLOAT32, ReduceOp.SUM, 1000)


def test_silent_job_frees_its_slots(service):
    srv = service(slots=32, quota=32, job_timeout=0.3)
    cs = clients(srv, 2)
    assert srv.stats()["slots_free"] == 0
    deadline = time.monotonic() + 5
    while srv.stats()["jobs_expired"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    st = srv.stats()
    assert st["jobs_expired"] == 1 and st["slots_free"] == 32 and st["jobs_active"] == 0
    check_allreduce(cs, DType.FLOAT32, ReduceOp.SUM, 5000)   # the clients register again


def test_mismatched_ranks_never_mix(service):
    srv = service()
    cs = clients(srv, 2, timeout=0.5)
    bufs = [np.ones(100, np.float32), np.ones(200, np.float32)]
    with pytest.raises(NezhaTimeout):
        on_ranks(2, lambda r: cs[r].allreduce(bufs[r]))
    assert srv.stats()["bad_meta"] > 0


# ---- errors naming the address --------------------------------------------------------------
def _free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_no_service_is_a_clear_error():
    port = _free_udp_port()
    with pytest.raises(RailSystemError, match=f"127.0.0.1:{port}"):
        InaClient(f"127.0.0.1:{port}", secret=SECRET, rank=0, size=1, timeout=2)


def test_silent_address_times_out_naming_it():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))   # bound, never answers
    try:
        with pytest.raises(NezhaTimeout, match=f"127.0.0.1:{s.getsockname()[1]}"):
            InaClient(("127.0.0.1", s.getsockname()[1]), secret=SECRET, rank=0, size=1, timeout=0.5)
    finally:
        s.close()


def _serve(tmp_path, *extra, log=None):
    """`nezha ina serve` in its own process on a free port: (process, port). log: a file
    for its stderr (the start line, the counters)."""
    ready = tmp_path / "ready"
    env = dict(os.environ, PYTHONPATH=HERE)
    p = subprocess.Popen([sys.executable, "-m", "nezha", "ina", "serve", "--addr", "127.0.0.1",
                          "--port", "0", "--ready-file", str(ready), *extra], env=env,
                         stdout=subprocess.DEVNULL, stderr=log or subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not ready.exists():
        if p.poll() is not None or time.monotonic() >= deadline:
            p.kill()
            p.wait()
            raise AssertionError("service did not start")
        time.sleep(0.02)
    return p, int(ready.read_text().split()[1])


def test_service_killed_mid_collective_is_a_clear_error(tmp_path):
    p, port = _serve(tmp_path)
    try:
        cs = on_ranks(3, lambda r: InaClient(("127.0.0.1", port), secret=SECRET, rank=r, size=3,
                                             timeout=2.0))
        check_allreduce(cs, DType.FLOAT32, ReduceOp.SUM, 5000)
        errors = []

        def rank(r):   # rank 2 never joins, so the collective is still running when the kill comes
            try:
                cs[r].allreduce(np.ones(50_000, np.float32))
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        ts = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
        for t in ts:
            t.start()
        time.sleep(0.3)
        p.kill()
        for t in ts:
            t.join(20)
            assert not t.is_alive()
        assert len(errors) == 2
        for e in errors:
            assert isinstance(e, (RailSystemError, NezhaTimeout)) and f"127.0.0.1:{port}" in str(e)
    finally:
        p.kill()
        p.wait()


@pytest.mark.timeout(60)
def test_service_stops_on_sigterm_under_a_flood(tmp_path):
    """Regression (CI, test_fuzz_ina_service): with datagrams arriving all the time the data
    path never slept in poll(), so a SIGTERM the kernel handed to another thread was never
    looked at and the service had to be killed. It must exit promptly and cleanly."""
    p, port = _serve(tmp_path, "--stats", "0")
    stop = threading.Event()
    try:
        def flood():
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            junk = os.urandom(1000)
            while not stop.is_set():
                for _ in range(500):
                    s.sendto(junk, ("127.0.0.1", port))
            s.close()

        t = threading.Thread(target=flood, daemon=True)
        t.start()
        time.sleep(0.5)
        p.terminate()
        try:
            rc = p.wait(8)
        except subprocess.TimeoutExpired:
            rc = None
        assert rc in (0, -15), f"service still running 8 s after SIGTERM under a flood (rc {rc})"
    finally:
        stop.set()
        p.kill()
        p.wait()


_POLICY = {"batch": os.SCHED_BATCH, "other": os.SCHED_OTHER, "idle": os.SCHED_IDLE}


@pytest.mark.parametrize("extra, sched, spin", [
    ((), "batch", 0),                                      # the defaults
    (("--sched", "other", "--spin-us", "50"), "other", 50),  # a box of its own
    (("--sched", "idle",), "idle", 0),
])
def test_serve_scheduling_policy_and_spin(tmp_path, extra, sched, spin):
    """`nezha ina serve` runs as SCHED_BATCH with no spin unless told otherwise (a service
    woken under the normal policy preempted the rank that had just sent to it, and its 50 us
    spin held a CPU a queued rank needed): every thread of the running process (the --stats
    reporter too) has the policy, the start line says it and the spin, and it still serves."""
    with open(tmp_path / "log", "w") as log:
        p, port = _serve(tmp_path, "--stats", "30", *extra, log=log)
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{p.pid}/task")]
        assert len(tids) >= 2   # the main thread and the --stats reporter
        assert {os.sched_getscheduler(t) for t in tids} == {_POLICY[sched]}
        assert f"sched {sched}, spin {spin} us," in (tmp_path / "log").read_text()
        cs = on_ranks(2, lambda r: InaClient(("127.0.0.1", port), secret=SECRET, rank=r, size=2,
                                             timeout=5.0))
        check_allreduce(cs, DType.FLOAT32, ReduceOp.SUM, 3000)
        for c in cs:
            c.close()
    finally:
        p.kill()
        p.wait()


def test_serve_options_parse_and_bad_sched_is_a_usage_error(capsys):
    from nezha.rails.ina import cli
    a = cli._parser().parse_args(["serve"])
    assert (a.sched, a.spin_us) == ("batch", 0)
    a = cli._parser().parse_args(["serve", "--sched", "other", "--spin-us", "50"])
    assert (a.sched, a.spin_us) == ("other", 50)
    with pytest.raises(SystemExit) as e:
        cli.main(["serve", "--sched", "fifo"])
    assert e.value.code == 2
    assert "argument --sched: invalid choice: 'fifo'" in capsys.readouterr().err


def test_server_spin_defaults_to_none_and_reads_back_whole_microseconds():
    srv = _ina.Server("127.0.0.1", 0)
    try:
        assert srv.spin == 0
        srv.set_spin(50 * 1e-6)   # 49.99... us: stored as 50, not cut to 49
        assert round(srv.spin * 1e6, 6) == 50
    finally:
        srv.close()


# ---- lab: the service in a switch namespace, loss by nftables (root) ------------------------
@pytest.mark.timeout(120)
def test_lab_ina_service_with_loss(lab_factory):
    lab = lab_factory(hosts=3, rails=2, rates="400mbit", ina=(1,))
    assert lab.status()["rails"][1]["ina"] == "10.11.0.254:17017"
    worker = os.path.join(HERE, "tests", "workers", "ina_worker.py")
    for h in range(3):
        lab.loss(h, 1, 3.0)           # 3 % each way on every host's INA link
    res = lab.run([sys.executable, worker, "10"], env_rendezvous=True, capture=True, timeout=90)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    oks = [ln for ln in res.stdout.splitlines() if " OK " in ln]
    assert len(oks) == 3 and all(int(ln.split()[-1]) > 0 for ln in oks)   # loss made them resend
    lab.reset()
    assert all(ln["loss_pct"] == 0 for ln in lab.status()["links"])


@pytest.mark.timeout(120)
def test_lab_blackholed_ina_rail_is_an_error(lab_factory):
    lab = lab_factory(hosts=2, rails=1, rates="400mbit", ina=(0,))
    lab.fail(1, 0, "blackhole")
    code = ("import os, numpy as np; from nezha.rails.ina import InaClient as C; from nezha.errors import NezhaTimeout\n"
            "try:\n C(os.environ['NEZHA_INA_ADDR'], secret=b'x', rank=int(os.environ['RANK']), size=2, timeout=1.0)\n"
            "except NezhaTimeout as e:\n print('TIMEOUT', e)\nelse:\n print('REGISTERED')\n")
    res = lab.run([sys.executable, "-c", code], env_rendezvous=True, capture=True, timeout=60)
    assert "[1] TIMEOUT no answer from an INA service at 10.10.0.254:17017" in res.stdout, res.stdout
    assert "[0] REGISTERED" in res.stdout


def silent_rank_prefixes(cs, call, limit):
    """Clients cs (2) run call(r) — one collective — while rank 1 goes silent a little
    after the start (every datagram of it dropped): both must time out; returns the
    done_prefix each reports, each a whole number of chunks below limit."""
    started = threading.Event()

    def body(r):
        started.set()
        with pytest.raises(NezhaTimeout):
            call(r)
        return cs[r].done_prefix

    def silence():
        started.wait(5)
        time.sleep(0.01)
        cs[1].set_faults(drop_every=1)

    t = threading.Thread(target=silence, daemon=True)
    t.start()
    done = on_ranks(2, body)
    t.join(5)
    ce = cs[0].chunk_bytes // 4
    assert all(0 <= d < limit and d % ce == 0 for d in done), done
    return done


def silent_clients(srv):
    """2 clients that time out after 0.3 s and do not wait for a late rank."""
    cs = clients(srv, 2, timeout=0.3)
    for c in cs:
        c.set_late(0)  # rank 1 still reaches the service (PINGs): do not wait for it
    return cs


def test_failed_collective_reports_the_final_prefix(service):
    """A rank that goes silent mid-collective (every datagram of it dropped from some point
    on): both ranks time out, and every element before the done_prefix each reports is
    the exact sum already (the offload re-runs only the rest on TCP)."""
    cs = silent_clients(service())
    n = 4 << 20
    bufs = [np.full(n, r + 1, np.int32) for r in range(2)]
    done = silent_rank_prefixes(cs, lambda r: cs[r].allreduce(bufs[r], ReduceOp.SUM), n)
    for r in range(2):
        assert np.all(bufs[r][:done[r]] == 3), f"rank {r}: a non-final element before its prefix"
    for c in cs:
        c.close()


def test_late_rank_still_heard_is_waited_for(service):
    """A rank that enters the collective long after the timeout but keeps pinging the
    service (as the communicator's heartbeat thread does) is late, not lost: the other
    waits for it, and the result is exact."""
    srv = service()
    cs = clients(srv, 2, timeout=0.15)
    bufs = [np.full(10000, r + 1, np.int64) for r in range(2)]
    stop = threading.Event()

    def pinger():
        while not stop.is_set():
            cs[1].ping()
            time.sleep(0.01)

    def body(r):
        if r == 1:
            time.sleep(0.6)  # four timeouts late
        return cs[r].allreduce(bufs[r], ReduceOp.SUM)

    t = threading.Thread(target=pinger, daemon=True)
    t.start()
    try:
        on_ranks(2, body)
    finally:
        stop.set()
        t.join(5)
    for b in bufs:
        assert np.all(b == 3)
    for c in cs:
        c.close()


def test_lost_rank_fails_the_others_naming_it(service):
    """A rank the service no longer hears (no data, no heartbeat): the others give up after
    the timeout, naming it."""
    srv = service()
    cs = clients(srv, 2, timeout=0.15)
    with pytest.raises(NezhaTimeout, match="rank 1 of the job not heard"):
        cs[0].allreduce(np.ones(1000, np.float32))
    for c in cs:
        c.close()
