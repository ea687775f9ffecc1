"""Surviving a rail failure: agree, reroute, re-admit (seeds §1.6, our design).

Each rank's engine sets a channel aside at once on a socket error, and after
NEZHA_RAIL_TIMEOUT of silence from the peer it waits on (heartbeats are sent every
NEZHA_HEARTBEAT). What happens next is decided by a vote: every rank tells every other, over
the control connections of the live rails, which collective it is in (its index), which of
that collective's slices it could not finish, and which rails it hears well. Every rank gets
the same table, so every rank decides the same:

- everyone in the same collective: the channels of the unfinished slices are marked dead
  and those slices re-run on the survivors, from the inputs (in-place inputs are kept for
  this), before the collective returns. A slice finished everywhere is never re-run.
- some ranks one collective behind (they could not finish one that the others already
  returned from): all ranks re-run its unfinished slices over a fresh connection, those who
  returned from saved inputs into scratch. The streams of the live channels are left alone,
  so the collective the others had started goes on where it was; the planner learns of the
  dead channels at the next vote everyone holds in the same collective.

Large collectives end with a vote (it costs a control round, nothing next to their
payload). A small one (LAZY_MAX_BYTES), on one channel or striped, is *lazy*: it returns as
soon as it is done here, keeping a copy of its input until the next collective shows that
every rank finished it; a vote happens only when a rank sees a failure (the engine of every
other rank stops to join it: nz_vote_called). A rank left behind in a striped one re-runs
the slices some rank could not finish with the ranks ahead and finishes the others where
they are (agree). Closing the communicator settles the last one. (Until session 20 only a
one-slice collective was lazy: a striped small one paid ~500 us of CPU per rank for its
vote on 4 hosts x 2 ranks, docs/results/session19/issue17-piece.)

A dead rail keeps being heartbeat; when every rank has heard every peer on it without a gap
for NEZHA_READMIT seconds since it failed (decided by a vote), its channels are reconnected
and it re-enters the plan cold. (Counting from before the failure let a reset rail come back
milliseconds later and fail again, many times a fault: session 21.) When a vote would leave
no rail at all, a dead rail every rank has heard within the peer-lost wait comes back at
once instead (a rail given up for a congested or starved moment must not turn the next real
cut into the end of the job).
"""
import threading
import time
import types
import weakref

import numpy as np

from nezha import log
from nezha._core import engine as _eng
from nezha.errors import (CollectiveMismatch, NezhaTimeout, PeerError, PeerUnreachable,
                          RailSystemError)
from nezha.buffers import address
from nezha.planner import ALGO_INA, ALGO_TREE, Plan

# Largest lazy collective: it keeps a copy of its input; above this a vote costs less.
LAZY_MAX_BYTES = 256 << 10
GUARD_PERIOD_S = 0.01  # how soon the guard looks again when the caller was busy


def _bits(mask):
    i = 0
    while mask:
        if mask & 1:
            yield i
        mask >>= 1
        i += 1


def _unfinished_at(table, k):
    """Slices that the ranks in collective k (vote table) could not finish, one bit each."""
    mask = 0
    for c, m, _ in table:
        mask |= m if c == k else 0
    return mask


def _voted_slices(table, k, nslices, rank, name):
    """_unfinished_at, refusing slices that collective k does not have: an authenticated but
    buggy or hostile peer's vote must end in a clean error, not an IndexError (found by
    tests/test_fuzz.py: a STATUS frame with mask bit 63 for a 1-slice collective)."""
    mask = _unfinished_at(table, k)
    if mask >> nslices:
        p = next(p for p, (c, m, _) in enumerate(table) if c == k and m >> nslices)
        raise PeerError(f"nezha: rank {rank}: rank {p} voted unfinished slices "
                        f"{table[p][1]:#x} of {name}, which has {nslices}", peer=p)
    return mask


