"""An authenticated but hostile peer for the fuzz tests (tests/test_fuzz.py).

FuzzPeer plays rank 1 of a 2-rank job: it goes through the real bootstrap and the real mesh
handshake (nezha.bootstrap.env, nezha.mesh: the job secret's HMAC challenge on every
connection), then holds the raw data and control sockets, with no engine behind them. The
case generator (make_case) decides what it sends to the real rank 0 (tests/workers/
fuzz_victim.py): by default it echoes what rank 0 sends (for the symmetric 2-rank
collectives that is a valid stream: same headers, same lengths), mutated at some point:

  hdr-field   one header field of the echoed header changed (magic, seq, coll, dtype, op,
              algo, root, count up to 2^64-1, plan hash)
  flip        random bits flipped at a random offset of the stream (header or data)
  trunc       the stream cut at a random offset, then the peer closes or falls silent
  insert      random bytes inserted (lengths beyond what is expected)
  random      no echo: random bytes of a random length
  ctrl-*      the data stream echoed, and on a control connection: garbage, a frame with a
              length beyond the limit, a truncated frame, an ABORT with a random payload, an
              unknown frame type, STATUS (vote) frames for unknown or out-of-order vote
              numbers and collective indices with random slice masks
  die-*       peer death at a phase: before the bootstrap answer, after the mesh, mid
              collective, mid vote (after a STATUS frame)

It sends heartbeats on every control connection (so rank 0 does not simply see a silent
rail) unless the case says otherwise. The wire layouts are those of include/nezha/
nezha_wire.h (nezha_hdr_t) and nezha_health.h (nz_frame_t).
"""
import os
import random
import select
import socket
import struct
import threading
import time

from nezha.bootstrap import auth
from nezha.bootstrap.env import EnvBootstrap
from nezha.mesh import Mesh
from nezha.transports.loop import loop_rails

HDR = struct.Struct("<IIBBBBiQIi")       # nezha_hdr_t
HDR_FIELDS = ("magic", "seq", "coll", "dtype", "op", "algo", "root", "count", "plan", "src")
FRAME = struct.Struct("<IHHIIQQq")       # nz_frame_t
CTRL_MAGIC = 0x43485A4E
HEARTBEAT, ABORT, STATUS = 1, 2, 3
NZ_RBUF = 8192
COLLS = ("allreduce", "allreduce", "allreduce_oop", "allgather", "reduce_scatter", "alltoall",
         "barrier", "recv")
DTYPES = ("float32", "int64", "uint8", "float64", "int32", "float16")
KINDS = ("hdr-field", "hdr-field", "flip", "flip", "trunc", "insert", "random", "echo",
         "ctrl-garbage", "ctrl-biglen", "ctrl-trunc", "ctrl-abort", "ctrl-unknown",
         "ctrl-status", "ctrl-status", "ctrl-status-first",
         "die-boot", "die-mesh", "die-mid", "die-vote", "stall")


def frame(ftype, kind=0, seq=0, length=0, mask=0, heard=0, coll=0, magic=CTRL_MAGIC):
    return FRAME.pack(magic, ftype & 0xFFFF, kind & 0xFFFF, seq & 0xFFFFFFFF,
                      length & 0xFFFFFFFF, mask & (2**64 - 1), heard & (2**64 - 1),
                      max(-2**63, min(2**63 - 1, coll)))


def make_case(rng, i, rails=None):
    """One case: what rank 0 runs and what the peer does; plain data (JSON-able)."""
    coll = rng.choice(COLLS)
    dtype = rng.choice(DTYPES)
    count = rng.choice([1, 2, 3, 7, 64, 1000, rng.randrange(1, 5000), rng.randrange(1, 300_000)])
    if coll == "recv":
        kind = rng.choice(("random", "recv-hdr", "recv-hdr", "trunc", "die-mid", "stall"))
    else:
        kind = rng.choice(KINDS)
    return dict(case=i, coll=coll, dtype=dtype, count=count, kind=kind,
                rails=rails or rng.choice((1, 2, 2)), seed=rng.randrange(2**32),
                then=rng.choice(("close", "close", "close", "silent")),
                heartbeat=rng.random() < 0.9)


