"""One rank's handle on an INA service: registration, then allreduce, reduce_scatter and
allgather of whole buffers or of an element range (of each block), without the GIL."""
import math
import os
import threading

import numpy as np

from nezha._core import ina as _ina
from nezha.errors import InvalidUsageError, NezhaTimeout, RailSystemError
from nezha.types import DType, ReduceOp, dtype_from_numpy

DEFAULT_PORT = 17017
# Bytes in flight per rank while the rail's rate is unknown (before the first split
# collective measured it, without a trusted link speed): 8 slots of 8 KiB, 45 of 1432 B.
DEFAULT_WINDOW_BYTES = 64 << 10
RTT_PINGS = 5     # PINGs at registration; the least is the client's rtt_s
RTT_WAIT_S = 0.2  # for each answer at most
# The window from rate x round trip (NetReduce's credits): slots enough for WINDOW_MARGIN x
# (the pipe's bytes / one datagram + 2), the 2 being one datagram's store-and-forward each
# way (a chunk's round trip is the PING's plus its serialization up and down), and the
# margin room for the slowest rank and a slot waiting for a resend. The excess over the
# pipe is queued at the switch: at most QUEUE_BYTES of it per rank, what a switch queue
# holds (the lab's credit sweep, 400 Mbit/s tbf, 8 KiB chunks: 16 slots = 128 KiB ran
# clean, 32 overflowed tbf's queue and lost up to 2/3 of the rate; docs/results/ina/).
WINDOW_MARGIN = 1.5
QUEUE_BYTES = 128 << 10
MIN_WINDOW = 2
# Never fewer slots than DEFAULT_WINDOW_BYTES holds, whatever the pipe: a lost datagram's
# slot waits a resend timeout, and a window that only just covers the pipe then idles the
# rail. At 1 % loss (lab, 400 Mbit/s, 1 MiB) 4 slots kept 76 % of the loss-free rate, 8
# slots 81 % (issue 13's bar: 80 %; docs/results/session27/ina-window). So rate x round
# trip only ever raises the window above the old constant (fast links), never lowers it.


def default_window(chunk_bytes, rate_Bps=None, rtt_s=None, nslots=None):
    """Slots in flight per rank when NEZHA_INA_WINDOW is 0 (the same inputs give the same
    window on every rank; the ranks agree on the inputs). chunk_bytes: payload per datagram;
    rate_Bps: the rail's rate (B/s), rtt_s: a header-only round trip to the service
    (registration's PINGs). Both known: ceil(WINDOW_MARGIN x (rate x rtt / datagram + 2)),
    at most (rate x rtt + QUEUE_BYTES) / datagram, at least DEFAULT_WINDOW_BYTES of chunks;
    either unknown: DEFAULT_WINDOW_BYTES of chunks. Always at least MIN_WINDOW and at most nslots (the service's share).
    nezha/sim/ina_sched.py uses it too."""
    return window_why(chunk_bytes, rate_Bps, rtt_s, nslots)[0]


