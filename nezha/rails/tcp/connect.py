"""Build every authenticated connection of a communicator at once, without deadlock.

All outgoing connects and all incoming accepts progress together in one selector loop, so
no rank waits on a peer that is itself waiting; every connection runs the handshake of
nezha.bootstrap.auth. Connections that fail the handshake are closed and logged and the
wait goes on for the right one, until the deadline.
"""
import errno
import selectors
import socket
import time

from nezha import log
from nezha.bootstrap import auth
from nezha.errors import AuthenticationError, NezhaTimeout, PeerError

PROBE_AFTER = 0.2   # s of waiting before the first probe of a missing peer's listener
PROBE_EVERY = 2.0   # at most this far apart after that (the first gaps double)
GONE_GRACE = 0.1    # s to let probes answer, or the rank an aborted peer left over close too


class _Conn:
    """One connection being set up: a small state machine over fixed-size messages."""

    def __init__(self, sock, key, outgoing, hello_bytes=b""):
        self.sock = sock
        self.key = key            # (peer, channel, purpose), known up front when outgoing
        self.outgoing = outgoing
        self.inbuf = b""
        self.outbuf = hello_bytes
        self.hello = hello_bytes
        self.challenge = b""
        self.need = auth.CHALLENGE if outgoing else auth.HELLO
        self.state = "connecting" if outgoing else "hello"
        self.peer_addr = None


def _describe(key, names):
    peer, chan, purpose = key
    if purpose == auth.PURPOSE_STORE:
        return f"rank {peer}'s bootstrap connection"
    kind = "control" if purpose == auth.PURPOSE_CTRL else "data"
    return f"rank {peer} ({names.get(peer, '?')}) {kind} connection on {names.get(('chan', chan), chan)}"


class _Probe:
    """A bare connect to the listener of a peer we wait for: refused means it is gone."""

    def __init__(self, sock, peer, where):
        self.sock, self.peer, self.where = sock, peer, where


