"""The shm transport's factory: shared-memory endpoints between ranks of one host.

Ranks are on one host when they share a kernel (boot id) and a network namespace: two
namespaces on one machine are two hosts of the lab, and shared memory between them would
bypass the network being measured (MPI's `sm` trap, LAB.md). NEZHA_HOST_ID overrides.

Set-up, collective over the bootstrap (every rank takes part, so every rank decides alike):
the lower rank of each local pair creates one segment per channel (mode 0600, O_EXCL,
a name with its uid, pid and a random tag) whose header carries HMAC(job secret, name);
after a round of the bootstrap the higher rank opens it, checks owner, mode and that nonce,
and unlinks every name, so a close or a SIGKILL leaves nothing behind. A second round
agrees that every pair is up; if any rank failed, every rank falls back to tcp (logged).
"""
import hashlib
import hmac
import os
import secrets
import socket

from nezha import log
from nezha._core.engine import ShmEndpoint
from nezha.topo import crowd

SHM_DIR = "/dev/shm"


def host_id(override=None):
    """This rank's host identity: hostname, boot id and network namespace (or override)."""
    if override:
        return str(override)
    boot = crowd.boot_id() or "?"
    try:
        netns = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        netns = 0
    return f"{socket.gethostname()}:{boot}:{netns}"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(directory=SHM_DIR):
    """Remove this user's segment and doorbell names whose creator has died (a SIGKILL
    between create and the peer's open); returns the names removed."""
    prefix = f"nezha-{os.geteuid()}-"
    gone = []
    try:
        names = os.listdir(directory)
    except OSError:
        return gone
    for name in names:
        if not name.startswith(prefix):
            continue
        try:
            pid = int(name[len(prefix):].split("-", 1)[0])
        except ValueError:
            continue
        if not _alive(pid):
            try:
                os.unlink(os.path.join(directory, name))
                gone.append(name)
            except OSError:
                pass
    return gone


def leftovers(pid=None, directory=SHM_DIR):
    """Names this user's ranks (or the one with pid) still have in /dev/shm."""
    prefix = f"nezha-{os.geteuid()}-" + (f"{pid}-" if pid is not None else "")
    try:
        return sorted(n for n in os.listdir(directory) if n.startswith(prefix))
    except OSError:
        return []


class ShmLinks:
    """The shm endpoints of one communicator: {(peer, chan): ShmEndpoint}."""

    def __init__(self, boot, peers, nchan, ring_bytes, tag):
        self.rank = boot.rank
        self.eps = {}
        me = peers[self.rank]
        self.local = [p for p in range(len(peers)) if p != self.rank
                      and peers[p]["host_id"] == me["host_id"]]
        self.ring_bytes = ring_bytes
        uid = os.geteuid()
        # the lower rank of a pair creates, the higher opens; ranks with no local peer take
        # part in the rounds all the same (every rank sees the same errors, so every rank
        # stops after the same round)
        mine = [(p, c, f"nezha-{uid}-{os.getpid()}-{tag}-{c}-{p}")
                for p in self.local if p > self.rank for c in range(nchan)]
        theirs = [(p, c, f"nezha-{uid}-{peers[p]['pid']}-{peers[p]['shm_tag']}-{c}-{self.rank}")
                  for p in self.local if p < self.rank for c in range(nchan)]
        made = {}
        errs = (self._round(boot, made, mine, ShmEndpoint.create)
                or self._round(boot, made, theirs, ShmEndpoint.open))
        if errs:
            for ep in made.values():
                ep.close()
            for _, _, base in mine:  # made here and never opened: the names are still there
                for path in (f"{SHM_DIR}/{base}", *self._bells(base)):
                    try:
                        os.unlink(path)
                    except OSError:
                        pass
            self.local = []
            log.warn("INIT", f"shared memory unusable, ranks on one host talk over tcp: {errs[0]}")
            return
        for (peer, chan), ep in made.items():
            ep.watch(peers[peer]["pid"])
        self.eps = made
        log.info("INIT", f"shm with local ranks {self.local} on {nchan} channel(s), "
                 f"{ring_bytes >> 10} KiB rings")

    def _round(self, boot, made, pairs, make):
        """Make the endpoints of pairs, then one bootstrap round: every rank's error."""
        err = None
        try:
            for peer, chan, base in pairs:
                made[(peer, chan)] = make("/" + base, *self._bells(base), self.ring_bytes,
                                          self._nonce(boot, base))
        except OSError as exc:
            err = str(exc)
        return [e for e in boot.allgather(err) if e]

    @staticmethod
    def _bells(base):
        return f"{SHM_DIR}/{base}.b0", f"{SHM_DIR}/{base}.b1"

    @staticmethod
    def _nonce(boot, base):
        return hmac.new(boot.secret, b"nezha-shm:" + base.encode(), hashlib.sha256).digest()

    def close_channel(self, chan):
        """Close the endpoints of a dead channel (the engine no longer points at them)."""
        for key in [k for k in self.eps if k[1] == chan]:
            self.eps.pop(key).close()

    def close(self):
        """Close every endpoint (the peer sees it closed; the names are already gone)."""
        for ep in self.eps.values():
            ep.close()
        self.eps = {}


def new_tag():
    """A random tag for this communicator's segment names."""
    return secrets.token_hex(6)