class FuzzPeer:
    """Rank 1 of a 2-rank job, through the real bootstrap and handshake, then raw sockets."""

    def __init__(self, port, secret, rails, timeout=5.0):
        self.boot = EnvBootstrap(1, 2, "127.0.0.1", port, secret, local_rank=0, timeout=timeout)
        try:
            self.mesh = Mesh(self.boot, loop_rails(rails), 1, timeout, 0)
        except BaseException:
            self.boot.close()
            raise
        self.data = [self.mesh.socks[(0, c, auth.PURPOSE_DATA)] for c in range(rails)]
        self.ctrl = [self.mesh.socks[(0, r, auth.PURPOSE_CTRL)] for r in range(rails)]
        for s in self.data + self.ctrl:
            s.setblocking(True)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.beats = None

    def start_heartbeats(self, period=0.01):
        def beat():
            hb = frame(HEARTBEAT)
            while not self.stop.wait(period):
                for s in self.ctrl:
                    with self.lock:
                        try:
                            s.sendall(hb)
                        except OSError:
                            return
                self._drain_ctrl()

        self.beats = threading.Thread(target=beat, daemon=True)
        self.beats.start()

    def _drain_ctrl(self):
        """Read (and drop) what rank 0 sends on the control connections, but keep its STATUS
        frames: ctrl-status cases answer votes with wrong ones."""
        for s in self.ctrl:
            try:
                while select.select([s], [], [], 0)[0]:
                    if not s.recv(65536, socket.MSG_DONTWAIT):
                        break
            except OSError:
                pass

    def send_ctrl(self, rail, data):
        with self.lock:
            try:
                self.ctrl[rail].sendall(data)
            except OSError:
                pass

    def close(self):
        self.stop.set()
        if self.beats is not None:
            self.beats.join(2)
        self.mesh.close()
        self.boot.close()


def _recv_some(socks, wait):
    """{index: bytes} of whatever arrived on socks within wait seconds (b"" = closed)."""
    out = {}
    r, _, _ = select.select(socks, [], [], wait)
    for s in r:
        try:
            out[socks.index(s)] = s.recv(1 << 20)
        except OSError:
            out[socks.index(s)] = b""
    return out


def _mutate_hdr(rng, hdr):
    f = list(HDR.unpack(hdr))
    k = rng.randrange(9)  # never src (not compared)
    choices = [0, 1, 2**31 - 1, 2**32 - 1, rng.randrange(2**32)]
    if HDR_FIELDS[k] == "count":
        f[k] = rng.choice([0, 2**63, 2**64 - 1, f[k] + 1, rng.randrange(2**64)])
    elif HDR_FIELDS[k] in ("coll", "dtype", "op", "algo"):
        f[k] = (f[k] + rng.randrange(1, 256)) % 256
    elif HDR_FIELDS[k] == "root":
        f[k] = rng.choice([-1, 1, 2, -2**31, 2**31 - 1])
    else:
        f[k] = rng.choice(choices)
    if f[k] == HDR.unpack(hdr)[k]:
        f[k] ^= 1
    return HDR.pack(*f)