def _guard(ref):
    """While the caller is away (computing, or blocked elsewhere), a rank left behind in the
    lazy collective this rank returned from must not wait for it. Sleeps until a vote frame
    arrives (no polling: wake-ups would cost the spinning ranks), and holds the
    communicator only while it looks, so that one never closed can still be collected."""
    comm = ref()
    engine = comm._engine if comm is not None else None
    comm, again = None, False
    while engine is not None:
        engine.wait_vote_frame(GUARD_PERIOD_S if again else 1.0)
        comm = ref()
        if comm is None:
            return
        again = _guard_look(comm)
        if again is None:
            return
        comm = None


def _guard_look(comm):
    """One look: if a rank is behind, take the queue, help with its re-run, then run what
    was queued meanwhile. Returns True to look again soon (the caller was busy), None once
    the communicator is closed or broken."""
    if comm._st.closed or comm._st.broken is not None:
        return None
    if comm._st.pending is None:
        return False
    behind = comm._engine.peer_vote(comm._st.votes & 0xFFFFFFFF)
    if behind is None or behind >= comm._st.ncoll:
        return False
    with comm._st.cv:
        if comm._st.busy or comm._st.closed:
            return True  # the caller's next run joins; if it goes idle first, look again
        comm._st.busy = True
    try:
        comm._fo.help_idle(types.SimpleNamespace(name="idle", seq=comm._st.ncoll, schedule=None))
    except BaseException as exc:  # the caller's next call raises it
        comm._fail(exc)
    comm._drain()
    return False


