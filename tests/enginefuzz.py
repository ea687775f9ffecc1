"""Engine-level fuzzing: many cases a second, all in one process.

Two ranks' engines (nezha/_core/engine.pyx, the real C engine and wire format) run one
collective over socket pairs; every byte from rank 1 to rank 0 passes a man in the middle
that mutates the stream (bit flips and byte changes in the header or the payload, bytes
inserted or dropped, the stream cut short and closed, or stalled). Rank 0 runs with a short
deadline; its result buffer sits between guard bytes. A case passes when rank 0's run ends
in OK or an engine error code within the deadline plus a slack, with the guards intact, and
an unmutated case gives the exact sum. tests/test_fuzz.py plays a whole hostile rank (mesh,
votes, control frames) at a few cases a second; this one reaches 100 000 cases in minutes.

    python -m tests.enginefuzz --cases 100000 [--seed 1] [--json out.json]

Exit code 0 when every case passed; the JSON summary counts outcomes by mutation.
"""
import argparse
import collections
import json
import random
import socket
import sys
import threading
import time

import numpy as np

from nezha._core import engine as _eng
from nezha.types import DType, ReduceOp

HDR = 32            # sizeof(nezha_hdr_t), include/nezha/nezha_wire.h
GUARD = 64          # guard bytes each side of rank 0's result
DEADLINE_S = 0.03   # rank 0's run deadline in a case
SLACK_S = 1.0       # a run that returns later than deadline + this is a hang
CODES = {getattr(_eng, k): k for k in dir(_eng) if k.startswith("ERR_")}
MUTATIONS = ("none", "flip-hdr", "flip-payload", "byte-hdr", "insert", "drop", "cut",
             "stall", "garbage", "dup")
# (name, collective id, builder(schedule, out, a, count, rank))
COLLS = (
    ("rd_allreduce", _eng.COLL_ALLREDUCE, lambda s, o, a, n, r: _eng.rd_allreduce(s, 0, o, a, n)),
    ("ring_allreduce", _eng.COLL_ALLREDUCE,
     lambda s, o, a, n, r: _eng.ring_allreduce(s, 0, o, a, n)),
    ("tree_broadcast", _eng.COLL_BROADCAST,
     lambda s, o, a, n, r: _eng.tree_broadcast(s, 0, 1, o, n, True)),
)

# the harness self-test (tests/test_enginefuzz.py, --overflow): both ranks built for 4
# elements past the count, so rank 0's result is written past its end into the guards
OVERFLOW = (("overflow", _eng.COLL_ALLREDUCE,
             lambda s, o, a, n, r: _eng.rd_allreduce(s, 0, o, a, n + 4)),)


def _mutate(rng, data, kind):
    """The stream rank 0 gets instead of data (bytes), and whether to close after it."""
    b = bytearray(data)
    if kind == "none" or not b:
        return bytes(b), False
    if kind == "flip-hdr":
        i = rng.randrange(min(HDR, len(b)))
        b[i] ^= 1 << rng.randrange(8)
    elif kind == "flip-payload":
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    elif kind == "byte-hdr":
        i = rng.randrange(min(HDR, len(b)))
        b[i] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
    elif kind == "insert":
        i = rng.randrange(len(b) + 1)
        b[i:i] = rng.randbytes(rng.randint(1, 64))
    elif kind == "drop":
        i = rng.randrange(len(b))
        del b[i:i + rng.randint(1, 64)]
    elif kind == "cut":
        return bytes(b[:rng.randrange(len(b))]), True
    elif kind == "stall":
        return bytes(b[:rng.randrange(len(b))]), False
    elif kind == "garbage":
        return rng.randbytes(rng.randint(1, 2 * len(b) + 64)), rng.random() < 0.5
    elif kind == "dup":
        i = rng.randrange(len(b))
        j = min(len(b), i + rng.randint(1, 64))
        b[j:j] = b[i:j]
    return bytes(b), False


