"""Turning engine statuses and peers' aborts into errors that name who, where and what.

A rank that fails tells every peer why (an ABORT frame on the control connections, relayed
by whoever receives it), so that every rank raises with the root cause rather than a bare
"connection closed" or a timeout.
"""
import errno as _errno
import os
import time

from nezha import log
from nezha._core import engine as _eng
from nezha.errors import (CollectiveMismatch, NezhaError, NezhaTimeout, PeerError,
                          RailSystemError)
from nezha.types import DType, ReduceOp

COLL_NAMES = {_eng.COLL_ALLREDUCE: "allreduce", _eng.COLL_BROADCAST: "broadcast",
              _eng.COLL_REDUCE: "reduce", _eng.COLL_ALLGATHER: "allgather",
              _eng.COLL_REDUCE_SCATTER: "reduce_scatter", _eng.COLL_ALLTOALL: "alltoall",
              _eng.COLL_BARRIER: "barrier", _eng.COLL_SENDRECV: "send/recv"}
KIND_MISMATCH, KIND_PEER, KIND_TIMEOUT, KIND_OTHER = 1, 2, 3, 4


class Diagnose:
    """Mixin of Communicator: errors, aborts from peers, and failing cleanly."""

    def _check_usable(self):
        if self._st.broken is not None:
            raise NezhaError(f"nezha: rank {self.rank}: this communicator was closed after an "
                             f"error: {self._st.broken}")
        if self._st.closed:
            raise NezhaError("nezha: the communicator is closed")

    def _ctrl_peer(self, idx):
        return idx % self.size

    def _on_ctrl(self, req):
        """The health thread has frames for us: raise on an abort. A closed control
        connection (the peer finished or died) is by itself not an error: a data channel we
        still need will say so."""
        for peer, msg in self._take_aborts().items():
            raise _remote_error(msg, peer, self._mesh.peer_name(peer), req, self._waiting(req),
                                self._st.base)

    def _waiting(self, req):
        """'waiting to receive bytes a..b from rank p (host) on rail r' for the current run."""
        w = self._engine.waiting_for()
        if w is None or req.schedule is None:
            return ""
        info = req.schedule.op_info(w[0])
        if info is None:
            return ""
        kind, ep, nbytes, done, _ = info
        peer, chan = ep % self.size, ep // self.size
        verb, prep = ("send", "to") if kind == 0 else ("receive", "from")
        return (f"waiting to {verb} bytes {done}..{nbytes} {prep} rank {peer} "
                f"({self._mesh.peer_name(peer)}) on rail {self._mesh.chan_name(chan)}")

    def _silent_note(self):
        """'; rank 2 (host pid N) has not been heard ...' for peers whose heartbeats stopped
        on every rail: the rank we wait for may itself wait, in a chain (a ring), for the one
        that is stuck; this names that one (tests/test_peer_death.py, SIGSTOP on one rail)."""
        quiet = min(1.0, self.timeout / 2, max(0.2, 50 * float(self.config["HEARTBEAT"])))
        notes = []
        for p in range(self.size):
            if p == self.rank:
                continue
            seen = [self._engine.rail_silence(r, p) for r in range(len(self._mesh.rails))]
            if seen and all(closed or t >= quiet for t, closed in seen):
                t = min(t for t, _ in seen)
                notes.append(f"rank {p} ({self._mesh.peer_name(p)}) has not been heard on any "
                             f"rail for {t:.1f} s (stopped, or cut off)")
        return "; " + "; ".join(notes) if notes else ""

    def _peer_gone(self, peer):
        """(why, aborted) if peer is gone, else None: every control connection to it has
        closed. aborted: it sent an abort first, so it left on account of another rank (a
        rank killed outright closes them all without a word). Asked by re-admission while
        it waits for peer's connections (Mesh.links)."""
        if self._ctrl_all_closed(peer):
            rails = ", ".join(r.name for r in self._mesh.rails)
            why = (f"closed every control connection ({rails}) while this rank waited for "
                   "its connections")
            msg = self._pending_abort(peer, 0)
            if msg is not None:
                return (f"{why}, after its abort: {msg[1].removeprefix('nezha: ')}", True)
            return (why, False)
        return None

    def _ctrl_all_closed(self, peer):
        """Every control connection to peer (one per rail) has closed."""
        nrails = len(self._mesh.rails)
        return nrails > 0 and all(self._engine.rail_silence(r, peer)[1] for r in range(nrails))

    def _take_aborts(self):
        """Drain the health thread's inbox into self._aborts (peer -> (kind, text)): a reader
        looking for one peer's abort must not lose another's."""
        aborts = self._aborts
        for idx, ftype, kind, seq, payload in self._engine.take_messages():
            if ftype == _eng.FRAME_ABORT:
                aborts.setdefault(self._ctrl_peer(idx), (kind, payload.decode(errors="replace")))
        return aborts

    def _pending_abort(self, peer, wait):
        """An abort message from peer, if one arrives within wait seconds. None at once when
        every control connection to peer has closed: a peer that fails sends its abort before
        it closes, and the health thread posts what it read before it marks the connection
        closed, so nothing more can come (a peer that died without a word, e.g. killed)."""
        deadline = time.monotonic() + wait
        while True:
            gone = self._ctrl_all_closed(peer)
            msg = self._take_aborts().get(peer)
            if msg is not None:
                return msg
            if gone or time.monotonic() >= deadline:
                return None
            time.sleep(0.01)

    def _engine_error(self, rc, req):
        op_i, ep, eno, _ = self._engine.error()
        s = req.schedule
        name = f"{req.name} #{req.seq - self._st.base}"
        peer, chan = (ep % self.size, ep // self.size) if ep >= 0 else (None, None)
        where = ""
        if peer is not None:
            where = (f"rank {peer} ({self._mesh.peer_name(peer)}) on rail "
                     f"{self._mesh.chan_name(chan)}")
        if rc == _eng.ERR_MISMATCH:
            exp, got = s.header_expected(), s.header_received(ep)
            return CollectiveMismatch(
                f"nezha: rank {self.rank}: collective mismatch with {where}: this rank called "
                f"{_describe(exp, self._st.base)}, rank {peer} called "
                f"{_describe(got, self._st.base)} ({_diff(exp, got)})")
        if rc in (_eng.ERR_CLOSED, _eng.ERR_SOCKET) and peer is not None:
            msg = self._pending_abort(peer, 0.5)
            if msg is not None:
                return _remote_error(msg, peer, self._mesh.peer_name(peer), req,
                                     self._waiting(req), self._st.base)
            if rc == _eng.ERR_CLOSED or eno in (_errno.ECONNRESET, _errno.EPIPE):
                return PeerError(
                    f"nezha: rank {self.rank}: {where} closed its connection during {name}: "
                    "that process exited or died", peer=peer, rail=self._mesh.chan_name(chan))
            return RailSystemError(
                f"nezha: rank {self.rank}: {name}: {os.strerror(eno)} talking to {where}",
                rail=self._mesh.chan_name(chan), peer=peer)
        if rc == _eng.ERR_TIMEOUT:
            what = self._waiting(req)
            return NezhaTimeout(
                f"nezha: rank {self.rank}: {name} did not finish within {self.timeout:g} s"
                f"{': ' + what if what else ''}; that rank may be stuck, dead, or in a "
                f"different collective{self._silent_note()} (NEZHA_TIMEOUT sets the limit)")
        return NezhaError(f"nezha: rank {self.rank}: {name} failed (engine status {rc}) {where}")

    def _fail(self, exc):
        """After an error: tell every peer why, fail what is queued, close."""
        if self._st.broken is not None:
            return
        self._st.broken = exc
        log.warn("COLL", f"{exc}")
        if self._host is not None:  # ranks waiting in the host area stop at once
            self._host.abort(exc)
        kind = (KIND_MISMATCH if isinstance(exc, CollectiveMismatch) else
                KIND_TIMEOUT if isinstance(exc, NezhaTimeout) else
                KIND_PEER if isinstance(exc, PeerError) else KIND_OTHER)
        # Relay remote aborts too: a rank that only sees us close must still learn why.
        text = str(exc).encode()[:4000]
        for idx in range(len(self._mesh.rails) * self.size):
            if idx % self.size != self.rank:
                self._engine.send_frame(idx, _eng.FRAME_ABORT, kind, 0, text)
        with self._st.cv:
            pending = list(self._st.queue)
            self._st.queue.clear()
        for r in pending:
            r._finish(NezhaError(f"nezha: {r.name} #{r.seq - self._st.base} not run: an earlier "
                                 f"operation failed: {exc}"))
        self._teardown()


def _remote_error(msg, peer, peer_name, req, waiting="", base=0):
    kind, text = msg
    head = f"rank {peer} ({peer_name}) aborted while this rank ran {req.name} #{req.seq - base}"
    head += f" ({waiting}): " if waiting else ": "
    text = text.removeprefix("nezha: ")
    cls = CollectiveMismatch if kind == KIND_MISMATCH else PeerError
    exc = cls(f"nezha: {head}{text}")
    exc._remote = True
    log.trace("COLL", f"abort from rank {peer}: {text}")
    return exc


def _describe(h, base=0):
    """A wire header as the user called it (base: the start-up calls before theirs)."""
    coll = COLL_NAMES.get(h["coll"], f"collective {h['coll']}")
    try:
        dt = DType(h["dtype"]).name.lower()
    except ValueError:
        dt = h["dtype"]
    parts = [f"count={h['count']}", f"dtype={dt}"]
    if h["coll"] in (_eng.COLL_ALLREDUCE, _eng.COLL_REDUCE, _eng.COLL_REDUCE_SCATTER):
        parts.append(f"op={ReduceOp(h['op']).name if h['op'] < 8 else h['op']}")
    if h["root"] >= 0:
        parts.append(f"root={h['root']}")
    return f"{coll} #{h['seq'] - base} ({', '.join(parts)})"


def _diff(exp, got):
    names = {"seq": "sequence number", "coll": "collective", "count": "count",
             "dtype": "dtype", "op": "op", "root": "root", "algo": "algorithm",
             "plan": "rail plan", "magic": "protocol"}
    d = [names[k] for k in names if exp[k] != got[k]]
    return "differs in " + ", ".join(d) if d else "headers differ"