class Failover:
    """The failover layer of a communicator: the vote, rerouting and re-admission.

    The executor calls it at explicit points (hooks) and nowhere else:
      lazy_ok(req, plan, src)   may this collective return without a closing vote?
      agree(req, s, plan, ranges, src, rc, lazy)   after a run that votes: agree on it,
                                re-run what some rank could not finish; returns the final plan
      p2p_voted(req, s, plan, rc, planfn, src)   a send/recv stopped for a rank behind
      settle()                  before close: no rank may still need the last lazy collective
    and start_guard() once at start-up. It drives runs through the executor (c._schedule,
    c._run, c._progress) and shares the run state (c._st) with it."""

    def __init__(self, comm, readmit_s):
        self.c = comm
        self.readmit_s = readmit_s
        self.generation = 0   # of fresh connections (re-runs for ranks behind, re-admission)
        self.cut = set()      # channels closed by a vote taken across two collectives
        self.chan_gen = {}    # channel: the generation of its connections (re-admission)

    def _num(self, seq):
        """What messages call collective seq (or index): the user's count, the library's
        start-up calls before it left out (RunState.base)."""
        return seq - self.c._st.base

    def _live_rails(self):
        m = 0
        for c, alive in enumerate(self.c.planner.alive):
            if alive:
                m |= 1 << (c // self.c._mesh.nconns)
        return m

    def lazy_ok(self, req, plan, src):
        """Lazy collectives: those where a rank's finishing proves that every rank entered
        (they have a retarget: allreduce, allgather, reduce_scatter, alltoall, barrier, and
        reduce while small, which then runs as an allreduce), and the small broadcast, a
        tree whose root and inner ranks return early, or an allreduce right after such a
        tree (RunState.ran keeps two collectives while the last is such a tree), or a
        hierarchical one, which opens with a barrier of headers so that it proves every
        rank entered as an allreduce does (Communicator._broadcast_lazy), small, on
        one channel or striped (every slice is a whole collective of all ranks on its
        channel, so finishing any proves every rank entered; a rank behind votes the slices
        it could not finish, and agree re-runs those, finishing the others where they are).
        Decided from what every rank knows alike (the plan, the planner's channels); while
        a rail is down every collective votes, which is also what re-admits it.
        Not one of no elements (a barrier excepted): its zero-byte ops count as done before
        the peer's header arrives, so nothing chains through the ranks (a recursive
        doubling rank hears only its log2(n) partners) and ranks ran a collective ahead
        of one still stuck, having dropped the input it needed re-run (the 30-minute soak:
        "ranks need collective k re-run but this rank kept no input for it")."""
        return (req.retarget is not None and all(self.c.planner.alive)
                and (req.spec[3] > 0 or req.spec[0] == _eng.COLL_BARRIER)
                and (src is None or src.nbytes <= LAZY_MAX_BYTES))

    def _vote(self, req, coll, mask, flags):
        """One vote: [(collective index, mask, flags)] per rank, and the rails all hear."""
        nrails = len(self.c._mesh.rails)
        # low 32 bits: rails heard steadily (re-admission); high 32: heard lately (a
        # vote that would leave no rail takes one of those back at once). The vote ANDs them.
        heard = self.c._engine.heard_rails(nrails, self.c.rank, self.readmit_s)
        if nrails <= 32:
            heard |= self._heard_lately(nrails) << 32
        deadline = _eng.now_ns() + int(min(self.c.timeout, 1e9) * 1e9)
        while True:
            rc, table, iheard = self.c._engine.vote(self.c.rank, self.c._st.votes & 0xFFFFFFFF, coll,
                                                  mask, flags, heard, self._live_rails(),
                                                  nrails, deadline)
            if rc != _eng.ERR_CTRL:
                break
            self.c._on_ctrl(req)  # raises on an abort; otherwise vote on
        self.c._st.votes += 1
        if rc != _eng.ERR_OK:
            raise self._vote_error(rc, req)
        # a collective index below 0 is no rank's: a buggy or hostile peer (tests/test_fuzz.py
        # found it reported as "internal error: ranks need collective -1 re-run")
        bad = next((p for p, (c, _, _) in enumerate(table) if c < 0), None)
        if bad is not None:
            raise PeerError(f"nezha: rank {self.c.rank}: rank {bad} voted for collective "
                            f"{table[bad][0]} during {req.name} #{self._num(req.seq)}", peer=bad)
        return table, iheard

    def _heard_lately(self, nrails):
        """Rails on which this rank heard every peer within the peer-lost wait (max(1 s,
        2 x NEZHA_RAIL_TIMEOUT)): the ones a vote that would leave no rail may take back.
        Not RAIL_TIMEOUT: with more ranks than cores a healthy rail's heartbeats can be that
        late on some rank, and the AND over all ranks then kept every rail out (a soak on a
        loaded machine: a rail given up for a starved peer, then the real cut of the other
        one ended the job). A rail really cut that long ago is given up again by the next
        vote; one cut more recently costs one more vote."""
        lost = max(1.0, 2.0 * self.c.config["RAIL_TIMEOUT"])
        # in C: a Python loop over rails x peers here cost O(size x rails) per striped vote
        return self.c._engine.heard_rails(nrails, self.c.rank, 0.0, lost)

    def agree(self, req, s, plan, ranges, src, rc, lazy):
        """Vote on this run; re-run what some rank could not finish. Returns the plan of
        the last run (a lazy collective keeps it, with src, for a later re-run)."""
        me = self.c._st.ncoll
        rerun = lost = 0
        same = None  # (table, since): the same table vote after vote is a livelock
        fixed = 0  # slices of s re-run over a fresh connection (this rank behind): not in s
        while True:
            if lazy and (rc == _eng.ERR_OK or fixed and self._done_but(s, ranges, fixed)):
                # a lazy run resumed or re-run to the end: its AVG divisions, which no vote
                # below applied (they were missing: the soak's root of a small AVG reduce
                # got the sum after a re-run); a re-run slice's were the re-run's
                self._finish(s, ranges, fixed)
                break
            failed, mask, moving = self.c._engine.failed_mask(), 0, False
            for i, (a, b) in enumerate(ranges):
                if fixed >> i & 1 or s.ops_complete(a, b):
                    continue
                if rc != _eng.ERR_VOTE or failed >> plan.slices[i][0] & 1:
                    mask |= 1 << i
                else:
                    moving = True  # still going on a live channel: finish it after the vote
            failed_here = self.c._engine.failed_channels()
            table, iheard = self._vote(req, me, mask, _eng.VOTE_RUNNING if moving else 0)
            if log.enabled("TRACE", "HEALTH"):  # every striped collective votes: no f-string
                log.trace("HEALTH", f"{req.name} #{self._num(req.seq)} (collective {me}): rc {rc}, "
                          f"voted {mask:#x}{' running' if moving else ''}; table {table}")
            same = self._stuck(same, table, req)
            colls = [c for c, _, _ in table]
            k = min(colls)
            if k < me:  # ranks behind need the collective this rank returned from
                self._help_behind(table, k, req)
                if rc == _eng.ERR_VOTE:
                    rc = self._resume(req, s, plan, lazy)
                continue
            behind_mask = _voted_slices(table, me, len(ranges), self.c.rank,
                                        f"{req.name} #{self._num(req.seq)}")
            if max(colls) > me:  # this rank is the one behind
                behind_mask &= ~fixed
                if behind_mask and lazy:
                    if rc == _eng.ERR_VOTE:
                        # A striped one's other slices, stopped by the vote on live channels:
                        # their bytes are in those streams, ahead of the next collective's.
                        # Finish them first (the ranks ahead wait in the re-run), with the
                        # re-run slices' channels cut (they fail at once): nothing of s
                        # writes into a re-run slice after its re-run
                        self._cut_channels(sorted({plan.slices[i][0]
                                                   for i in _bits(behind_mask)}), req)
                        rc = self._resume(req, s, plan, lazy)
                    self._repair(req, plan, behind_mask, req.spec[6], src)  # with every rank
                    fixed |= behind_mask
                    continue
                if rc == _eng.ERR_VOTE and not behind_mask:
                    rc = self._resume(req, s, plan, lazy)
                    continue
                if not lazy:  # ranks pass a striped collective only through a common vote
                    # so a rank voting from a later collective is wrong: name it (a hostile
                    # peer's vote for collective 2^40 ended here, tests/test_fuzz.py)
                    p = colls.index(max(colls))
                    raise PeerError(f"nezha: rank {self.c.rank}: internal error: {req.name} "
                                    f"#{self._num(req.seq)} voted but was left behind: rank {p} "
                                    f"voted from collective {colls[p]}, this rank is in {me}",
                                    peer=p)
                # Finished here, with a channel set aside after its last byte (CHANFAIL):
                # the ranks ahead finished it too. Voting again would only stop them again
                # (they wait for this rank in the next collective); the next collective
                # meets the bad channel and votes on it with everyone in it.
                self._finish(s, ranges, fixed)
                break
            closing = [p for p, (_, _, f) in enumerate(table) if f & _eng.VOTE_CLOSING]
            if closing:
                raise CollectiveMismatch(
                    f"nezha: rank {self.c.rank}: rank {closing[0]} "
                    f"({self.c._mesh.peer_name(closing[0])}) closed the communicator while this "
                    f"rank ran {req.name} #{self._num(req.seq)}: the ranks called different "
                    "numbers of collectives")
            dead = {plan.slices[i][0] for i in _bits(behind_mask)} | self.cut
            if dead:
                self._mark_dead(sorted(dead), req, failed_here, iheard >> 32)
            if any(f & _eng.VOTE_RUNNING for _, _, f in table):
                # someone still moves slices on live channels: let all finish, vote again
                rc = self._resume(req, s, plan, lazy) if rc == _eng.ERR_VOTE else rc
                continue
            self.c._engine.finish(s, [not (behind_mask >> i) & 1 for i in range(len(ranges))])
            if not behind_mask:
                self._readmit(iheard & 0xFFFFFFFF, req)
                break
            failed = [plan.slices[i] for i in _bits(behind_mask)]
            plan = Plan(self.c.planner.resplit(failed, plan.esize), plan.algo, None, plan.esize)
            rerun += 1
            lost += len(failed)  # the lost work, in slices (bench/failover.py vs nezha sim)
            log.info("HEALTH", f"{req.name} #{self._num(req.seq)}: re-running {len(failed)} "
                     f"unfinished slice(s) on {plan}")
            s, ranges = self.c._schedule(req, plan, src)
            req.schedule = s
            rc = self.c._run(req, s, True, plan, lazy)
        if rerun and self.c._events:
            self.c._events[-1]["rerun_done_s"] = time.time()
            self.c._events[-1]["rerun_slices"] = lost
        return plan

    @staticmethod
    def _done_but(s, ranges, fixed):
        """Every slice of s finished, except those in fixed (re-run elsewhere)."""
        return all(fixed >> i & 1 or s.ops_complete(a, b) for i, (a, b) in enumerate(ranges))

    def _finish(self, s, ranges, fixed):
        """The AVG divisions of s, but a re-run slice's (its re-run applied them)."""
        self.c._engine.finish(s, None if not fixed else
                              [not (fixed >> i) & 1 for i in range(len(ranges))])

    def _stuck(self, same, table, req):
        """Votes that keep giving the same table without anything moving in between for
        NEZHA_TIMEOUT: an error on every rank (they all see the same tables), not a hang."""
        now = time.monotonic()
        if same is None or same[0] != table:
            return (table, now)
        if now - same[1] > self.c.timeout:
            raise NezhaTimeout(f"nezha: rank {self.c.rank}: {req.name} #{self._num(req.seq)}: the "
                               f"ranks' votes did not converge within {self.c.timeout:g} s "
                               f"(NEZHA_TIMEOUT); last table (collective, unfinished slices, "
                               f"flags) per rank: {table}")
        return same

    def _resume(self, req, s, plan, lazy):
        """Go on with an interrupted run (channels closed meanwhile fail at once)."""
        self.c._arm(True, plan, lazy)
        return self.c._progress(req, s, _eng.ERR_OK, True)

    def _help_behind(self, table, k, req):
        """Ranks still in collective k (the lazy one this rank returned from) could not finish
        some of its slices: re-run them with them, from the kept input into scratch."""
        mask = _unfinished_at(table, k)
        if not mask:
            return  # they are only slower: they will finish on their own
        got = self.c._st.kept(k)
        if got is not None:
            _voted_slices(table, k, len(got[3].slices), self.c.rank, f"collective {k}")
        else:
            # A rank can be only one lazy collective behind (the one kept; two when the
            # last was an early-exit tree, RunState.ran): a vote from any other is a buggy
            # or hostile peer's (tests/fuzzpeer.py), or ours.
            kept = self.c._st.pending
            kept = "none" if kept is None else (f"collective {self._num(kept[0])} "
                                                f"({kept[2].name} #{self._num(kept[1])})")
            p = next(p for p, (c, _, _) in enumerate(table) if c == k)
            raise PeerError(f"nezha: rank {self.c.rank}: rank {p} "
                            f"({self.c._mesh.peer_name(p)}) voted to re-run collective "
                            f"{self._num(k)}, which no rank can still need: this rank is in "
                            f"collective {self._num(self.c._st.ncoll)} ({req.name} "
                            f"#{self._num(req.seq)}) and kept {kept}; "
                            f"vote table {table}", peer=p)
        _, seq, tmpl, pplan, psnap = got  # tmpl: the call's Request, or the
        # one the fast path's entry was made from (same buffers, only seq differs)
        preq = types.SimpleNamespace(name=tmpl.name, seq=seq, spec=tmpl.spec)
        if pplan.algo == ALGO_INA:  # not re-run: sent, by the first rank that has it
            self._ina_send_result(preq, pplan, table, k, None, psnap, req)
            return
        self._repair(preq, pplan, mask, tmpl.retarget(), psnap, req)

    def ina_small_failed(self, req, plan, out, inp, op):
        """This rank got no result of its small INA allreduce (one datagram: all or nothing;
        executor._execute_ina_small). Vote until it is settled: a rank that got it returned
        from it (it is in a later collective), and the first such rank sends it to every rank
        still here, so all hold the same bits (a re-run on TCP could round floats
        differently). If none got it, every rank is here: the INA rail is left out on every
        rank alike and the allreduce re-run on the TCP rails from the inputs."""
        me = self.c._st.ncoll
        while True:
            table, _ = self._vote(req, me, 1, 0)
            colls = [c for c, _, _ in table]
            k = min(colls)
            if k < me:  # a rank needs the lazy collective this rank returned from first
                self._help_behind(table, k, req)
                continue
            if max(colls) > me:
                self._ina_send_result(req, plan, table, me, out, None)
                self.c._st.ran(plan, plan, req.seq, req, True, True, out.copy())
                return
            log.warn("HEALTH", f"{req.name} #{self._num(req.seq)}: no rank got its result from the "
                     "INA rail: re-running it on the TCP rails")
            self.c._ina._drop()
            self.c._st.ran(plan, plan, req.seq, req, False, True, None)
            np.copyto(out, inp)
            self.c._internal_allreduce(out, "ina small re-run", op)
            return

    def _ina_send_result(self, req, plan, table, k, out, kept, during=None):
        """A small INA allreduce (collective k) that some ranks got no result of: the first
        rank that has it (a rank past k in the vote table) broadcasts it over a fresh
        connection, into out on the ranks that lack it and into scratch on the others."""
        root = min(p for p, (c, _, _) in enumerate(table) if c > k)
        n, es = plan.slices[0][2], plan.esize
        if self.c.rank == root:
            buf = kept
        elif out is None:
            buf = np.empty(n * es + 1, np.uint8)  # had it: takes part, keeps nothing
        else:
            buf = out
        dst = address(buf)
        bplan = Plan([(0, 0, n)], ALGO_TREE, None, es)
        breq = types.SimpleNamespace(name=req.name, seq=req.seq,
                                     spec=(_eng.COLL_BROADCAST, req.spec[1], 0, n, root))

        def build(s, algo, chan, off, cnt, src, _keep=buf):
            _eng.tree_broadcast(s, chan, root, dst + off * es, cnt, True)

        self._repair(breq, bplan, 1, build, None, during, cut=False)

    def _repair(self, req, plan, mask, build, src, during=None, cut=True):
        """Re-run slices (mask) of req over a fresh connection of a live rail, all ranks
        together. The live channels' streams may hold bytes of the next collective (ranks
        ahead already started it), so the re-run cannot go through them. cut: the slices'
        channels failed (not so for a result the INA rail did not deliver)."""
        if cut:
            self._cut_channels(sorted({plan.slices[i][0] for i in _bits(mask)}), req)
        live = [c for c, a in enumerate(self.c.planner.alive) if a and c not in self.cut]
        if not live:
            raise RailSystemError(
                f"nezha: rank {self.c.rank}: every rail failed during {req.name} "
                f"#{self._num(req.seq)}: no path is left to the other ranks")
        chan = live[0]
        self.generation += 1
        t0 = time.time()
        socks = self.c._mesh.links([chan], self.generation, self.c._boot.secret)
        eps = [self.c._mesh.tcp_endpoint(socks[(p, chan)], p, chan) if p != self.c.rank else None
               for p in range(self.c.size)]
        eng = _eng.Engine(eps, self.c.size, 1, [], self.c._stage_bytes)
        try:
            eng.set_spin(self.c.config["SPIN_US"] * 1e-6)
            coll, dt, op, count, root = req.spec[:5]
            sch = _eng.Schedule(self.c.rank, self.c.size, 1, coll, req.seq & 0xFFFFFFFF, dt, op,
                                count, root, plan.algo, plan.hash)
            for i in _bits(mask):
                _, off, cnt = plan.slices[i]
                build(sch, plan.algo, 0, off, cnt, src)
            rc = eng.start(sch)
            if rc == _eng.ERR_OK:  # no control sockets here: runs to the end, error or deadline
                rc = eng.progress(sch, _eng.now_ns() + int(self.c.timeout * 1e9))
            if rc != _eng.ERR_OK:
                raise RailSystemError(
                    f"nezha: rank {self.c.rank}: re-running {req.name} #{self._num(req.seq)} on "
                    f"rail {self.c._mesh.chan_name(chan)} failed too (engine status {rc})",
                    rail=self.c._mesh.chan_name(chan))
            eng.finish(sch)
        finally:
            eng.close()
            for sock in socks.values():
                sock.close()
        log.warn("HEALTH", f"{req.name} #{self._num(req.seq)}: re-ran {bin(mask).count('1')} "
                 f"slice(s) on a fresh connection of {self.c._mesh.chan_name(chan)} "
                 f"({(time.time() - t0) * 1e3:.1f} ms)"
                 f"{'' if during is None else f' while in {during.name} #{self._num(during.seq)}'}")
        self.c._events.append({"event": "rerun", "collective": req.name, "seq": self._num(req.seq),
                             "channel": self.c._mesh.chan_name(chan), "time": time.time()})

    def _cut_channels(self, chans, req):
        """Close channels now but leave the planner as it is: ranks ahead already planned
        the next collective with them, and everyone must plan it alike. Using a cut channel
        fails at once; the next vote in one collective marks them dead (_mark_dead)."""
        for c in chans:
            if c in self.cut or not self.c.planner.alive[c]:
                continue
            self.cut.add(c)
            self._close_fds(c)
            self.c._events.append({"event": "down", "channel": self.c._mesh.chan_name(c),
                                 "collective": req.name, "seq": self._num(req.seq),
                                 "why": "a rank could not finish on it", "peer": None,
                                 "time": time.time(), "detect_ms": None,
                                 "gen": self.chan_gen.get(c, 0)})
            log.warn("HEALTH", f"rail {self.c._mesh.chan_name(c)} failed during {req.name} "
                     f"#{self._num(req.seq)}; re-running it on another rail")

    def _close_fds(self, c):
        # its rail is heard steadily (re-admission) only from now on
        self.c._engine.restart_steady(c // self.c._mesh.nconns)
        for p in range(self.c.size):
            if p != self.c.rank:
                self.c._engine.set_endpoint(c * self.c.size + p, None)
        self.c._mesh.close_channel(c)

    def start_guard(self):
        if self.c._failover:
            threading.Thread(target=_guard, args=(weakref.ref(self.c),), name="nezha-guard",
                             daemon=True).start()

    def help_idle(self, req, flags=0):
        """This rank is in no collective (idle, in a send/recv, or closing): vote as what it
        is, and take part in the re-run a rank behind needs. True if a rank was behind."""
        table, _ = self._vote(req, self.c._st.ncoll, 0, flags)
        k = min(c for c, _, _ in table)
        if k < self.c._st.ncoll:
            self._help_behind(table, k, req)
        return k < self.c._st.ncoll

    def p2p_voted(self, req, s, plan, rc, planfn, src):
        """A send/recv stopped for a rank left behind: help it, then go on; on a channel the
        vote did not cut, if none of its bytes had moved (the peer plans its side after the
        vote, so it avoids the cut channel too)."""
        while rc == _eng.ERR_VOTE:
            self.help_idle(req)
            chan = plan.slices[0][0]
            if chan not in self.cut:
                self.c._arm(False, None, False)
                rc = self.c._progress(req, s, _eng.ERR_OK, False)
                continue
            if s.moved():
                raise RailSystemError(
                    f"nezha: rank {self.c.rank}: rail {self.c._mesh.chan_name(chan)} failed during "
                    f"{req.name} #{self._num(req.seq)}: a send/recv cannot move to another rail "
                    "once its bytes have started", rail=self.c._mesh.chan_name(chan))
            plan = planfn()
            s, _ = self.c._schedule(req, plan, src)
            req.schedule = s
            rc = self.c._run(req, s, False, plan)
        return s

    def settle(self):
        """Before closing: the last lazy collective may still be needed by a rank that could
        not finish it. Vote (as a rank in no collective) until no one is behind."""
        if not self.c._failover or self.c._st.pending is None:
            return
        req = types.SimpleNamespace(name="close", seq=self.c._st.ncoll, schedule=None)
        while self.help_idle(req, _eng.VOTE_CLOSING):
            pass

    def _mark_dead(self, chans, req, failed_here, heard_now=0):
        why = {c: (w, p) for c, w, p, _, _ in failed_here}
        for c in chans:
            if not self.c.planner.alive[c]:
                continue
            self.c.planner.alive[c] = False
            if c in self.cut:  # closed and reported already
                self.cut.discard(c)
                continue
            self._close_fds(c)
            name = self.c._mesh.chan_name(c)
            w, p = why.get(c, ("reported by another rank", None))
            self.c._events.append({"event": "down", "channel": name, "collective": req.name,
                                 "seq": self._num(req.seq), "why": w, "peer": p,
                                 "time": time.time(),
                                 "detect_ms": next((ns / 1e6 for cc, _, _, _, ns in failed_here
                                                    if cc == c), None),
                                 "gen": self.chan_gen.get(c, 0)})
            log.warn("HEALTH", f"rail {name} failed during {req.name} #{self._num(req.seq)} "
                     f"({w}{'' if p is None else f' with rank {p}'}); rerouting to "
                     f"{[self.c._mesh.chan_name(x) for x, a in enumerate(self.c.planner.alive) if a]}")
        self._alive_changed()
        if not any(self.c.planner.alive) and heard_now:
            # every rank decides this from the same vote table
            self._readmit(heard_now, req, "at once: it was the last rail left")
        if not any(self.c.planner.alive):
            raise RailSystemError(
                f"nezha: rank {self.c.rank}: every rail failed during {req.name} #"
                f"{self._num(req.seq)} ("
                f"{', '.join(self.c._mesh.chan_name(c) for c in range(self.c.nchan))}): "
                "no path is left to the other ranks")

    def _readmit(self, iheard, req, how="cold"):
        """Reconnect dead channels whose rail every rank has heard well for a while."""
        back = [c for c, alive in enumerate(self.c.planner.alive)
                if not alive and iheard >> (c // self.c._mesh.nconns) & 1]
        if not back:
            return
        self.generation += 1
        socks = self.c._mesh.reconnect(back, self.generation, self.c._boot.secret)
        for (peer, c), sock in socks.items():
            self.c._engine.set_endpoint(c * self.c.size + peer, self.c._mesh.tcp_endpoint(sock, peer, c))
        for c in back:
            self.c.planner.alive[c] = True
            self.chan_gen[c] = self.generation
            name = self.c._mesh.chan_name(c)
            down = next((e for e in reversed(self.c._events)
                         if e["event"] == "down" and e["channel"] == name), None)
            self.c._events.append({"event": "up", "channel": name, "seq": self._num(req.seq),
                                 "time": time.time(), "gen": self.generation,
                                 "down_s": None if down is None else time.time() - down["time"]})
            log.warn("HEALTH", f"rail {name} answers again: re-admitted ({how}) after "
                     f"{req.name} #{self._num(req.seq)}")
        self._alive_changed()

    def _alive_changed(self):
        """The planner's channels changed: no cached plan holds, the model plans on the live
        ones, and the engine's silence rules know which rails are left."""
        self.c._forget_plans()
        self.c.planner.model.set_channels(self.c.planner.alive)
        self.c._engine.set_live_rails(self._live_rails())

    def _vote_error(self, rc, req):
        _, peer, eno, _ = self.c._engine.error()
        name = f"{req.name} #{self._num(req.seq)}"
        who = f"rank {peer} ({self.c._mesh.peer_name(peer)})" if peer >= 0 else "a rank"
        if rc == _eng.ERR_CLOSED:
            msg = self.c._pending_abort(peer, 0.3) if peer >= 0 else None
            if msg is not None:
                from nezha.diagnose import _remote_error
                return _remote_error(msg, peer, self.c._mesh.peer_name(peer), req,
                                     base=self.c._st.base)
            return PeerError(f"nezha: rank {self.c.rank}: {who} closed every connection during "
                             f"{name}: that process exited or died", peer=peer)
        if rc == _eng.ERR_TIMEOUT and eno == 113:  # EHOSTUNREACH: silent on every rail
            return PeerUnreachable(
                f"nezha: rank {self.c.rank}: {who} is unreachable on every rail "
                f"({', '.join(r.name for r in self.c._mesh.rails)}) during {name}: the last "
                "rail to it failed", peer=peer)
        return NezhaTimeout(f"nezha: rank {self.c.rank}: {name}: {who} did not report how it "
                            f"finished within {self.c.timeout:g} s (NEZHA_TIMEOUT)")