def establish(rank, secret, listeners, targets, expected, timeout, names=None,
              gone_if_refused=False, probes=None, gone=None):
    """Connect to targets and accept expected keys; returns {key: connected socket}.

    listeners: listening sockets (any may receive any expected key).
    targets: {key: (addr, port, local_addr)} connections this rank opens.
    expected: set of keys (peer, channel, purpose) peers open towards us.
    names: optional labels for error messages ({peer: "host", ("chan", c): "rail0"}).
    gone_if_refused: the targets were listening before we learnt of them (the mesh: every
    rank listens before the exchange of addresses), so a refused connection means the peer
    closed its listener: it exited or died. A PeerError at once instead of retrying until
    the deadline (tests/test_peer_death.py). Not for the rendezvous, which may start late.
    probes: {peer: (addr, port, local_addr)} listeners of peers we wait for (expected keys)
    that were listening before we learnt of them. While keys of such a peer are missing, its
    listener is probed (a connect, closed at once: PROBE_AFTER, then further apart): refused
    means the peer is gone, a PeerError naming it instead of a timeout. The peer's side
    drops the probe without a word (an incoming connection closed before its first byte).
    gone: optional callable(peer) -> (reason, aborted) or None, asked while a peer's keys are
    missing (the communicator's: every control connection to the peer closed; aborted: it
    sent an abort first, so another gone peer, if any, is named first).
    Both only raise PeerError; no connection is accepted on their account.
    """
    names = names or {}
    probes = probes or {}
    start = time.monotonic()
    deadline = start + timeout
    sel = selectors.DefaultSelector()
    done = {}
    rejected = []
    heard = set()       # peers whose hello arrived here (hint: they were alive and trying)
    found = {}          # peer -> why it is gone
    aborted = set()     # gone peers that sent an abort first: they left on account of another
    found_at = None
    probing = {}        # peer -> _Probe in flight
    probe_at, probe_gap = start + PROBE_AFTER, PROBE_AFTER
    try:
        for lst in listeners:
            lst.setblocking(False)
            sel.register(lst, selectors.EVENT_READ, None)
        for key, (addr, port, local) in targets.items():
            _start_connect(sel, rank, key, addr, port, local)
        while len(done) < len(targets) + len(expected):
            now = time.monotonic()
            if gone is not None or probes:
                missing = {k[0] for k in list(targets) + list(expected) if k not in done}
                for p in sorted(missing - set(found)) if gone is not None else ():
                    why = gone(p)
                    if why:
                        found[p] = why[0]
                        if why[1]:
                            aborted.add(p)
                        found_at = found_at or now
                if probes and now >= probe_at:
                    for p in sorted(missing & set(probes) - set(found) - set(probing)):
                        pr = _start_probe(sel, p, *probes[p])
                        if isinstance(pr, _Probe):
                            probing[p] = pr
                        elif pr:
                            found[p] = pr
                            found_at = found_at or now
                    probe_gap = min(probe_gap * 2, PROBE_EVERY)
                    probe_at = now + probe_gap
                # a grace for probes in flight, or for the rank an aborted one left over
                waits = probing or not set(found) - aborted
                if found and (not waits or now - found_at >= GONE_GRACE):
                    raise _gone_error(rank, found, heard, names, aborted)
            left = deadline - now
            if left <= 0:
                missing = [k for k in list(targets) + list(expected) if k not in done]
                why = f"; rejected: {'; '.join(rejected)}" if rejected else ""
                # one connection per missing peer, in rank order: every peer we wait for is
                # named (a set's order once hid one behind four of another's)
                first = {}
                for k in sorted(missing, key=lambda k: (k[0], k[1], k[2])):
                    first.setdefault(k[0], k)
                raise NezhaTimeout(
                    f"nezha: rank {rank}: no authenticated connection within {timeout:.0f} s from "
                    + ", ".join(_describe(k, names) for k in list(first.values())[:6])
                    + (" ..." if len(first) > 6 else "") + why
                    + " (is the peer running, with the same NEZHA_JOB_SECRET and interfaces?)")
            nap = 0.05 if (gone is not None or probing or found) else 0.5
            if probes and not found:
                nap = min(nap, max(0.0, probe_at - now))
            for sk, ev in sel.select(timeout=min(left, nap)):
                if sk.data is None:
                    _accept(sel, sk.fileobj)
                    continue
                c = sk.data
                if isinstance(c, _Probe):
                    why = _probe_result(sel, c)
                    probing.pop(c.peer, None)
                    if why:
                        found.setdefault(c.peer, why)
                        found_at = found_at or time.monotonic()
                    continue
                try:
                    finished = _step(c, ev, rank, secret, expected, targets, done)
                    if c.key is not None and not c.outgoing:
                        heard.add(c.key[0])
                except _Reject as r:
                    if not c.outgoing and c.state == "hello" and not c.inbuf:
                        _drop_quiet(sel, c)   # not a byte: a probe (or a port scan)
                        continue
                    _drop(sel, c, rejected, "closed a connection from", r)
                    continue
                except OSError as exc:
                    if not c.outgoing and c.state == "hello" and not c.inbuf:
                        _drop_quiet(sel, c)   # reset before its first byte: a probe
                        continue
                    if not c.outgoing:
                        # an incoming handshake reset: that peer gave up, most likely
                        # because a third rank died; wait on, so that the timeout names
                        # every rank still missing (the dead one first), not this one
                        _drop(sel, c, rejected, "lost an incoming connection from",
                              exc.strerror or exc)
                        continue
                    if c.outgoing and gone_if_refused and exc.errno == errno.ECONNREFUSED:
                        raise PeerError(
                            f"nezha: rank {rank}: {_describe(c.key, names)} refused at "
                            f"{c.peer_addr}: rank {c.key[0]} no longer listens (that process "
                            "exited or died)", peer=c.key[0]) from exc
                    if c.outgoing and exc.errno in (errno.ECONNREFUSED, errno.ECONNRESET,
                                                    errno.ETIMEDOUT, errno.EHOSTUNREACH):
                        # peer not listening yet, or went away: retry until the deadline
                        sel.unregister(c.sock)
                        c.sock.close()
                        time.sleep(0.05)
                        addr, port, local = targets[c.key]
                        _start_connect(sel, rank, c.key, addr, port, local)
                        continue
                    raise PeerError(f"nezha: rank {rank}: {_describe(c.key, names)} failed: {exc}",
                                    peer=c.key[0]) from exc
                if finished:
                    sel.unregister(c.sock)
                    done[c.key] = c.sock
                else:
                    want = selectors.EVENT_READ | (selectors.EVENT_WRITE if c.outbuf else 0)
                    sel.modify(c.sock, want, c)
        return done
    except BaseException:
        for s in done.values():
            s.close()
        for sk in list(sel.get_map().values()):
            if sk.data is not None:
                sk.fileobj.close()
        raise
    finally:
        for lst in listeners:
            try:
                sel.unregister(lst)
            except (KeyError, ValueError):
                pass
        sel.close()


class _Reject(Exception):
    pass


