"""Running queued operations in order: planning, schedule cache, the engine, the model sync.

Requests run one at a time in the order they were posted (the same order on every rank).
Whoever finds the queue idle runs it: a blocking call in its own thread (no hand-off), a
non-blocking one through the progress thread.

With failover, a re-run needs an in-place collective's input as it was. Posted behind others,
its copy (the failover snapshot) is taken in the caller's thread (_presnap), overlapping the
collectives still running; with nothing ahead it runs out of place into a spare instead
(_out_of_place), its result copied back after the vote. Neither delays the rails at its start.
"""
import os
import threading
import time
import types

import numpy as np

from nezha import log
from nezha._core import engine as _eng
from nezha.buffers import address, as_array
from nezha.costmodel import GLOBAL_MIN_BYTES
from nezha.errors import RailSystemError
from nezha.failover import LAZY_MAX_BYTES
from nezha.planner import ALGO_HOST, ALGO_INA, ALGO_RD, Plan
from nezha.request import Request
from nezha.algorithms import slices
from nezha.types import DType, ReduceOp, dtype_from_numpy

PRESNAP_POOL_BYTES = 256 << 20  # failover snapshots taken at post time, all held at once


class Executor:
    """Mixin of Communicator: the queue, the progress thread and one request's run."""

    def _submit(self, name, coll, dt, op, count, root, plan, build, result, keep, seq=None,
                ckey=None, src=None, inplace=False, retarget=None, fast=None):
        self._check_usable()
        if seq is None:
            seq = self._st.seq
            self._st.seq += 1
        req = Request(self, name, seq, result)
        req.keep = keep
        req.spec = (coll, int(dt), int(op), count, root, plan, build, ckey, src, inplace)
        req.retarget = retarget
        req.fast = fast
        if self._failover:
            spans = self._presnap(req, coll, src, inplace, keep)
            with self._st.lock:
                self._writing[req] = req.spans = spans  # until Request._finish (_forget)
                self._st.queue.append(req)
            return req
        with self._st.lock:
            self._st.queue.append(req)
        return req

    def _presnap(self, req, coll, src, inplace, keep):
        """Before req is queued, in the caller's thread: the failover snapshot of an
        in-place input (what a re-run of its unfinished slices reads; _execute took it at
        the start of the run, with the rails idle: 11.5-14.8 ms per DDP step, issue 14).
        Not for a small one (lazy: it keeps a copy of its own past the call, made at the
        run), and not while an earlier unfinished request may write into the buffer (its
        input as of the run is not there yet: then it is taken at the run, as before).
        The buffers of a posted request are not the caller's to change until it finished,
        so the copy is the input as of the run. A lent buffer (Spares.lend, at most
        PRESNAP_POOL_BYTES in all); none left: at the run, too. Nor when nothing runs or
        waits ahead of req and it can run out of place (_out_of_place): the copy would
        overlap nothing. Returns the address spans req may write into, for the requests
        posted after it."""
        spans = [(address(b), address(b) + b.nbytes) for b in keep
                 if b is not None and b.nbytes and (inplace or b is not src)]
        if not inplace or src is None or src.nbytes <= LAZY_MAX_BYTES or coll == _eng.COLL_SENDRECV:
            return spans
        lo, hi = address(src), address(src) + src.nbytes
        with self._st.lock:
            idle = not self._st.queue and not self._st.busy
            clash = any(a < hi and lo < b for sp in self._writing.values() for a, b in sp)
        if clash or idle and req.retarget is not None:
            return spans
        buf = self._spares.lend("snap", src.nbytes)
        if buf is not None:
            snap = buf[:src.nbytes].view(src.dtype).reshape(src.shape)
            np.copyto(snap, src)
            req.presnap = (buf, snap)
            self._nsnaps[0] += 1
        return spans

    def _forget(self, req):
        """req finished (Request._finish): it writes into nothing any more, and its
        snapshot's buffer goes back to the pool. Nothing of it stays behind."""
        with self._st.lock:
            self._writing.pop(req, None)
        pre, req.presnap = req.presnap, None
        if pre is not None:
            self._spares.give_back("snap", pre[0])

    def _run_blocking(self, req):
        """Blocking call: run the queue in this thread unless someone already does."""
        with self._st.lock:
            mine = not self._st.busy
            self._st.busy = True if mine else self._st.busy
        if mine:
            self._drain()
        return req.wait()

    def _kick(self, req):
        """Non-blocking call: make sure the progress thread runs the queue."""
        with self._st.cv:
            if self._st.worker is None:
                self._st.worker = threading.Thread(target=self._work, name="nezha-progress",
                                                daemon=True)
                self._st.worker.start()
            self._st.cv.notify_all()
        return req

    def _work(self):
        self._progress_sched()
        while True:
            with self._st.cv:
                while not self._st.closed and (not self._st.queue or self._st.busy):
                    self._st.cv.wait()
                if self._st.closed and not self._st.queue:
                    return
                self._st.busy = True
            self._drain()

    def _progress_sched(self):
        """NEZHA_PROGRESS_SCHED fifo (auto where allowed): this (the progress) thread
        real-time, without spin. With more busy threads than cores (4 ranks on 2 cores,
        DDP's backward in each) an ordinary progress thread waits for a core each time data
        arrives, every rank's wait stalls the ring, and DDP's buckets posted during backward
        ran at half the rails' rate (issue 14: 100-117 ms for a 4 MiB bucket against 63 ms;
        real-time: 55-62). It sleeps in poll when nothing moves, so it takes no core idle."""
        mode = self.config["PROGRESS_SCHED"]
        if mode == "other":
            return
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))  # 0: this thread
        except OSError as exc:
            why = (f"not allowed ({exc.strerror}); the progress thread keeps the default "
                   "policy. It needs CAP_SYS_NICE or RLIMIT_RTPRIO >= 1 (ulimit -r)")
            # asked for by name: say so; auto: the default policy is what the user has
            say = log.warn if mode == "fifo" else log.info
            say("INIT", f"NEZHA_PROGRESS_SCHED={mode}: {why}")
            return
        # the health thread above it: ranks' real-time progress threads crowding the
        # cores would starve its heartbeats, and a working rail be declared dead
        err = self._engine.health_realtime(2)
        log.info("INIT", f"NEZHA_PROGRESS_SCHED={mode}: the progress thread is SCHED_FIFO 1, "
                 + ("the health thread 2" if not err else
                    f"the health thread stays ordinary ({os.strerror(err)})"))
        _eng.set_no_spin(True)

    def _drain(self, req=None):
        """Run the queue (from req, taken from it already) until it is empty, then give
        busy up (RunState.take, which the fast path ends with too)."""
        while True:
            if req is None:
                req = self._st.take()
                if req is None:
                    return
            try:
                self._execute(req)
                req._finish()
            except BaseException as exc:
                req._finish(exc)
                self._fail(exc)
            req = None

    def _schedule(self, req, plan, src):
        """A schedule for plan (one slice after another) and each slice's op range."""
        coll, dt, op, count, root, _, build, _, _, _ = req.spec
        s = _eng.Schedule(self.rank, self.size, self.nchan, coll, req.seq & 0xFFFFFFFF, dt, op,
                          count, root, plan.algo, plan.hash)
        ranges = []
        for chan, off, cnt in plan.slices:
            start = s.nops
            build(s, plan.algo, chan, off, cnt, src)
            ranges.append((start, s.nops))
        return s, ranges

    def _execute(self, req):
        if req.host is not None:
            return self._execute_host(req)
        if self._host is not None and req.seq < 0x80000000 and req.spec[0] != _eng.COLL_SENDRECV:
            # a rank waiting for this one in the host area sees a mismatch at once
            coll, dt, op, count = req.spec[:4]
            self._host.area.announce(req.seq, coll, count, dt, op)
        if req.ina is not None:
            return self._execute_offload(req)
        coll, dt, op, count, root, planfn, build, ckey, src, inplace = req.spec
        voting = self._failover and coll != _eng.COLL_SENDRECV
        spare = self._out_of_place(req, voting)
        if spare is not None and ckey is not None:
            ckey = ckey + (address(spare),)  # it moves when it grows
        # Same call on the same buffers as before, and the model has not changed since:
        # run the schedule built then (small collectives are dominated by this cost).
        # (a small broadcast's plan also depends on whether the last collective was a lazy
        # tree: RunState.prev_early)
        key = None if ckey is None else (coll, dt, op, count, root, ckey, self.planner.version,
                                         self._st.prev_early)
        hit = self._cache.get(key) if key is not None else None
        if hit is not None:
            s, plan, ranges, lazy = hit
            s.reset(req.seq & 0xFFFFFFFF)
        else:
            plan = planfn()
            s, ranges = self._schedule(req, plan, src)
            # planner changes that affect laziness (dead channels) clear the cache
            lazy = voting and self._fo.lazy_ok(req, plan, src)
            if log.enabled("INFO", "PLAN"):
                log.info("PLAN", f"{req.name} of {count} x {DType(dt).name.lower()}: {plan}")
            if key is not None:
                if len(self._cache) >= 64:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[key] = (s, plan, ranges, lazy)
        req.schedule, req.plan = s, plan
        if log.enabled("INFO", "COLL"):
            log.info("COLL", f"{req.name} #{req.seq - self._st.base} count {count} "
                     f"{DType(dt).name.lower()} root {root} {plan}")
        # an in-place input is overwritten by partial sums, and a lazy collective may be
        # re-run after it returned: keep the input for that
        snap = src
        if voting and src is not None and (inplace or lazy):
            pre = None if req.presnap is None else req.presnap[1]  # taken when posted
            if lazy and pre is None and self._spares.is_zeros(src):
                snap = src  # the zeros a broadcast's other ranks add: never written
            elif lazy:  # kept past the call (a rank behind may need it): its own copy
                snap = (src if pre is None else pre).copy()
            elif pre is not None:  # needed only until the vote
                snap = pre
            elif spare is not None:  # run out of place: the input stays as it was
                self._nsnaps[2] += 1
            else:     # one buffer, reused (no page faults)
                snap = self._spare("snap", src.nbytes).view(src.dtype).reshape(src.shape)
                np.copyto(snap, src)
                self._nsnaps[1] += req.spans is not None  # a posted call's (not a sync's)
        rc = self._run(req, s, voting, plan, lazy)
        if rc == _eng.ERR_VOTE and not voting:  # a send/recv, stopped for a rank behind
            s = self._fo.p2p_voted(req, s, plan, rc, planfn, src)
        final = self._conclude(req, s, plan, ranges, lazy, voting, snap, rc)
        if spare is not None:  # the vote's re-runs wrote there too; count: INA took the rest
            nbytes = count * src.itemsize
            np.copyto(src.reshape(-1).view(np.uint8)[:nbytes], spare[:nbytes])
        self._feed_model(plan, count, lazy)
        fast, req.fast = req.fast, None
        if (fast is not None and key is not None and final is plan
                and not req.offloaded and (lazy or not voting)
                and not self._feeds(plan, count, lazy)
                and not log.enabled("INFO", "COLL")):
            # next time on these buffers: the fast path (fastpath.pxi). What it keeps of
            # this call must not hold the buffers (the user may drop them): no src, and
            # builds and retargets that hold addresses only. It keys on the user's objects'
            # own element types (a bfloat16 tensor is not its uint16 view).
            sendbuf, recvbuf, a, out, fsrc, fop, wout, keep = fast
            tmpl = types.SimpleNamespace(name=req.name, spec=req.spec[:8] + (None, inplace),
                                         retarget=req.retarget)
            self._fast.put(coll, sendbuf, recvbuf, a, out, fsrc, fop, root, wout, s, plan,
                           ranges, lazy, voting, tmpl, keep, self._spares.is_zeros(fsrc))

    def _out_of_place(self, req, voting):
        """The spare an in-place collective with failover runs into, out of place, or None.
        Its input then stays as it was, for a re-run (agree's re-runs use the retargeted
        build too), and the result is copied back after the vote: no snapshot copy before
        the run, where every rank waited for the slowest one's (the first call's took the
        spare's page faults: 11-41 ms against 3-7 on 16 MiB, issue 15). Not when a
        snapshot was taken when posted (it overlapped the runs ahead), and not for a
        lazy (small) one, which keeps a copy of its own."""
        src = req.spec[8]
        if (not voting or not req.spec[9] or req.presnap is not None or req.retarget is None
                or src is None or src.nbytes <= LAZY_MAX_BYTES):
            return None
        spare = self._spare("snap", src.nbytes)
        req.spec = req.spec[:6] + (req.retarget(spare),) + req.spec[7:]
        return spare

    def _execute_host(self, req):
        """An allreduce of ranks that all share this host, in the host area
        (transports/hostcoll.py): no schedule, no rails, no vote (failover is off there)."""
        a, out, dt, op = req.host
        req.host = None
        req.offloaded = True
        plan = Plan([(-1, 0, a.size)], ALGO_HOST, None, a.itemsize)
        req.plan = plan
        if log.enabled("INFO", "COLL"):
            log.info("COLL", f"{req.name} #{req.seq - self._st.base} count {a.size} "
                     f"{DType(int(dt)).name.lower()} in the host area")
        self._host.allreduce(a, out, dt, op, req.seq, self.size, self._st.timeout)
        self._st.ran(plan, plan, req.seq, req, False, False, None)
        fast, req.fast = req.fast, None
        if fast is not None and not log.enabled("INFO", "COLL"):
            # next time on these buffers: the fast path (FastPath.put_host)
            sendbuf, recvbuf, fa, fout, _, fop, wout, _ = fast
            tmpl = types.SimpleNamespace(name=req.name, spec=req.spec[:8] + (None, req.spec[9]))
            self._fast.put_host(sendbuf, recvbuf, fa, fout, fop, wout, plan, tmpl, self._host,
                                int(dt), int(op), float(self.size) if op == ReduceOp.AVG else 0.0)

    def _host_rest(self, tmpl, seq, result, err):
        """A fast-path allreduce in the host area (FastPath._call_host) failed: raise err
        here as the executor would (telling the other ranks), then give the queue back."""
        def settle():
            raise err
        return self._settle_fast(settle, result)

    def _execute_offload(self, req):
        """A collective the INA rail may share (nezha/rails/ina/offload.py): decided here, at
        run time, where every rank has the same agreed rates (not at the call: non-blocking
        calls run ahead of the runs). The TCP rails do [0, k) (of every block, for a
        reduce_scatter or allgather) while INA does [k, n)."""
        kind, a, out, dt, op, algo = req.ina
        req.ina = None
        off = self._ina
        coll, sdt, sop, n, root, _, build, ckey, src, inplace = req.spec
        es = a.itemsize
        if kind == "allreduce" and off.small_route(n, es, dt, op):
            return self._execute_ina_small(req, a, out, dt, op)
        blocks = 1 if kind == "allreduce" else self.size
        k = off.split(kind, n, blocks, es, dt, op)
        if k is None:
            off.eligible(kind, n, blocks, es, dt, op)
            # one the rail would take when alive stays off the fast path: its calls must come
            # back here, where they count toward re-admitting the rail
            req.offloaded = off.wants(kind, n, blocks, es, dt, op) or (
                kind == "allreduce" and off.small_wanted(n, es, dt, op))
            return self._execute(req)
        req.offloaded = True
        if kind == "allreduce":
            planfn = lambda: self.planner.allreduce(k, es)  # noqa: E731
        else:  # the build's block stride stays n: the plan covers [0, k) of each block
            planfn = lambda: self.planner.blocks(kind, k, es, algo)  # noqa: E731
        req.spec = (coll, sdt, sop, k, root, planfn, build, ckey, src, inplace)
        job = off.start(kind, a, out, k, n, dt, op)
        t0 = time.perf_counter_ns()
        try:
            self._execute(req)
        except BaseException:
            off.wait(job)  # its thread writes into out: never past the call's return
            raise
        off.finish(job, out, time.perf_counter_ns() - t0,
                   lambda lo, hi: self._ina_rerun(kind, a, out, n, lo, hi, op, algo))

    def _execute_ina_small(self, req, a, out, dt, op):
        """A small allreduce whole on the INA service: one datagram up and one down per
        rank, two hops. With failover it is lazy (failover.py): no closing vote, and it keeps
        a copy of its result, which a rank that got none is sent (Failover.ina_small_failed),
        so every rank holds the same bits. Without failover a lost service is an error here.
        Once it went well, the next call on the same buffers runs on the fast path
        (FastPath.put_ina), which comes back to _ina_small_rest if it fails."""
        req.offloaded = True  # its Python is here, not in _execute's fast-path entry
        n, es = a.size, a.itemsize
        inplace = req.spec[9]
        plan = Plan([(-1, 0, n)], ALGO_INA, None, es)
        req.schedule, req.plan = None, plan
        voting = self._failover
        if not inplace:
            np.copyto(out, a)
        # a single datagram's result is written into out only when it arrived whole: after
        # a failure out still holds the input (the re-run's)
        err = self._ina.run_small(out, dt, op)
        if err is not None:
            return self._ina_small_failed(req, plan, out, op, err)
        self._st.ran(plan, plan, req.seq, req, voting, voting, out.copy() if voting else None)
        fast, req.fast = req.fast, None
        if fast is not None and not log.enabled("INFO", "COLL"):
            sendbuf, recvbuf, fa, fout, _, fop, wout, _ = fast
            tmpl = types.SimpleNamespace(name=req.name, spec=req.spec[:8] + (None, inplace),
                                         retarget=None)
            ina = self._ina
            self._fast.put_ina(sendbuf, recvbuf, fa, fout, fop, wout, plan, voting, tmpl, ina,
                               ina.client._c, int(dt), int(op), ina.client.timeout)

    def _ina_small_failed(self, req, plan, out, op, err):
        """This rank got no result of its small INA allreduce (out still holds its input)."""
        self._ina.small_failed(err)
        if not self._failover:
            raise RailSystemError(
                f"nezha: rank {self.rank}: the INA rail at {self._ina.address} failed during "
                f"{req.name} #{req.seq - self._st.base}, which ran whole on it; without failover "
                f"(one TCP rail, or NEZHA_FAILOVER=n) that is an error (NEZHA_INA_SMALL=off keeps "
                f"small allreduces on TCP): {err}") from err
        self._fo.ina_small_failed(req, plan, out, out.copy(), op)

    def _ina_small_rest(self, tmpl, seq, plan, result, err):
        """A fast-path small INA allreduce (FastPath._call_ina) got no result: settle it as
        _execute_ina_small does, then run what was queued meanwhile."""
        req = Request(self, tmpl.name, seq, result)
        req.spec, req.schedule, req.plan = tmpl.spec, None, plan

        def settle():
            out, _ = as_array(result, "recvbuf", True)
            self._ina_small_failed(req, plan, out, ReduceOp(tmpl.spec[2]), err)
        return self._settle_fast(settle, result)

    def _settle_fast(self, settle, result):
        """Finish a fast-path call in the executor (settle()), then give the queue back and
        run what was queued meanwhile (also once broken)."""
        try:
            settle()
        except BaseException as exc:
            self._fail(exc)
            raise
        finally:
            self._drain()
        return result

    def _ina_rerun(self, kind, a, out, n, lo, hi, op, algo):
        """What the INA rail left of [lo, hi) (of every block), over the TCP rails."""
        if kind == "allreduce":
            self._internal_allreduce(out[lo:hi], "ina re-run", op)
        else:
            self._internal_blocks(kind, a, out, n, lo, hi, op, algo)

    def _internal_blocks(self, kind, a, out, block, lo, hi, op, algo):
        """Elements [lo, hi) of every block of a reduce_scatter (a: size blocks, out: this
        rank's block) or an allgather (a: this rank's block, out: size blocks) over the TCP
        rails, inside a run: the INA rail's re-runs. A regular collective (it votes and
        reroutes like any other), numbered apart from the caller's, never cached."""
        es, dt = a.itemsize, dtype_from_numpy(a.dtype)
        req = self._internal_request(f"ina re-run ({kind})", out)
        dst, hosts, size = address(out), self._hosts, self.size

        if kind == "reduce_scatter":
            coll = _eng.COLL_REDUCE_SCATTER

            def build(s, algo, chan, off, cnt, src):
                slices.reduce_scatter(s, algo, chan, dst, address(src), block, lo + off, cnt,
                                      es, size, hosts, self.planner.rail_owners(chan, kind))
                if op == ReduceOp.AVG:
                    s.add_avg(dst + (lo + off) * es, cnt, float(size))
        else:
            coll, op = _eng.COLL_ALLGATHER, 0

            def build(s, algo, chan, off, cnt, src):
                slices.allgather(s, algo, chan, dst, address(src), block, lo + off, cnt, hosts,
                                 self.planner.rail_owners(chan, kind))

        req.spec = (coll, int(dt), int(op), hi - lo, -1,
                    lambda: self.planner.blocks(kind, hi - lo, es, algo), build, None, a, False)
        self._run_internal(req)

    def _internal_allreduce(self, arr, name, op=ReduceOp.SUM):
        """Allreduce arr (contiguous numpy) in place over the TCP rails, inside a run: the
        INA rail's agreements and re-runs. A regular collective (it votes and reroutes like
        any other), numbered apart from the caller's, never cached."""
        es, dt = arr.itemsize, dtype_from_numpy(arr.dtype)
        req = self._internal_request(name, arr)
        base = address(arr)
        hier, chunk = self._hier, self._hier_chunk

        def build(s, algo, chan, off, cnt, src):
            o = base + off * es
            slices.allreduce(s, algo, chan, o, address(src) + off * es, cnt, es, hier, chunk,
                             self.planner.rail_owners(chan))
            if op == ReduceOp.AVG:
                s.add_avg(o, cnt, float(self.size))

        req.spec = (_eng.COLL_ALLREDUCE, int(dt), int(op), arr.size, -1,
                    lambda: self.planner.allreduce(arr.size, es), build, None, arr, True)
        self._run_internal(req)

    def _internal_request(self, name, result):
        """A Request for an internal collective, numbered apart from the caller's."""
        self._nint = getattr(self, "_nint", 0) + 1
        return Request(self, name, 0xC0000000 | (self._nint & 0x3FFFFFFF), result)

    def _run_internal(self, req):
        """Run an internal collective inside the caller's run (stats keep the caller's plan)."""
        last = self._st.last_plan
        self._execute(req)
        self._st.last_plan = last

    def _conclude(self, req, s, plan, ranges, lazy, voting, snap, rc):
        """After the run of a collective: agree on the outcome (unless it was lazy and
        went well), count it, keep what a rank behind may need. Returns the final plan."""
        final = plan
        if voting and not (lazy and rc == _eng.ERR_OK):
            final = self._fo.agree(req, s, plan, ranges, snap, rc, lazy)
        else:
            self._engine.finish(s)  # the fast path does this in its nogil block
        if req.spec[0] != _eng.COLL_SENDRECV:
            self._st.ran(plan, final, req.seq, req, lazy, voting, snap)
        else:
            self._st.last_plan = plan
        return final

    def _fast_rest(self, tmpl, seq, s, plan, ranges, lazy, voting, snap, rc, result):
        """A fast-path run (fastpath.pxi) stopped short of done (a control frame, a failure,
        a vote): go on with it as _execute would, then run what was queued meanwhile."""
        req = Request(self, tmpl.name, seq, result)
        req.spec, req.retarget, req.schedule, req.plan = tmpl.spec, tmpl.retarget, s, plan

        def settle():
            self._conclude(req, s, plan, ranges, lazy, voting, snap,
                           self._progress(req, s, rc, voting))
        return self._settle_fast(settle, result)

    def _forget_plans(self):
        """The planner's channels changed: no cached schedule (slow or fast path) holds."""
        self._cache.clear()
        self._fast.clear()

    def _feeds(self, plan, count, lazy=False):
        # Only what can teach the model something: striped payloads, or large ones (one
        # channel's rate). One rail never records, so it costs nothing extra. Not a lazy
        # striped one (small): it splits by the prior (a cold bucket), and recording would
        # keep it off the fast path (the 4 x 2 lab's 64 KiB: CPU-bound, session 19)
        return plan.key is not None and self.nchan > 1 and (
            (len(plan.slices) > 1 and not lazy) or count * plan.esize >= GLOBAL_MIN_BYTES)

    def _feed_model(self, plan, count, lazy=False):
        if not self._feeds(plan, count, lazy):
            return
        times = self._engine.channel_times_ns()
        nbytes = [0] * self.nchan
        for chan, _, cnt in plan.slices:
            nbytes[chan] += cnt * plan.esize
        self.planner.model.record(plan.key, nbytes, [t for t, _ in times])
        if self.planner.model.sync_due():
            self._sync_model()

    def _run(self, req, s, failover=False, plan=None, lazy=False):
        """Drive schedule s to the end; raise the right error if it fails. With failover a
        run may end with channels set aside (ERR_CHANFAIL) or stop to join a peer's vote
        (ERR_VOTE): the vote decides what next."""
        self._arm(failover, plan, lazy)
        return self._progress(req, s, self._engine.start(s), failover)

    def _arm(self, failover, plan, lazy):
        # send/recv do not fail over, but stop for a rank left behind (failover.py); the
        # fast path arms through the same code (fastpath.pxi)
        self._fast.arm(failover, plan.chans if failover and plan is not None else None, lazy)

    def _progress(self, req, s, rc, failover):
        eng = self._engine
        deadline = _eng.now_ns() + int(min(self.timeout, 1e9) * 1e9)
        while rc in (_eng.ERR_OK, _eng.ERR_CTRL):
            if rc == _eng.ERR_CTRL:
                self._on_ctrl(req)
            rc = eng.progress(s, deadline)
            if rc == _eng.ERR_OK:
                return rc
        if rc == _eng.ERR_VOTE or (failover and rc == _eng.ERR_CHANFAIL):
            return rc
        raise self._engine_error(rc, req)

    def _sync_model(self):
        """Sum every rank's channel timings so that all update the same cost model.

        Runs at the same point of the collective sequence on every rank (the model decides
        from the collectives it recorded, which are the same everywhere)."""
        model = self.planner.model
        keys = model.sync_keys()
        vec = model.sync_vector(keys)
        seq = 0x80000000 | (model.syncs & 0x7FFFFFFF)
        req = Request(self, "model sync", seq, vec)
        es = vec.itemsize

        def build(s, algo, chan, off, cnt, src):
            _eng.rd_allreduce(s, chan, address(vec) + off * es, address(src) + off * es, cnt)

        # a regular collective (it votes and reroutes like any other), never cached or recorded
        req.spec = (_eng.COLL_ALLREDUCE, int(DType.FLOAT64), int(ReduceOp.SUM), vec.size, -1,
                    lambda: Plan([(self.planner.best_channel(), 0, vec.size)], ALGO_RD),
                    build, None, vec, True)
        last = self._st.last_plan
        self._execute(req)
        self._st.last_plan = last  # stats() shows the caller's last collective, not this one
        model.apply(keys, vec, self.size)