def window_why(chunk_bytes, rate_Bps=None, rtt_s=None, nslots=None):
    """(window, why): default_window and a sentence saying how it came about."""
    chunk = int(chunk_bytes)
    dgram = chunk + _ina.HEADER_BYTES + _ina.IP_UDP_BYTES
    if rate_Bps and rtt_s and rate_Bps > 0 and rtt_s > 0:
        pipe = float(rate_Bps) * float(rtt_s)
        want = math.ceil(WINDOW_MARGIN * (pipe / dgram + 2))
        queue = max(MIN_WINDOW, int((pipe + QUEUE_BYTES) // dgram))
        w = min(want, queue)
        why = (f"{WINDOW_MARGIN:g} x ({rate_Bps * 8e-9:.4g} Gb/s x {rtt_s * 1e6:.1f} us "
               f"= {pipe / 1024:.1f} KiB / {dgram} B datagrams + 2) = {want}"
               + (f", capped at the pipe + {QUEUE_BYTES >> 10} KiB of switch queue = {queue}"
                  if queue < want else ""))
        floor = DEFAULT_WINDOW_BYTES // chunk
        if w < floor:  # room for a resend (above); the queue cap is never below it
            w, why = floor, why + f", at least {DEFAULT_WINDOW_BYTES >> 10} KiB = {floor}"
    else:
        w = DEFAULT_WINDOW_BYTES // chunk
        why = (f"rate x round trip unknown: {DEFAULT_WINDOW_BYTES >> 10} KiB / {chunk} B "
               f"= {w}")
    if w < MIN_WINDOW:
        w, why = MIN_WINDOW, why + f", at least {MIN_WINDOW}"
    if nslots and w > int(nslots):
        w, why = int(nslots), why + f", at most the service's {int(nslots)} slots"
    return w, why


def reduce_support(dtype, op):
    """True if an INA service aggregates (dtype, op): SUM, MIN, MAX of int32, int64, float16,
    bfloat16, float32, float64 and AVG of the floats. False for PROD and bit ops (the
    planner routes those to other rails)."""
    return _ina.reduce_support(int(dtype), int(op))


def parse_addr(text):
    """'host:port' or 'host' (port 17017) -> (host, port); InvalidUsageError if malformed."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, str(DEFAULT_PORT)
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidUsageError(f"NEZHA_INA_ADDR: bad address {text!r} (want IPv4:port)")
    return host, int(port)


def parse_addrs(text=None):
    """NEZHA_INA_ADDR (one address per rail, comma-separated) -> [(host, port), ...]."""
    text = os.environ.get("NEZHA_INA_ADDR", "") if text is None else text
    return [parse_addr(t) for t in text.split(",") if t.strip()]


class InaClient:
    """Rank `rank` of `size` of one job on the service at addr ('host:port' or (host, port)).

    secret: the job secret (bytes); tag: up to 8 bytes naming this stream of collectives
    (two InaClients of one rank that run at once need different tags: each is its own job
    on the service, with its own slots). Registration waits up to `timeout` seconds; no
    service at the address is a RailSystemError naming it. chunk_bytes: payload per
    datagram (NEZHA_INA_CHUNK; default from the route's MTU, at most 8192), the same on every
    rank."""

    def __init__(self, addr, *, secret, rank, size, tag=b"", slots=0, timeout=10.0,
                 window=None, chunk_bytes=None):
        self.host, self.port = parse_addr(addr) if isinstance(addr, str) else addr
        if isinstance(tag, str):
            tag = tag.encode()
        if len(tag) > 8:
            raise InvalidUsageError(f"INA tag {tag!r}: at most 8 bytes")
        self.tag = tag.ljust(8, b"\0")
        self._secret = bytes(secret)
        self.rank, self.size, self.slots = int(rank), int(size), int(slots)
        self.timeout = float(timeout)
        self.window = int(window or os.environ.get("NEZHA_INA_WINDOW") or 0)
        self._window_set = self.window > 0  # given: kept; else set_window() may move it
        self.rtt_s = None
        self.chunk_bytes = int(chunk_bytes or os.environ.get("NEZHA_INA_CHUNK") or 0)
        self._lock = threading.Lock()
        self._ping_lock = threading.Lock()  # ping() vs close(): never a closed fd's number
        self._closed = False
        self._c = _ina.Client()
        self._register()

    @property
    def address(self):
        """'host:port' of the service."""
        return f"{self.host}:{self.port}"

    def _register(self):
        self._c.register(self.host, self.port, self._secret, self.tag, self.rank, self.size,
                         self.slots, self.timeout, self.chunk_bytes)
        self.chunk_bytes = self._c.chunk_bytes
        if self.rtt_s is None:  # once: a re-registration (idle job) keeps rtt and window
            # a few header-only round trips to the service, the least: the window's RTT.
            # Not the median: the ranks register while the others still start up, and on a
            # busy host most PINGs wait for a CPU (lab, 2 CPUs: medians of 57 us to 4 ms
            # from one run to the next, windows 8 to 39, and 39 lost 40 % of the rate at
            # 1 % loss; docs/results/session28/ina-loss). A queue only ever adds delay.
            got = sorted(self._c.rtt(RTT_PINGS, min(RTT_WAIT_S, self.timeout)))
            self.rtt_s = got[0] if got else None
        if not self.window:  # until the caller sets it from the rail's rate (set_window)
            self.window = default_window(self.chunk_bytes, nslots=self.nslots)

    def set_window(self, rate_Bps, rtt_s):
        """The default window from the rail's rate and a round trip (default_window), unless
        one was given. Every rank of the job must call it with the same numbers (agreed),
        between two collectives: slot s carries chunks s, s + W, ... on every rank alike.
        Returns (window, why)."""
        if self._window_set:
            return self.window, "given (NEZHA_INA_WINDOW or window=)"
        self.window, why = window_why(self.chunk_bytes, rate_Bps, rtt_s, self.nslots)
        return self.window, why

    @property
    def window_given(self):
        """True if the window was given (window= or NEZHA_INA_WINDOW > 0): it stays."""
        return self._window_set

    @property
    def nslots(self):
        """Slots the service gave this job (the largest useful window)."""
        return self._c.nslots

    def reduce_support(self, dtype, op):
        """See reduce_support()."""
        return reduce_support(dtype, op)

    def allreduce(self, buf, op=ReduceOp.SUM, dtype=None, *, start=0, stop=None, window=None,
                  timeout=None):
        """In-place allreduce of buf[start:stop] (elements; all of it by default) over the
        service. buf: a C-contiguous numpy array (dtype from it) or any writable buffer with
        dtype=. The GIL is released for the whole collective, so another thread (the engine)
        can work on the rest of the buffer. Every rank calls with the same range length, dtype,
        op and window, in the same order. Raises NezhaTimeout if nothing progresses for
        `timeout` seconds (the service or a rank is gone), RailSystemError on a socket error."""
        if dtype is None:
            if not isinstance(buf, np.ndarray):
                raise InvalidUsageError("INA allreduce: give dtype= for a non-numpy buffer")
            dtype = dtype_from_numpy(buf.dtype)
        dtype, op = DType(dtype), ReduceOp(op)
        if not reduce_support(dtype, op):
            raise InvalidUsageError(f"INA cannot reduce {dtype.name} with {op.name}")
        view = memoryview(buf).cast("B")
        es = dtype.itemsize
        n = len(view) // es
        stop = n if stop is None else int(stop)
        if not 0 <= int(start) <= stop <= n:
            raise InvalidUsageError(f"INA allreduce: range [{start}, {stop}) outside 0..{n}")
        part = view[int(start) * es:stop * es]
        with self._lock:
            # a job silent past the service's timeout is forgotten: register again first
            if self._c.job_timeout and self._c.idle > self._c.job_timeout / 2:
                self._register()
            self._c.allreduce(part, int(dtype), int(op), window or self.window,
                              self.timeout if timeout is None else float(timeout))
        return buf

    def iallreduce(self, buf, op=ReduceOp.SUM, dtype=None, **kw):
        """Start allreduce(buf, op, dtype, **kw) on a thread of its own (the C loop runs
        without the GIL) and return an InaRequest: test() / wait(timeout). The collective-
        offload shape of DESIGN.md (CollNet's iallreduce + test)."""
        return InaRequest(self.allreduce, (buf, op, dtype), kw)

    @property
    def version(self):
        """The service's protocol version: 1 takes allreduces only, 2 also reduce_scatter
        and allgather."""
        return self._c.version

    def reduce_scatter(self, sendbuf, recvbuf, op=ReduceOp.SUM, dtype=None, *, start=0,
                       stop=None, window=None, timeout=None):
        """Reduce sendbuf (size blocks of B elements) over the ranks; this rank's block of the
        result lands in recvbuf (B elements). Only elements [start, stop) of every block
        (all by default); the rest of recvbuf is left alone. Each rank sends its range of
        every block once and gets back only its own block's. Same rules as allreduce."""
        dtype, op = self._dtype(sendbuf, dtype), ReduceOp(op)
        if not reduce_support(dtype, op):
            raise InvalidUsageError(f"INA cannot reduce {dtype.name} with {op.name}")
        block = _elems(recvbuf, dtype)
        return self._blocks(sendbuf, recvbuf, dtype, op, block, start, stop, False, window,
                            timeout)

    def allgather(self, sendbuf, recvbuf, dtype=None, *, start=0, stop=None, window=None,
                  timeout=None):
        """Every rank's sendbuf (B elements) into recvbuf (size blocks of B, rank i's at
        block i), elements [start, stop) of every block only. Each rank sends its range
        once and gets every block's; nothing is reduced, so any dtype goes."""
        dtype = self._dtype(sendbuf, dtype)
        block = _elems(sendbuf, dtype)
        return self._blocks(sendbuf, recvbuf, dtype, ReduceOp.SUM, block, start, stop, True,
                            window, timeout)

    def ireduce_scatter(self, sendbuf, recvbuf, op=ReduceOp.SUM, dtype=None, **kw):
        """reduce_scatter on a thread of its own; an InaRequest."""
        return InaRequest(self.reduce_scatter, (sendbuf, recvbuf, op, dtype), kw)

    def iallgather(self, sendbuf, recvbuf, dtype=None, **kw):
        """allgather on a thread of its own; an InaRequest."""
        return InaRequest(self.allgather, (sendbuf, recvbuf, dtype), kw)

    @staticmethod
    def _dtype(buf, dtype):
        if dtype is None:
            if not isinstance(buf, np.ndarray):
                raise InvalidUsageError("INA collective: give dtype= for a non-numpy buffer")
            dtype = dtype_from_numpy(buf.dtype)
        return DType(dtype)

    def _blocks(self, sendbuf, recvbuf, dtype, op, block, start, stop, gather, window, timeout):
        stop = block if stop is None else int(stop)
        if not 0 <= int(start) <= stop <= block:
            raise InvalidUsageError(f"INA collective: range [{start}, {stop}) outside a block "
                                    f"of {block}")
        with self._lock:
            if self._c.job_timeout and self._c.idle > self._c.job_timeout / 2:
                self._register()
            self._c.blocks(sendbuf, recvbuf, int(dtype), int(op), block, int(start), stop,
                           gather, window or self.window,
                           self.timeout if timeout is None else float(timeout))
        return recvbuf

    @property
    def done_prefix(self):
        """Elements of the last collective's range (of each block's range) final when it
        returned: all of them after success; after a failure, those before the first chunk
        without a result (in every block)."""
        return self._c.done_prefix

    def set_faults(self, drop_every=0, dup_every=0, reorder_every=0, drop_result_every=0):
        """Test hook: drop / duplicate / reorder every k-th data datagram sent, drop every
        k-th result received."""
        self._c.set_faults(drop_every, dup_every, reorder_every, drop_result_every)

    def set_rto(self, min_ms=5.0, max_ms=200.0, probe_ms=1.0):
        """Bounds of the retransmission timeout; the floor of the tail probe's timeout
        (chunks without result are resent once when no result at all came for
        max(2 x srtt, probe_ms); 0 turns the probe off)."""
        self._c.set_rto(min_ms, max_ms, probe_ms)

    def stats(self):
        """Counters of this rank: datagrams, retransmissions, stale results, faults injected."""
        return self._c.stats()

    def ping(self):
        """A heartbeat to the service, from any thread (also while another is in allreduce):
        while every rank's heartbeats reach the service, a rank waiting for a result waits
        for a late one (up to set_late) instead of failing the rail after `timeout`."""
        with self._ping_lock:
            if not self._closed:
                self._c.ping()

    def set_spin(self, seconds):
        """Before sleeping in poll() for results, keep looking this long (NEZHA_SPIN_US):
        a small collective's result comes back within one round trip, and a wake-up from
        poll() costs a good part of it. 0 sleeps at once."""
        self._c.set_spin(float(seconds))

    def set_late(self, seconds):
        """How long to wait for a late rank that still reaches the service (NEZHA_TIMEOUT)."""
        self._c.set_late(float(seconds))

    def close(self):
        """Leave the job (the service frees its slots once every rank left) and close."""
        with self._ping_lock:
            self._closed = True
        with self._lock:
            self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _elems(buf, dtype):
    """Whole elements of dtype in buf."""
    n = memoryview(buf).nbytes
    if n % dtype.itemsize:
        raise InvalidUsageError(f"INA collective: {n} bytes are not whole {dtype.name} elements")
    return n // dtype.itemsize


class InaRequest:
    """One INA collective running on its own thread."""

    def __init__(self, fn, args, kw):
        self._err = None
        self._t = threading.Thread(target=self._run, args=(fn, args, kw), daemon=True,
                                   name="nezha-ina")
        self._t.start()

    def _run(self, fn, args, kw):
        try:
            fn(*args, **kw)
        except BaseException as e:  # noqa: BLE001 - handed to wait()
            self._err = e

    def test(self):
        """True once the collective finished (successfully or not; wait() tells)."""
        return not self._t.is_alive()

    def wait(self, timeout=None):
        """Block until done (the collective's own timeout bounds it); re-raise its error.
        Returns False if `timeout` passed first."""
        self._t.join(timeout)
        if self._t.is_alive():
            return False
        if self._err is not None:
            raise self._err
        return True


__all__ = ["InaClient", "InaRequest", "reduce_support", "parse_addr", "parse_addrs", "NezhaTimeout",
           "RailSystemError"]