def _start_probe(sel, peer, addr, port, local):
    """A probe in flight (registered in sel), or already its answer: why the peer is gone
    (refused at once), or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if local:
            s.bind((local, 0))
        s.setblocking(False)
        err = s.connect_ex((addr, port))
    except OSError as exc:
        err = exc.errno
    p = _Probe(s, peer, f"{addr}:{port}")
    if err in (0, errno.EINPROGRESS):
        sel.register(s, selectors.EVENT_WRITE, p)
        return p
    s.close()
    return _refused(p) if err == errno.ECONNREFUSED else None


def _refused(p):
    return (f"no longer listens at {p.where} (this rank's probe of its listener was "
            "refused while waiting for its connections)")


def _probe_result(sel, p):
    """The probe connected or failed: why its peer is gone, or None (it listens, or no
    answer we can read: only a refusal counts)."""
    err = p.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    sel.unregister(p.sock)
    p.sock.close()
    return _refused(p) if err == errno.ECONNREFUSED else None


def _gone_error(rank, found, heard, names, aborted=()):
    """PeerError naming the gone peers: those that neither aborted nor were heard here first
    (a peer that aborted, or was connecting here and then went, most likely gave up on
    account of the first)."""
    order = sorted(found, key=lambda p: (p in aborted, p in heard, p))
    first = order[0]
    text = (f"nezha: rank {rank}: rank {first} ({names.get(first, '?')}) {found[first]}: "
            "that process exited or died")
    for p in order[1:]:
        text += (f"; rank {p} ({names.get(p, '?')}) too: {found[p]}"
                 + (" (it had been connecting here: most likely it gave up on account of "
                    f"rank {first})" if p in heard and p not in aborted else ""))
    return PeerError(text, peer=first)


def _drop_quiet(sel, c):
    log.trace("INIT", f"dropped a connection from {c.peer_addr or '?'} that closed before "
              "its first byte")
    sel.unregister(c.sock)
    c.sock.close()


def _drop(sel, c, rejected, what, why):
    """Close a connection that failed its handshake, log and list it; the wait goes on."""
    msg = f"{c.peer_addr or '?'}: {why}"
    log.warn("INIT", f"{what} {msg}")
    rejected.append(msg)
    sel.unregister(c.sock)
    c.sock.close()


def _start_connect(sel, rank, key, addr, port, local):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if local:
        s.bind((local, 0))  # leave through the rail's own interface
    _nodelay(s)
    s.setblocking(False)
    err = s.connect_ex((addr, port))
    if err not in (0, errno.EINPROGRESS):
        s.close()
        raise OSError(err, f"connect to {addr}:{port}: {errno.errorcode.get(err, err)}")
    c = _Conn(s, key, True, auth.hello(rank, key[1], key[2]))
    c.peer_addr = f"{addr}:{port}"
    sel.register(s, selectors.EVENT_WRITE, c)


def _nodelay(s):
    """No Nagle from the first byte: the handshake ends with the connector's proof, and a
    bootstrap message written right after it was held until the proof's ACK, which the
    other side delays (40 ms per exchange, both sides waiting: tests/fuzzpeer.py)."""
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:  # not TCP
        pass


def _accept(sel, lst):
    try:
        s, addr = lst.accept()
    except (BlockingIOError, InterruptedError):
        return
    _nodelay(s)
    s.setblocking(False)
    c = _Conn(s, None, False)
    c.peer_addr = f"{addr[0]}:{addr[1]}"
    sel.register(s, selectors.EVENT_READ, c)


def _step(c, ev, rank, secret, expected, targets, done):
    """Advance one connection; True when it is authenticated."""
    s = c.sock
    if c.state == "connecting":
        err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise OSError(err, errno.errorcode.get(err, str(err)))
        c.state = "sending"
    if c.outbuf and ev & selectors.EVENT_WRITE:
        n = s.send(c.outbuf)
        c.outbuf = c.outbuf[n:]
    if not c.outbuf and c.state in ("sending", "proved", "challenged"):
        if c.state == "proved":
            return True                       # connector: proof is out, we are done
        if c.state == "sending":
            c.state = "wait-challenge"
        else:
            c.state = "wait-proof"
    if ev & selectors.EVENT_READ and c.need:
        data = s.recv(c.need - len(c.inbuf))
        if not data:
            raise _Reject("closed during the handshake")
        c.inbuf += data
        if len(c.inbuf) == c.need:
            msg, c.inbuf = c.inbuf, b""
            if c.state == "hello":
                key = auth.parse_hello(msg)
                if key is None:
                    raise _Reject("not a nezha hello")
                if key not in expected or key in done:
                    raise _Reject(f"unexpected identity rank={key[0]} channel={key[1]}")
                c.key, c.hello = key, msg
                c.challenge = auth.challenge(secret, msg)
                c.outbuf, c.state, c.need = c.challenge, "challenged", auth.PROOF
            elif c.state == "wait-challenge":
                proof = auth.check_challenge(secret, c.hello, msg)
                if proof is None:
                    c.sock.close()
                    raise AuthenticationError(
                        f"nezha: rank {rank}: peer rank {c.key[0]} at {c.peer_addr} does not know "
                        "this job's secret (NEZHA_JOB_SECRET differs, or this is not our peer)")
                c.outbuf, c.state, c.need = proof, "proved", 0
            elif c.state == "wait-proof":
                if not auth.check_proof(secret, c.hello, c.challenge, msg):
                    raise _Reject(f"rank {c.key[0]} failed the job-secret check")
                return True
    return False


def tune(sock, bufsize):
    """Data-socket options: no Nagle, sized buffers, non-blocking."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if bufsize:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, bufsize)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, bufsize)
    sock.setblocking(False)
