"""Bootstrap from a torchrun-style environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

Rank 0 listens on MASTER_ADDR:MASTER_PORT (that address only, not every interface); each
allgather is one round in which every other rank connects, proves the job secret, sends
its object and gets the list back. Objects travel as JSON, never pickles.
"""
import hashlib
import json
import os
import socket
import struct
import time

from nezha import log
from nezha.bootstrap import auth
from nezha.bootstrap.base import Bootstrap, job_secret_from_env
from nezha.errors import InvalidUsageError, NezhaTimeout, PeerError
from nezha.rails.tcp.connect import establish

_LEN = struct.Struct("<I")


_warned = False


def _warn_derived_secret(how="is derived from MASTER_ADDR/MASTER_PORT"):
    """Once per process: a secret anyone can derive (or read from the rendezvous) keeps
    strays out, not attackers. how: where the secret comes from instead."""
    global _warned
    if not _warned:
        _warned = True
        log.warn("BOOT", "no job secret from the launcher (NEZHA_JOB_SECRET or "
                 f"NEZHA_JOB_SECRET_FILE): the secret {how}, "
                 "which keeps out strays, not attackers (docs/security.md)")


class EnvBootstrap(Bootstrap):
    """Rank and size from the environment; allgather through rank 0."""

    kind = "env"

    def __init__(self, rank, size, addr, port, secret, local_rank=None, timeout=30.0):
        if not 0 <= rank < size:
            raise InvalidUsageError(f"nezha: RANK={rank} is outside 0..WORLD_SIZE-1={size - 1}")
        self.rank, self.size, self.addr, self.port = rank, size, addr, port
        self.secret, self.timeout, self.round = secret, timeout, 0
        self.listener = None
        if rank == 0 and size > 1:
            self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                self.listener.bind((addr, port))
            except OSError as exc:
                self.listener.close()
                raise InvalidUsageError(
                    f"nezha: rank 0 cannot listen on MASTER_ADDR:MASTER_PORT={addr}:{port}: {exc}") from exc
            self.listener.listen(max(16, size))
        if local_rank is None:
            hosts = self.allgather(socket.gethostname())
            local_rank = sum(1 for h in hosts[:rank] if h == hosts[rank])
        self.local_rank = local_rank

    @classmethod
    def from_environ(cls, timeout=30.0):
        """Read RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK and NEZHA_JOB_SECRET."""
        env = os.environ
        try:
            rank, size, port = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["MASTER_PORT"])
        except (KeyError, ValueError) as exc:
            raise InvalidUsageError(f"nezha: bad torchrun environment: {exc}") from None
        addr = socket.gethostbyname(env["MASTER_ADDR"])
        secret = job_secret_from_env()
        if secret is None:
            # Everyone can derive this, so it keeps strays out but not an attacker.
            run_id = env.get("TORCHELASTIC_RUN_ID", "")
            secret = hashlib.sha256(f"nezha|{addr}|{port}|{size}|{run_id}".encode()).digest()
            _warn_derived_secret()
        local = env.get("LOCAL_RANK")
        return cls(rank, size, addr, port, secret, int(local) if local else None, timeout)

    def allgather(self, obj):
        """Every rank's obj, in rank order (one round through rank 0)."""
        self.round += 1
        if self.size == 1:
            return [obj]
        key_purpose = auth.PURPOSE_STORE
        if self.rank == 0:
            expected = {(r, self.round, key_purpose) for r in range(1, self.size)}
            conns = establish(0, self.secret, [self.listener], {}, expected, self.timeout)
            out = [None] * self.size
            out[0] = obj
            deadline = time.monotonic() + self.timeout
            try:
                for (r, _, _), s in conns.items():
                    try:
                        got = _recv_json(s, deadline)
                    except (PeerError, NezhaTimeout) as exc:
                        # name the rank, and tell the ranks waiting for the answer who it
                        # was (they would only see this rank close: tests/test_peer_death.py)
                        text = (f"nezha: rank 0: bootstrap: rank {r} failed in the exchange "
                                f"({str(exc).removeprefix('nezha: bootstrap: ')}): that "
                                "process exited, died or is stuck")
                        err = (PeerError(text, peer=r) if isinstance(exc, PeerError)
                               else NezhaTimeout(text))
                        _abort_others(conns, r, str(err), deadline)
                        raise err from None
                    # an authenticated peer may still be buggy or hostile: a clean error
                    if not (isinstance(got, list) and len(got) == 2):
                        raise PeerError(f"nezha: bootstrap: rank {r} sent a malformed message",
                                        peer=r)
                    if got[0] != self.round:
                        raise PeerError(f"nezha: bootstrap: rank {r} is in round {got[0]}, "
                                        f"rank 0 in round {self.round}", peer=r)
                    out[r] = got[1]
                for s in conns.values():
                    _send_json(s, out, deadline)
            finally:
                for s in conns.values():
                    s.close()
            return out
        targets = {(0, self.round, key_purpose): (self.addr, self.port, None)}
        conns = establish(self.rank, self.secret, [], targets, set(), self.timeout,
                          names={0: f"MASTER_ADDR {self.addr}:{self.port}"})
        s = conns[(0, self.round, key_purpose)]
        deadline = time.monotonic() + self.timeout
        try:
            _send_json(s, [self.round, obj], deadline)
            got = _recv_json(s, deadline)
            if isinstance(got, dict) and "abort" in got:  # rank 0 says which rank failed
                peer = got.get("peer")
                raise PeerError(f"nezha: rank {self.rank}: "
                                f"{str(got['abort']).removeprefix('nezha: ')[:500]}",
                                peer=peer if isinstance(peer, int) else None)
            return got
        except OSError as exc:
            raise PeerError(f"nezha: rank {self.rank}: bootstrap: rank 0 at {self.addr}:{self.port} "
                            f"dropped the exchange ({exc}); it probably failed to start, see its "
                            "output", peer=0) from None
        finally:
            s.close()

    def close(self):
        """Stop listening."""
        if self.listener is not None:
            self.listener.close()
            self.listener = None


def _abort_others(conns, bad, text, deadline):
    """Best effort: rank 0 tells the other ranks of a round that rank `bad` failed."""
    for (r, _, _), s in conns.items():
        if r != bad:
            try:
                _send_json(s, {"abort": text, "peer": bad}, min(deadline, time.monotonic() + 1))
            except OSError:
                pass


def _send_json(s, obj, deadline):
    data = json.dumps(obj).encode()
    s.setblocking(True)
    s.settimeout(max(0.01, deadline - time.monotonic()))
    s.sendall(_LEN.pack(len(data)) + data)


def _recv_exact(s, n, deadline):
    buf = b""
    s.setblocking(True)
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise NezhaTimeout("nezha: bootstrap: timed out waiting for a peer's message")
        s.settimeout(left)
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise PeerError("nezha: bootstrap: peer closed the connection")
        buf += chunk
    return buf


def _recv_json(s, deadline):
    (n,) = _LEN.unpack(_recv_exact(s, _LEN.size, deadline))
    if n > 64 << 20:
        raise PeerError("nezha: bootstrap: message too large")
    try:
        return json.loads(_recv_exact(s, n, deadline))
    except ValueError:  # not JSON (UnicodeDecodeError is a ValueError too): a peer's bug
        raise PeerError("nezha: bootstrap: a peer sent a message that is not JSON") from None