def play(peer, case, deadline):
    """Run one case's behaviour against rank 0 until done or deadline (monotonic)."""
    rng = random.Random(case["seed"])
    kind = case["kind"]
    if case["heartbeat"] and kind != "die-mesh":
        peer.start_heartbeats()
    if kind == "die-mesh":
        return
    if kind == "stall":
        time.sleep(max(0.0, deadline - time.monotonic()))
        return
    if kind == "random" or kind == "recv-hdr":
        data = b""
        if kind == "recv-hdr":  # a header built from scratch: right shape, unknown plan
            n = case["count"]
            es = {"float32": 4, "int64": 8, "uint8": 1, "float64": 8, "int32": 4,
                  "float16": 2}[case["dtype"]]
            dt = {"uint8": 0, "int32": 4, "int64": 6, "float16": 8, "float32": 10,
                  "float64": 11}.get(case["dtype"], 0)
            data = HDR.pack(0x315A484E, 0, 8, dt, 0, 0, 1, n, rng.randrange(2**32), 1)
            data += os.urandom(n * es)
        else:
            data = os.urandom(rng.choice([1, 7, 31, 32, 33, 100, 4096, rng.randrange(1, 70000)]))
        s = rng.choice(peer.data)
        try:
            s.sendall(data)
        except OSError:
            pass
        return
    # echo, mutated at one point of one data stream
    target = rng.randrange(len(peer.data))
    at = rng.choice([0, rng.randrange(32), 32, rng.randrange(33, 4096)])
    sent = [0] * len(peer.data)
    mutated = False
    ctrl_done = not kind.startswith(("ctrl", "die-vote", "vote-"))
    idle_since = time.monotonic()
    if kind == "ctrl-status-first":  # a vote before rank 0 has started anything
        _inject_ctrl(peer, rng, "ctrl-status")
        ctrl_done = True
    while time.monotonic() < deadline:
        got = _recv_some(peer.data, 0.05)
        if not got:
            if not ctrl_done:  # rank 0 is waiting (or done): now the control traffic
                _inject_ctrl(peer, rng, kind)
                ctrl_done = True
                if kind in ("die-vote", "vote-slice0"):
                    return
                continue
            if time.monotonic() - idle_since > 0.15:
                return
            continue
        idle_since = time.monotonic()
        if not ctrl_done:  # rank 0 is mid-collective, waiting for our bytes
            _inject_ctrl(peer, rng, kind)
            ctrl_done = True
            if kind in ("die-vote", "vote-slice0"):
                return
        for i, data in got.items():
            if not data:
                return  # rank 0 closed: it raised
            out = data
            if i == target and not mutated and sent[i] + len(data) > at:
                k = at - sent[i] if at >= sent[i] else 0
                mutated = True
                if kind == "hdr-field" and k + 32 <= len(data) and sent[i] == 0:
                    out = data[:k] + _mutate_hdr(rng, data[k:k + 32]) + data[k + 32:]
                elif kind == "hdr-field":
                    out = _mutate_hdr(rng, data[:32]) + data[32:] if len(data) >= 32 else data
                elif kind == "flip":
                    b = bytearray(data)
                    for _ in range(rng.randrange(1, 8)):
                        j = min(len(b) - 1, k + rng.randrange(8))
                        b[j] ^= 1 << rng.randrange(8)
                    out = bytes(b)
                elif kind in ("trunc", "die-mid"):
                    try:
                        peer.data[i].sendall(data[:k])
                    except OSError:
                        pass
                    return
                elif kind == "insert":
                    out = data[:k] + os.urandom(rng.choice([1, 8, 32, 4096, 70000])) + data[k:]
            try:
                peer.data[i].sendall(out)
            except OSError:
                return
            sent[i] += len(data)


def _inject_ctrl(peer, rng, kind):
    rail = rng.randrange(len(peer.ctrl))
    if kind == "ctrl-garbage":
        peer.send_ctrl(rail, os.urandom(rng.randrange(1, 200)))
    elif kind == "ctrl-biglen":
        peer.send_ctrl(rail, frame(rng.choice([ABORT, 9, STATUS]),
                                   length=rng.choice([NZ_RBUF, 2**31, 2**32 - 1, NZ_RBUF - 39])))
    elif kind == "ctrl-trunc":
        peer.send_ctrl(rail, frame(ABORT, kind=1, length=100)[:rng.randrange(1, 40)])
    elif kind == "ctrl-abort":
        payload = rng.choice([os.urandom(rng.randrange(0, 300)), b"\xff\xfe" * 50, b"",
                              "nezha: ünïcode ✓".encode()])
        peer.send_ctrl(rail, frame(ABORT, kind=rng.randrange(0, 70000), length=len(payload))
                       + payload)
    elif kind == "ctrl-unknown":
        payload = os.urandom(rng.randrange(0, 64))
        peer.send_ctrl(rail, frame(rng.choice([0, 4, 77, 65535]), length=len(payload)) + payload)
    elif kind == "vote-slice0":  # rank 0's first vote, in its first collective: slice 0
        for r in range(len(peer.ctrl)):
            peer.send_ctrl(r, frame(STATUS, seq=0, mask=1, coll=0))
    elif kind in ("ctrl-status", "die-vote"):
        for _ in range(rng.randrange(1, 4)):
            if rng.random() < 0.6:  # plausible: the vote and collective rank 0 is at
                seq, coll = rng.choice([0, 0, 1]), rng.choice([0, 0, 1, -1])
            else:
                seq = rng.choice([2, 3, 2**31, 2**32 - 1, rng.randrange(2**32)])
                coll = rng.choice([2, 2**40, -2**63, 2**63 - 1, rng.randrange(-5, 5)])
            mask = rng.choice([0, 1, 3, 2**63, 2**64 - 1, rng.randrange(2**64)])
            flags = rng.choice([0, 1, 2, 3, 0xFFFF])
            peer.send_ctrl(rng.randrange(len(peer.ctrl)),
                           frame(STATUS, kind=flags, seq=seq, mask=mask, heard=rng.randrange(4),
                                 coll=coll))
