"""Surviving a rail failure: agree, reroute, re-admit (seeds §1.6, our design).

With two or more rails every collective ends with a vote: each rank tells every other,
over the control connections of the live rails, which of the collective's slices it could
not finish (its engine sets a channel aside at once on a socket error, and after
NEZHA_RAIL_TIMEOUT of silence from the peer it waits on, heartbeats being sent every
NEZHA_HEARTBEAT). The union is the same on every rank, so every rank marks the same
channels dead and re-runs the same unfinished slices on the survivors, from the inputs
(in-place inputs are kept for this), before the collective returns: nothing is lost,
nothing is counted twice. A slice finished everywhere is never re-run.

A dead rail keeps being heartbeat; when every rank has heard every peer on it without a gap
for NEZHA_READMIT seconds (also decided by the vote), its channels are reconnected and it
re-enters the plan cold.
"""
import time

from nezha import log
from nezha._core import engine as _eng
from nezha.errors import NezhaTimeout, PeerError, RailSystemError
from nezha.planner import Plan


def _bits(mask):
    i = 0
    while mask:
        if mask & 1:
            yield i
        mask >>= 1
        i += 1


class Failover:
    """Mixin of Communicator: the vote, rerouting and re-admission."""

    def _live_rails(self):
        m = 0
        for c, alive in enumerate(self.planner.alive):
            if alive:
                m |= 1 << (c // self._mesh.nconns)
        return m

    def _agree(self, req, s, plan, ranges, src):
        """Vote on the finished run; re-run what some rank could not finish."""
        nrails = len(self._mesh.rails)
        rerun = 0
        while True:
            mask = 0
            for i, (a, b) in enumerate(ranges):
                if not s.ops_complete(a, b):
                    mask |= 1 << i
            failed_here = self._engine.failed_channels()
            heard = self._engine.heard_rails(nrails, self.rank, self._readmit_s)
            deadline = _eng.now_ns() + int(min(self.timeout, 1e9) * 1e9)
            while True:
                rc, umask, iheard = self._engine.vote(self.rank, self._votes & 0xFFFFFFFF, mask,
                                                      heard, self._live_rails(), nrails,
                                                      deadline)
                if rc != _eng.ERR_CTRL:
                    break
                self._on_ctrl(req)  # raises on an abort; otherwise vote on
            self._votes += 1
            if rc != _eng.ERR_OK:
                raise self._vote_error(rc, req)
            self._engine.finish(s, [not (umask >> i) & 1 for i in range(len(ranges))])
            if not umask:
                break
            dead = sorted({plan.slices[i][0] for i in _bits(umask)})
            self._mark_dead(dead, req, failed_here)
            failed = [plan.slices[i] for i in _bits(umask)]
            plan = Plan(self.planner.resplit(failed, plan.esize), plan.algo, None, plan.esize)
            rerun += 1
            log.info("HEALTH", f"{req.name} #{req.seq}: re-running {len(failed)} unfinished "
                     f"slice(s) on {plan}")
            s, ranges = self._schedule(req, plan, src)
            req.schedule = s
            self._run(req, s, True, plan)
        if rerun:
            self._events[-1]["rerun_done_s"] = time.time()
        self._readmit(iheard, req)

    def _mark_dead(self, chans, req, failed_here):
        why = {c: (w, p) for c, w, p, _, _ in failed_here}
        for c in chans:
            if not self.planner.alive[c]:
                continue
            self.planner.alive[c] = False
            for p in range(self.size):
                if p != self.rank:
                    self._engine.set_endpoint_fd(c * self.size + p, -1)
            self._mesh.close_channel(c)
            name = self._mesh.chan_name(c)
            w, p = why.get(c, ("reported by another rank", None))
            self._events.append({"event": "down", "channel": name, "collective": req.name,
                                 "seq": req.seq, "why": w, "peer": p, "time": time.time(),
                                 "detect_ms": next((ns / 1e6 for cc, _, _, _, ns in failed_here
                                                    if cc == c), None)})
            log.warn("HEALTH", f"rail {name} failed during {req.name} #{req.seq} "
                     f"({w}{'' if p is None else f' with rank {p}'}); rerouting to "
                     f"{[self._mesh.chan_name(x) for x, a in enumerate(self.planner.alive) if a]}")
        self._cache.clear()
        self.planner.model.set_channels(self.planner.alive)
        if not any(self.planner.alive):
            raise RailSystemError(
                f"nezha: rank {self.rank}: every rail failed during {req.name} #{req.seq} "
                f"({', '.join(self._mesh.chan_name(c) for c in range(self.nchan))}): "
                "no path is left to the other ranks")

    def _readmit(self, iheard, req):
        """Reconnect dead channels whose rail every rank has heard well for a while."""
        back = [c for c, alive in enumerate(self.planner.alive)
                if not alive and iheard >> (c // self._mesh.nconns) & 1]
        if not back:
            return
        self._generation += 1
        socks = self._mesh.reconnect(back, self._generation, self._boot.secret)
        for (peer, c), sock in socks.items():
            self._engine.set_endpoint_fd(c * self.size + peer, sock.fileno())
        for c in back:
            self.planner.alive[c] = True
            name = self._mesh.chan_name(c)
            down = next((e for e in reversed(self._events)
                         if e["event"] == "down" and e["channel"] == name), None)
            self._events.append({"event": "up", "channel": name, "seq": req.seq,
                                 "time": time.time(),
                                 "down_s": None if down is None else time.time() - down["time"]})
            log.warn("HEALTH", f"rail {name} answers again: re-admitted (cold) after "
                     f"{req.name} #{req.seq}")
        self._cache.clear()
        self.planner.model.set_channels(self.planner.alive)

    def _vote_error(self, rc, req):
        _, peer, eno, _ = self._engine.error()
        name = f"{req.name} #{req.seq}"
        who = f"rank {peer} ({self._mesh.peer_name(peer)})" if peer >= 0 else "a rank"
        if rc == _eng.ERR_CLOSED:
            msg = self._pending_abort(peer, 0.3) if peer >= 0 else None
            if msg is not None:
                from nezha.diagnose import _remote_error
                return _remote_error(msg, peer, self._mesh.peer_name(peer), req)
            return PeerError(f"nezha: rank {self.rank}: {who} closed every connection during "
                             f"{name}: that process exited or died", peer=peer)
        if rc == _eng.ERR_TIMEOUT and eno == 113:  # EHOSTUNREACH: silent on every rail
            return RailSystemError(
                f"nezha: rank {self.rank}: {who} is unreachable on every rail "
                f"({', '.join(r.name for r in self._mesh.rails)}) during {name}: the last "
                "rail to it failed", peer=peer)
        return NezhaTimeout(f"nezha: rank {self.rank}: {name}: {who} did not report how it "
                            f"finished within {self.timeout:g} s (NEZHA_TIMEOUT)")