def _relay(src, dst, rng, kind, box):
    """Read rank 1's whole stream for this case, mutate it, deliver it to rank 0."""
    try:
        src.settimeout(0.5)
    except OSError:
        return
    data = b""
    want = box["want"]
    try:
        while len(data) < want:
            chunk = src.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    out, close = _mutate(rng, data, kind)
    try:
        dst.sendall(out)
        if close:
            dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def one_case(rng, i, colls=COLLS):
    """Run case i; returns (mutation, outcome) where outcome is an engine code name, or a
    failure: 'guard', 'hang', 'wrong'."""
    name, coll, build = colls[rng.randrange(len(colls))]
    kind = MUTATIONS[rng.randrange(len(MUTATIONS))]
    dt = rng.choice((DType.INT32, DType.FLOAT32, DType.INT64, DType.FLOAT64))
    npdt = {DType.INT32: np.int32, DType.FLOAT32: np.float32, DType.INT64: np.int64,
            DType.FLOAT64: np.float64}[dt]
    count = rng.choice((1, 2, 3, 7, 64, 257, 1000, 4099) if name == "overflow" else
                       (0, 1, 2, 3, 7, 64, 257, 1000, 4099))
    es = np.dtype(npdt).itemsize
    # rank 0's buffers: the result between guards; rank 1 plain
    a0 = np.arange(1, count + 17, dtype=npdt)[:count]  # spare room: "overflow" reads past
    a1 = np.full(count + 16, 3, dtype=npdt)[:count]
    store = np.full(count * es + 2 * GUARD, 0xA5, np.uint8)
    out0 = store[GUARD:GUARD + count * es].view(npdt)
    out1 = np.zeros(count + 16, npdt)[:count]
    if name == "tree_broadcast":  # root 1 sends its buffer; rank 0 receives into out0
        a1 = np.full(count, 9, dtype=npdt)
        out1[:] = a1
    p0, m0 = socket.socketpair()   # rank 0 <-> middle
    p1, m1 = socket.socketpair()   # rank 1 <-> middle
    socks = (p0, m0, p1, m1)
    for s in (p0, p1):
        s.setblocking(False)
    e0 = e1 = s0 = s1 = None
    threads = []
    try:
        e0 = _eng.Engine([None, _eng.TcpEndpoint(p0)], 2, 1, [], 1 << 16)
        e1 = _eng.Engine([_eng.TcpEndpoint(p1), None], 2, 1, [], 1 << 16)
        s0 = _eng.Schedule(0, 2, 1, coll, i, int(dt), int(ReduceOp.SUM), count, 1, 0, 7)
        s1 = _eng.Schedule(1, 2, 1, coll, i, int(dt), int(ReduceOp.SUM), count, 1, 0, 7)
        if name == "tree_broadcast":
            build(s0, out0.ctypes.data, out0.ctypes.data, count, 0)
            build(s1, out1.ctypes.data, out1.ctypes.data, count, 1)
        else:
            build(s0, out0.ctypes.data, a0.ctypes.data, count, 0)
            build(s1, out1.ctypes.data, a1.ctypes.data, count, 1)
        # rank 1 runs for real in a thread (its own errors do not matter); the middle
        # collects its stream (header + payload: at most HDR + count * es bytes here)
        box = {"want": HDR + count * es}
        stop = threading.Event()

        def rank1():
            try:
                if e1.start(s1) == _eng.ERR_OK:
                    e1.progress(s1, _eng.now_ns() + int(0.3e9))
            except Exception:  # noqa: BLE001 - rank 1 may fail; only rank 0 is judged
                pass
        t1 = threading.Thread(target=rank1, daemon=True)
        tr = threading.Thread(target=_relay, args=(m1, m0, rng, kind, box), daemon=True)
        # rank 0's bytes to rank 1 go through the middle unchanged
        tf = threading.Thread(target=_forward, args=(m0, m1, stop), daemon=True)
        threads = [t1, tr, tf]
        for t in threads:
            t.start()
        # an unmutated stream must finish: a loaded machine gets time for it
        limit = 2.0 if kind == "none" else DEADLINE_S
        t0 = time.monotonic()
        rc = e0.start(s0)
        if rc == _eng.ERR_OK:
            rc = e0.progress(s0, _eng.now_ns() + int(limit * 1e9))
        took = time.monotonic() - t0
        stop.set()
        outcome = CODES.get(rc, f"rc{rc}")
        if took > limit + SLACK_S:
            outcome = "hang"
        elif bytes(store[:GUARD]) != b"\xa5" * GUARD or bytes(store[-GUARD:]) != b"\xa5" * GUARD:
            outcome = "guard"
        elif rc == _eng.ERR_OK and kind == "none":
            want = a1 if name == "tree_broadcast" else a0 + a1
            if not np.array_equal(out0, want):
                outcome = "wrong"
        # no early return: rank 1's thread may still write out1 (and read a1); freeing them
        # under it corrupted the heap (CI: a 'guard' case returned before joining it)
        ended = _end(socks, threads, (a0, a1, store, out1, e0, e1, s0, s1))
        threads = []  # waited for (or kept): nothing left for the finally
        return kind, outcome if ended else "hang"
    finally:  # an exception on the way: the same wait
        _end(socks, threads, (a0, a1, store, out1, e0, e1, s0, s1))
        for e in (e0, e1):
            if e is not None:
                e.close()


STRANDED = []  # buffers of cases whose threads did not end: never freed under them


def _end(socks, threads, keep):
    """Close the case's sockets (threads blocked on them return), then wait for its threads;
    if one is still running, keep its buffers and engines alive for good. True if all ended."""
    for s in socks:
        try:
            s.close()
        except OSError:
            pass
    for t in threads:
        t.join(3.0)
    if any(t.is_alive() for t in threads):
        STRANDED.append(keep)
        return False
    return True


def _forward(src, dst, stop):
    """Rank 0 -> rank 1, unchanged (rank 1 must get its input to send its part)."""
    try:
        src.settimeout(0.05)
    except OSError:  # the case ended (and closed it) before this thread ran
        return
    while not stop.is_set():
        try:
            chunk = src.recv(1 << 16)
        except socket.timeout:
            continue
        except OSError:
            return
        if not chunk:
            return
        try:
            dst.sendall(chunk)
        except OSError:
            return


FAILURES = ("hang", "guard", "wrong")


def run(cases, seed, seconds=None, colls=COLLS):
    """{mutation: {outcome: n}}, failures [(case, mutation, outcome)], cases run."""
    rng = random.Random(seed)
    counts = collections.defaultdict(collections.Counter)
    failures = []
    end = time.monotonic() + seconds if seconds else None
    i = 0
    while i < cases and (end is None or time.monotonic() < end):
        kind, outcome = one_case(rng, i, colls)
        counts[kind][outcome] += 1
        if outcome in FAILURES:
            failures.append((i, kind, outcome))
        i += 1
    return {k: dict(v) for k, v in sorted(counts.items())}, failures, i


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=None, help="stop after this long")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None)
    ap.add_argument("--overflow", action="store_true",
                    help="the harness self-test: every case writes past the result")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    counts, failures, n = run(a.cases, a.seed, a.seconds, OVERFLOW if a.overflow else COLLS)
    doc = {"cases": n, "seed": a.seed, "seconds": round(time.monotonic() - t0, 1),
           "engine": _eng.__file__, "outcomes": counts, "failures": failures[:50],
           "failed": len(failures)}
    print(json.dumps(doc))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
