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

With --ranks N (N > 2) the peer is rank N-1 of an N-rank job and ranks 0..N-2 are real
(one victim process each): it "echoes" to every real rank what that rank sent it (valid
headers, but not what a ring or a tree expects of a third rank, so most cases end in a
timeout or a PeerError), mutated as above, and sends its control traffic to a random one;
die-boot (which plays rank 1 in the rendezvous) becomes die-mesh. Every real rank must end
as rank 0 must.

It sends heartbeats on every control connection (so rank 0 does not simply see a silent
rail) unless the case says otherwise. The wire layouts are those of include/nezha/
nezha_wire.h (nezha_hdr_t) and nezha_health.h (nz_frame_t).

run_case() runs one case against a Victim (the real rank's process) and checks it; the
suite (tests/test_fuzz.py) and the command line below share it. The long run:

    nice -n 19 python tests/fuzzpeer.py --cases 100000 --seed 18 --jobs 4 \
        --report docs/results/fuzz/run.json

prints and keeps (as it goes) the counts per mutation kind and outcome class, and every
failure (a hang, a crash, an exception that is not a nezha error, guard bytes touched, no
end within the bound) with rank 0's stacks; `--only I` re-runs case I of a seed alone.
"""
import argparse
import collections
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

if __name__ == "__main__":  # python tests/fuzzpeer.py: the tree's nezha
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from nezha.bootstrap import auth
from nezha.bootstrap.env import EnvBootstrap
from nezha.mesh import Mesh
from nezha.rails.tcp.connect import establish
from nezha.transports.loop import loop_rails

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VICTIM = os.path.join(ROOT, "tests", "workers", "fuzz_victim.py")
SECRET = bytes.fromhex("5e" * 32)
TIMEOUT = 0.5          # the real rank's NEZHA_TIMEOUT in a case
CONNECT = 3.0          # its NEZHA_CONNECT_TIMEOUT

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
    """The last rank of a job of `ranks` (rank 1 of 2 by default), through the real
    bootstrap and handshake, then raw sockets: data and ctrl list them peer by peer."""

    def __init__(self, port, secret, rails, timeout=5.0, ranks=2):
        me = ranks - 1
        self.boot = EnvBootstrap(me, ranks, "127.0.0.1", port, secret,
                                 local_rank=me if ranks > 2 else 0, timeout=timeout)
        try:
            self.mesh = Mesh(self.boot, loop_rails(rails), 1, timeout, 0)
        except BaseException:
            self.boot.close()
            raise
        self.data = [self.mesh.socks[(p, c, auth.PURPOSE_DATA)]
                     for p in range(me) for c in range(rails)]
        self.ctrl = [self.mesh.socks[(p, r, auth.PURPOSE_CTRL)]
                     for p in range(me) for r in range(rails)]
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


def play(peer, case, deadline, done=None):
    """Run one case's behaviour against rank 0 until done or deadline (monotonic). done: a
    callable, true once rank 0 has returned from its collective (fuzz_victim.py's DONE
    line): the peer stops then instead of after 0.15 s of quiet, or for `stall` at the
    deadline."""
    rng = random.Random(case["seed"])
    kind = case["kind"]
    if case["heartbeat"] and kind != "die-mesh":
        peer.start_heartbeats()
    if kind == "die-mesh":
        return
    if kind == "stall":
        while time.monotonic() < deadline and not (done is not None and done(0.01)):
            if done is None:
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
        got = _recv_some(peer.data, 0.05 if not ctrl_done or done is None else 0.01)
        if not got:
            if not ctrl_done:  # rank 0 is waiting (or done): now the control traffic
                _inject_ctrl(peer, rng, kind)
                ctrl_done = True
                if kind in ("die-vote", "vote-slice0"):
                    return
                continue
            if time.monotonic() - idle_since > 0.15 or (done is not None and done(0)):
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


# ---- the real rank, one case, the command line ----------------------------------------

def asan_env(d):
    """Environment that runs the real rank on the sanitizer build in d (`make asan`)."""
    if not d:
        return {}
    d = os.path.join(ROOT, d) if not os.path.isabs(d) else d
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                             text=True).stdout.strip()
    libubsan = subprocess.run(["gcc", "-print-file-name=libubsan.so"], capture_output=True,
                              text=True).stdout.strip()
    return {"PYTHONPATH": d + os.pathsep + ROOT, "LD_PRELOAD": f"{libasan} {libubsan}",
            # Python's own allocations are not ours to report; errors end the process
            "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=86",
            "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=87",
            "TEST_FUZZ_ASAN_BUILD": d}


class Victim:
    """The real rank (tests/workers/fuzz_victim.py), kept running across cases. Its lines:
    LISTEN (the rendezvous listens, on this port), DONE (the collective returned or
    raised), CASE (the outcome, after closing the communicator)."""

    def __init__(self, log_path, secret=SECRET, asan=None):
        env = dict(os.environ, PYTHONPATH=ROOT, NEZHA_JOB_SECRET=secret.hex())
        for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NEZHA_FAULTS",
                  "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"):
            env.pop(k, None)
        self.asan = asan_env(asan)
        env.update(self.asan)
        self.log = str(log_path)
        self.errf = open(self.log, "a")  # a restarted rank keeps what the last one said
        self.p = subprocess.Popen([sys.executable, "-X", "faulthandler", VICTIM], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.errf)
        self.fd = self.p.stdout.fileno()
        self.buf = b""
        self.dead = False
        self.case = None
        self.port = self.is_done = self.res = None

    def start(self, case):
        self.case, self.port, self.is_done, self.res = case["case"], None, False, None
        try:
            self.p.stdin.write((json.dumps(case) + "\n").encode())
            self.p.stdin.flush()
        except OSError:  # it died: result() says so
            self.dead = True

    def _pump(self, wait):
        """Read what rank 0 printed within wait seconds (at most one read)."""
        if self.dead:
            return
        r, _, _ = select.select([self.fd], [], [], max(0.0, wait))
        if not r:
            return
        data = os.read(self.fd, 65536)
        if not data:
            self.dead = True
            return
        self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            word, _, rest = line.decode(errors="replace").partition(" ")
            if word == "CASE":
                self.res = json.loads(rest)
                self.is_done = True
            elif word in ("LISTEN", "DONE") and rest.split()[0] == str(self.case):
                if word == "LISTEN":
                    self.port = int(rest.split()[1])
                else:
                    self.is_done = True

    def _wait(self, cond, wait):
        end = time.monotonic() + wait
        while not cond() and not self.dead:
            self._pump(end - time.monotonic())  # at least one look, even for wait 0
            if not cond() and time.monotonic() >= end:
                return False
        return cond()

    def listening(self, wait):
        """The rendezvous port, or None if rank 0 ended the case (or died) first."""
        self._wait(lambda: self.port is not None or self.res is not None, wait)
        return self.port

    def done(self, wait=0.0):
        """True once rank 0 is past its collective."""
        self._wait(lambda: self.is_done, wait)
        return self.is_done

    def result(self, wait):
        """The outcome (dict); None if rank 0 died, "hang" if none came within wait."""
        if self._wait(lambda: self.res is not None, wait):
            return self.res
        return None if self.dead else "hang"

    def stacks(self):
        native = ""
        if self.p.poll() is None:
            try:  # the C threads too (the health thread): faulthandler shows Python's only
                native = subprocess.run(
                    ["gdb", "-p", str(self.p.pid), "-batch", "-nx", "-ex",
                     "thread apply all bt 30", "-ex", "thread 1", "-ex",
                     "frame function nz_health_stop", "-ex", "print *h", "-ex",
                     "print *(struct pthread *)h->th"], capture_output=True, text=True,
                    timeout=60).stdout[-12000:]
            except (OSError, subprocess.TimeoutExpired):
                pass
            self.p.send_signal(signal.SIGABRT)  # faulthandler prints every thread
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.errf.flush()
        with open(self.log, errors="replace") as f:
            return f.read()[-8000:] + ("\n--- gdb ---\n" + native if native else "")

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write(b"quit\n")
                self.p.stdin.flush()
                self.p.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait()
        self.errf.close()


def die_in_bootstrap(port, rng, secret=SECRET, connect=CONNECT):
    """Rank 1 that authenticates to the rendezvous and then misbehaves or dies."""
    how = rng.choice(("close", "biglen", "badjson", "wrongshape", "wronground", "half"))
    deadline = time.monotonic() + connect
    while True:
        try:
            conns = establish(1, secret, [], {(0, 1, auth.PURPOSE_STORE): ("127.0.0.1", port, None)},
                              set(), connect)
            break
        except Exception:  # noqa: BLE001 - not listening yet
            if time.monotonic() > deadline:
                return how
            time.sleep(0.05)
    s = conns[(0, 1, auth.PURPOSE_STORE)]
    s.setblocking(True)
    try:
        if how == "biglen":
            s.sendall((2**31).to_bytes(4, "little"))
        elif how == "badjson":
            s.sendall((9).to_bytes(4, "little") + b"{not json")
        elif how == "wrongshape":
            data = json.dumps(rng.choice([[1, 42], [1, {"rails": 7}], [1, None], 5, [1, {
                "host": "x", "pid": 1, "host_id": "h", "shm": False, "shm_tag": "t",
                "rails": [{"name": "loop0", "addr": 5, "port": "no"}]}]])).encode()
            s.sendall(len(data).to_bytes(4, "little") + data)
            time.sleep(0.3)
        elif how == "wronground":
            data = json.dumps([7, {}]).encode()
            s.sendall(len(data).to_bytes(4, "little") + data)
        elif how == "half":
            s.sendall((100).to_bytes(4, "little") + b"[1, {")
    except OSError:
        pass
    s.close()
    return how


RECV_KINDS = ("random", "recv-hdr", "trunc", "die-mid", "stall", "die-boot")


def case_for(seed, i, rails=None, kinds=None, timeout=TIMEOUT, connect=CONNECT, ranks=2):
    """Case i of a seed: its own generator, so that any case can be re-run alone (the same
    draws whatever ranks is: a case differs only in the job's size)."""
    rng = random.Random(f"nezha-fuzz/{seed}/{i}")
    case = make_case(rng, i, rails)
    if kinds:
        case["kind"] = rng.choice(kinds)
    if case["coll"] == "recv" and case["kind"] not in RECV_KINDS:
        case["kind"] = "recv-hdr"
    case.update(port=0, timeout=timeout, connect_timeout=connect)
    if ranks > 2:
        case["ranks"] = ranks
        if case["kind"] == "die-boot":  # die_in_bootstrap speaks as rank 1, a real one here
            case["kind"] = "die-mesh"
    return case


def bound(case):
    """A case must end within this (a hang otherwise): the run's deadline, the vote's, the
    wait for a peer's abort message, and the set-up. A hang detector, not a timing."""
    return case["connect_timeout"] + 4 * case["timeout"] + 3.0


def run_case(victim, case, secret=SECRET, others=()):
    """Run one case; (result dict, None) if it passed, (result or None, why) if not.
    others: the victims of ranks 1..N-2 when case["ranks"] is N > 2."""
    lim = bound(case)
    victim.start(case)
    peer, res = None, None
    port = victim.listening(lim)
    started = []
    if port is not None:
        for r, v in enumerate(others, 1):
            v.start(dict(case, rank=r, port=port))
            started.append(v)

    def done(wait=0.0):
        return victim.done(wait) and all(v.done(0) for v in started)

    try:
        if port is None:
            pass  # rank 0 ended the case before listening: its CASE line says why
        elif case["kind"] == "die-boot":
            case["how"] = die_in_bootstrap(port, random.Random(case["seed"]), secret,
                                           case["connect_timeout"])
        else:
            try:
                peer = FuzzPeer(port, secret, case["rails"], case["connect_timeout"],
                                case.get("ranks", 2))
            except Exception as exc:  # noqa: BLE001 - rank 0 failed first: its line says
                case["peer_error"] = repr(exc)
            if peer is not None:
                play(peer, case, time.monotonic() + 3 * case["timeout"], done)
                if case["then"] == "silent" or case["kind"] == "stall":
                    res = victim.result(lim)  # stay connected, send nothing more
    finally:
        if peer is not None:
            peer.close()
    if res is None:
        res = victim.result(lim)
    res, why = _judge(victim, case, res)
    for r, v in enumerate(started, 1):  # every real rank ends as rank 0 must
        res_r, why_r = _judge(v, case, v.result(lim))
        if isinstance(res, dict):
            res.setdefault("others", []).append(res_r["outcome"] if res_r else None)
        if why is None and why_r is not None:
            res, why = (res_r or res), f"{why_r.split(':')[0]}: rank {r}: {why_r}"
    return res, why


def _judge(victim, case, res):
    """(result, None) if one real rank's outcome passes, (result or None, why) if not."""
    lim = bound(case)
    if res is None:
        try:
            rc = victim.p.wait(5)
        except subprocess.TimeoutExpired:  # its stdout closed, the process not gone yet
            rc = None
        what = {86: "an ASan report", 87: "a UBSan report"}.get(rc, f"exit status {rc}")
        return None, f"crash: the real rank died ({what})"
    if res == "hang":
        return None, "hang: no outcome within the bound"
    if res["case"] != case["case"]:
        return res, f"out of step: outcome of case {res['case']}"
    if victim.asan and not res["engine"].startswith(victim.asan["TEST_FUZZ_ASAN_BUILD"]):
        return res, "not the sanitizer build"
    if res["outcome"].startswith("UNCLEAN"):
        return res, "unclean: not a nezha error"
    if not res["guards"]:
        return res, "guards: bytes written outside the user's buffer"
    if res["secs"] >= lim:
        return res, "slow: no error within the bound"
    return res, None


def _worker(args, job):
    """Cases job, job + jobs, ... < cases against one real rank; one JSON line per case."""
    secret = bytes.fromhex(f"{job + 1:02x}" * 32)
    out = open(args.out, "a", buffering=1)
    log_path = args.out + ".victim.log"
    victim = Victim(log_path, secret, args.asan)
    others = [Victim(f"{log_path}.rank{r}", secret, args.asan) for r in range(1, args.ranks - 1)]
    kinds = args.kinds.split(",") if args.kinds else None
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver says when to stop
    todo = [args.only] if args.only is not None else range(job, args.cases, args.jobs)
    try:
        for i in todo:
            if stop:
                break
            case = case_for(args.seed, i, args.rails, kinds, args.timeout, args.connect,
                            args.ranks)
            t0 = time.monotonic()
            res, why = run_case(victim, case, secret, others)
            line = dict(case=i, kind=case["kind"], coll=case["coll"], rails=case["rails"],
                        outcome=res["outcome"] if isinstance(res, dict) else None,
                        secs=res["secs"] if isinstance(res, dict) else None,
                        setup=res.get("setup_s") if isinstance(res, dict) else None,
                        close=res.get("close_s") if isinstance(res, dict) else None,
                        others=res.get("others") if isinstance(res, dict) else None,
                        wall=round(time.monotonic() - t0, 3))
            if why:
                line.update(failure=why, case_spec=case, result=res)
                if why.startswith(("crash", "hang")):
                    line["stacks"] = "\n".join(v.stacks() for v in [victim, *others])
                    for v in [victim, *others]:
                        v.close()
                    victim = Victim(log_path, secret, args.asan)
                    others = [Victim(f"{log_path}.rank{r}", secret, args.asan)
                              for r in range(1, args.ranks - 1)]
            out.write(json.dumps(line) + "\n")
    finally:
        for v in [victim, *others]:
            v.close()
        out.close()


def summarize(lines):
    by_kind = collections.defaultdict(collections.Counter)
    outcomes = collections.Counter()
    failures = []
    worst = 0.0
    for d in lines:
        if d.get("failure"):
            failures.append({k: d.get(k) for k in ("case", "kind", "coll", "rails", "failure",
                                                   "outcome", "case_spec", "result")})
        o = d["outcome"] or d["failure"].split(":")[0]
        by_kind[d["kind"]][o] += 1
        outcomes[o] += 1
        worst = max(worst, d["secs"] or 0.0)
    return dict(cases=len(lines), outcomes=dict(outcomes.most_common()),
                by_kind={k: dict(v.most_common()) for k, v in sorted(by_kind.items())},
                failures=failures, worst_case_s=worst,
                crashes=sum(f["failure"].startswith("crash") for f in failures),
                sanitizer_reports=sum("San report" in f["failure"] for f in failures),
                hangs=sum(f["failure"].startswith("hang") for f in failures))


def table(summary):
    cols = list(summary["outcomes"])
    rows = [["kind", *cols, "all"]]
    for k, c in summary["by_kind"].items():
        rows.append([k, *[str(c.get(o, "")) for o in cols], str(sum(c.values()))])
    rows.append(["all", *[str(summary["outcomes"][o]) for o in cols], str(summary["cases"])])
    w = [max(len(r[j]) for r in rows) for j in range(len(rows[0]))]
    return "\n".join("  ".join(x.rjust(w[j]) if j else x.ljust(w[j]) for j, x in enumerate(r))
                     for r in rows)


def _read_lines(paths):
    lines = []
    for p in paths:
        try:
            with open(p) as f:
                for raw in f:
                    if raw.endswith("\n"):
                        lines.append(json.loads(raw))
        except FileNotFoundError:
            pass
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description="Fuzz a real rank 0 with a hostile rank 1.")
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--jobs", type=int, default=2, help="real ranks and peers in parallel")
    ap.add_argument("--rails", type=int, choices=(1, 2), help="default: 1 or 2 per case")
    ap.add_argument("--ranks", type=int, default=2, choices=(2, 3, 4),
                    help="job size: the peer is the last rank, the others real")
    ap.add_argument("--kinds", help="comma-separated mutation kinds (default: all)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT, help="rank 0's NEZHA_TIMEOUT")
    ap.add_argument("--connect", type=float, default=CONNECT)
    ap.add_argument("--asan", help="run rank 0 on this sanitizer build (make asan: build/asan)")
    ap.add_argument("--report", help="JSON summary, rewritten as the run goes")
    ap.add_argument("--minutes", type=float, help="stop after this long (partial counts kept)")
    ap.add_argument("--only", type=int, help="run case ONLY of the seed alone")
    ap.add_argument("--work", default=None, help="directory of the per-case lines")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        return _worker(args, args.worker)
    if args.only is not None:
        args.jobs = 1
    work = args.work or f"/tmp/nezha-fuzz-{args.seed}-{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    outs = [os.path.join(work, f"job{j}.jsonl") for j in range(args.jobs)]
    cmd = [sys.executable, os.path.abspath(__file__)] + [a for a in (argv or sys.argv[1:])]
    procs = [subprocess.Popen(cmd + ["--worker", str(j), "--out", outs[j]]) for j in range(args.jobs)]
    t0 = time.monotonic()
    stopping = []
    signal.signal(signal.SIGINT, lambda *_: stopping.append(1))
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))

    def write(final):
        s = summarize(_read_lines(outs))
        s.update(command=" ".join(["python tests/fuzzpeer.py"] + (argv or sys.argv[1:])),
                 seed=args.seed, planned=args.cases if args.only is None else 1,
                 jobs=args.jobs, seconds=round(time.monotonic() - t0, 1), final=final,
                 asan=bool(args.asan), timeout=args.timeout, work=work)
        if args.report:
            tmp = args.report + ".tmp"
            with open(tmp, "w") as f:
                json.dump(s, f, indent=1)
            os.replace(tmp, args.report)
        return s

    last = 0.0
    while any(p.poll() is None for p in procs):
        time.sleep(0.5)
        over = args.minutes is not None and time.monotonic() - t0 > 60 * args.minutes
        if (stopping or over) and not any(getattr(p, "_stopped", 0) for p in procs):
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)  # finish the case at hand, then stop
                p._stopped = 1
        if time.monotonic() - last > 10:
            last = time.monotonic()
            s = write(False)
            print(f"[{s['seconds']:.0f} s] {s['cases']} cases, {len(s['failures'])} failures",
                  flush=True)
    s = write(True)
    print(table(s))
    print(f"{s['cases']} cases in {s['seconds']:.0f} s; {s['crashes']} crashes "
          f"({s['sanitizer_reports']} sanitizer reports), {s['hangs']} hangs, "
          f"{len(s['failures'])} failures; worst case {s['worst_case_s']:.2f} s")
    for f in s["failures"][:20]:
        print("FAILURE", json.dumps(f)[:2000])
    return 1 if s["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
