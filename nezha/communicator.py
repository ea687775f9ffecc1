"""Communicator: the user's object. Checks arguments, numbers collectives, runs them."""
import collections
import errno as _errno
import math
import os
import select
import struct
import threading
import time

import numpy as np

from nezha import log
from nezha._core import engine as _eng
from nezha.bootstrap import discover
from nezha.buffers import address, as_array
from nezha.config import Config
from nezha.errors import (CollectiveMismatch, InvalidUsageError, NezhaError, NezhaTimeout,
                          PeerError, RailSystemError)
from nezha.costmodel import GLOBAL_MIN_BYTES
from nezha.mesh import Mesh
from nezha.planner import ALGO_DIRECT, ALGO_NAMES, ALGO_RD, ALGO_TREE, Plan, Planner
from nezha.rails.tcp.device import TcpRail
from nezha.rails.tcp.ifaces import select_interfaces
from nezha.request import Request
from nezha.types import DType, ReduceOp, check_op_dtype

COLL_NAMES = {_eng.COLL_ALLREDUCE: "allreduce", _eng.COLL_BROADCAST: "broadcast",
              _eng.COLL_REDUCE: "reduce", _eng.COLL_ALLGATHER: "allgather",
              _eng.COLL_REDUCE_SCATTER: "reduce_scatter", _eng.COLL_ALLTOALL: "alltoall",
              _eng.COLL_BARRIER: "barrier", _eng.COLL_SENDRECV: "send/recv"}

# (dtype -> {op: ReduceOp}) for the ops each dtype allows; the slow path explains refusals.
_OPS_OK = {dt: {o: o for o in ReduceOp if not (
    (o in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dt.is_float)
    or (o == ReduceOp.AVG and not dt.is_float))} for dt in DType}
for _d in _OPS_OK.values():
    _d.update({int(o): o for o in list(_d)})

# Control message: magic, kind, length, then UTF-8 text.
_CTRL = struct.Struct("<4sII")
_ABORT = b"NZAB"
_KIND_MISMATCH, _KIND_PEER, _KIND_TIMEOUT, _KIND_OTHER = 1, 2, 3, 4


class Communicator:
    """A group of ranks that run collectives over every configured rail.

    Parameters
    ----------
    mpi_comm : mpi4py communicator, optional
        Used only for rank discovery and the endpoint exchange. Default: COMM_WORLD under
        an MPI launcher, else the torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR,
        MASTER_PORT), else a single rank.
    rails : str or list of str, optional
        Interfaces to use, in NEZHA_SOCKET_IFNAME syntax (overrides that setting).
    timeout : float, optional
        Seconds any operation may take before it raises (default NEZHA_TIMEOUT).
    config : dict, optional
        NEZHA_* settings by name without the prefix ({"SEGMENT_SIZE": "512k"}).
    """

    def __init__(self, mpi_comm=None, *, rails=None, timeout=None, config=None):
        overrides = dict(config or {})
        if rails is not None:
            overrides["SOCKET_IFNAME"] = rails if isinstance(rails, str) else ",".join(rails)
        self.config = cfg = Config.load(overrides or None)
        log.configure(cfg)
        self.timeout = float(timeout if timeout is not None else cfg["TIMEOUT"])
        if not self.timeout > 0:
            raise InvalidUsageError(f"nezha: timeout must be > 0, not {timeout!r}")
        self._closed = False
        self._broken = None
        self._mesh = None
        self._boot = boot = discover(mpi_comm, cfg["CONNECT_TIMEOUT"])
        self.rank, self.size, self.local_rank = boot.rank, boot.size, boot.local_rank
        log.set_rank(self.rank)
        if "tcp" not in cfg["RAILS"]:
            raise InvalidUsageError(f"nezha: NEZHA_RAILS={cfg.raw('RAILS')} leaves no rail: this "
                                    "version builds the tcp rail only (shm, ina and rdma are "
                                    "planned)")
        ifaces = select_interfaces(cfg["SOCKET_IFNAME"])[: cfg["MAX_RAILS"]]
        tcp = [TcpRail(i, cfg["PORT_RANGE"]) for i in ifaces]
        log.info("INIT", f"rank {self.rank}/{self.size} local_rank {self.local_rank} "
                 f"bootstrap {boot.kind} rails {[r.name for r in tcp]}")
        self._mesh = mesh = Mesh(boot, tcp, cfg["SOCKET_NCONNS"], cfg["CONNECT_TIMEOUT"],
                                 int(cfg["SOCKET_BUFFER"]))
        self.nchan = mesh.nchan
        self._ctrl = mesh.ctrl_socks()
        seg = cfg["SEGMENT_SIZE"]
        self._engine = _eng.Engine(mesh.data_fds(), self.size, self.nchan,
                                   [s.fileno() for _, _, s in self._ctrl],
                                   int(seg if seg != math.inf else 1 << 20))
        self._engine.set_spin(cfg["SPIN_US"] * 1e-6)
        self.planner = Planner(self.nchan, cfg, [mesh.chan_name(c) for c in range(self.nchan)])
        self._seq = 0
        self._p2p_out = collections.Counter()
        self._p2p_in = collections.Counter()
        self._cv = threading.Condition()
        self._queue = collections.deque()
        self._busy = False
        self._worker = None
        self._last_plan = None
        self._waiters = 0
        self._cache = {}  # (call, buffers, model version) -> (schedule, plan)

    # ---- properties ------------------------------------------------------------------

    @property
    def rails(self):
        """Names of the rails this communicator uses, in rail order."""
        return [r.name for r in self._mesh.rails] if self._mesh else []

    def stats(self):
        """Bytes per rail (sent, received) since start, the last plan and its channel times."""
        rails = {}
        for i, (sent, recv) in enumerate(self._engine.endpoint_bytes()):
            name = self._mesh.rails[(i // self.size) // self._mesh.nconns].name
            r = rails.setdefault(name, {"bytes_sent": 0, "bytes_recv": 0})
            r["bytes_sent"] += sent
            r["bytes_recv"] += recv
        times = self._engine.channel_times_ns()
        return {"rank": self.rank, "size": self.size, "collectives": self._seq, "rails": rails,
                "last_plan": repr(self._last_plan),
                "model": self.planner.model.summary(),
                "last_channels": [{"channel": self._mesh.chan_name(c), "ns": t, "bytes": b}
                                  for c, (t, b) in enumerate(times)]}

    def algorithm_for(self, nbytes, coll="allreduce"):
        """Name of the algorithm the planner picks for nbytes of a collective."""
        small = nbytes < self.planner.small
        if coll == "allreduce":
            forced = self.planner.algo
            return forced if forced != "auto" else ("rd" if small else "ring")
        if coll == "broadcast":
            return "tree" if small else "chain"
        return "direct" if coll == "alltoall" else "ring"

    # ---- collectives -----------------------------------------------------------------
    # Each _name() checks its arguments (raising before anything is sent) and queues a
    # request with two functions: plan() and build(schedule, plan), run when the request
    # reaches the head of the queue (so that every rank plans it after the same history).

    def allreduce(self, sendbuf, recvbuf=None, op=ReduceOp.SUM):
        """Reduce sendbuf over all ranks into recvbuf (into sendbuf when recvbuf is None)."""
        return self._allreduce(sendbuf, recvbuf, op)._block()

    def iallreduce(self, sendbuf, recvbuf=None, op=ReduceOp.SUM):
        """Non-blocking allreduce; returns a Request."""
        return self._kick(self._allreduce(sendbuf, recvbuf, op))

    def _allreduce(self, sendbuf, recvbuf=None, op=ReduceOp.SUM):
        a, dt = as_array(sendbuf, "sendbuf", writable=recvbuf is None)
        out, result = a, sendbuf
        if recvbuf is not None:
            out, result = self._same_shape(recvbuf, "recvbuf", a, dt), recvbuf
        op = self._op(op, dt)
        es, count = dt.itemsize, a.size

        def build(s, plan):
            for chan, off, cnt in plan.slices:
                o, p = address(out) + off * es, address(a) + off * es
                if plan.algo == ALGO_RD:
                    steps = max(1, self.size.bit_length())
                    s.rd_allreduce(chan, o, p, cnt, np.empty(steps * cnt * es + 1, np.uint8))
                else:
                    s.ring_allreduce(chan, o, p, cnt)
            if op == ReduceOp.AVG:
                s.set_avg(address(out), count, float(self.size))

        return self._submit("allreduce", _eng.COLL_ALLREDUCE, dt, op, count, -1,
                            lambda: self.planner.allreduce(count, es), build, result, [a, out],
                            ckey=(address(a), address(out)))

    def reduce(self, sendbuf, recvbuf=None, op=ReduceOp.SUM, root=0):
        """Reduce sendbuf over all ranks into recvbuf on root (in place when None there)."""
        return self._reduce(sendbuf, recvbuf, op, root)._block()

    def ireduce(self, sendbuf, recvbuf=None, op=ReduceOp.SUM, root=0):
        """Non-blocking reduce; returns a Request."""
        return self._kick(self._reduce(sendbuf, recvbuf, op, root))

    def _reduce(self, sendbuf, recvbuf=None, op=ReduceOp.SUM, root=0):
        root = self._root(root)
        at_root = self.rank == root
        a, dt = as_array(sendbuf, "sendbuf", writable=at_root and recvbuf is None)
        out, result = a, sendbuf
        if at_root and recvbuf is not None:
            out, result = self._same_shape(recvbuf, "recvbuf", a, dt), recvbuf
        elif not at_root:
            out, result = None, None
        op = self._op(op, dt)
        es, count = dt.itemsize, a.size

        def build(s, plan):
            for chan, off, cnt in plan.slices:
                work = None if at_root else np.empty(cnt * es + 1, np.uint8)
                o = address(out) + off * es if at_root else 0
                s.reduce(chan, root, o, address(a) + off * es, cnt, work)
            if op == ReduceOp.AVG and at_root:
                s.set_avg(address(out), count, float(self.size))

        return self._submit("reduce", _eng.COLL_REDUCE, dt, op, count, root,
                            lambda: self.planner.blocks("reduce", count, es), build, result,
                            [a, out], ckey=(address(a), address(out) if at_root else 0))

    def broadcast(self, buf, root=0):
        """Copy buf from root to every rank."""
        return self._broadcast(buf, root)._block()

    def ibroadcast(self, buf, root=0):
        """Non-blocking broadcast; returns a Request."""
        return self._kick(self._broadcast(buf, root))

    def _broadcast(self, buf, root=0):
        root = self._root(root)
        a, dt = as_array(buf, "buf", writable=self.rank != root)
        es, count = dt.itemsize, a.size

        def build(s, plan):
            for chan, off, cnt in plan.slices:
                s.broadcast(chan, root, address(a) + off * es, cnt, plan.algo == ALGO_TREE)

        return self._submit("broadcast", _eng.COLL_BROADCAST, dt, 0, count, root,
                            lambda: self.planner.broadcast(count, es), build, buf, [a],
                            ckey=(address(a),))

    def allgather(self, sendbuf, recvbuf):
        """Gather every rank's sendbuf into recvbuf (rank i's at block i) on all ranks."""
        return self._allgather(sendbuf, recvbuf)._block()

    def iallgather(self, sendbuf, recvbuf):
        """Non-blocking allgather; returns a Request."""
        return self._kick(self._allgather(sendbuf, recvbuf))

    def _allgather(self, sendbuf, recvbuf):
        a, dt = as_array(sendbuf, "sendbuf", writable=False)
        out = self._sized(recvbuf, "recvbuf", dt, a.size * self.size,
                          f"size * len(sendbuf) = {self.size} * {a.size}")
        self._no_overlap(a, out, allow_same=False)
        es, c = dt.itemsize, a.size

        def build(s, plan):
            for chan, off, cnt in plan.slices:
                s.allgather(chan, address(out), address(a), c, off, cnt)

        return self._submit("allgather", _eng.COLL_ALLGATHER, dt, 0, c, -1,
                            lambda: self.planner.blocks("allgather", c, es), build, recvbuf,
                            [a, out], ckey=(address(a), address(out)))

    def reduce_scatter(self, sendbuf, recvbuf, op=ReduceOp.SUM):
        """Reduce sendbuf over all ranks; rank i gets block i of the result in recvbuf."""
        return self._reduce_scatter(sendbuf, recvbuf, op)._block()

    def ireduce_scatter(self, sendbuf, recvbuf, op=ReduceOp.SUM):
        """Non-blocking reduce_scatter; returns a Request."""
        return self._kick(self._reduce_scatter(sendbuf, recvbuf, op))

    def _reduce_scatter(self, sendbuf, recvbuf, op=ReduceOp.SUM):
        a, dt = as_array(sendbuf, "sendbuf", writable=False)
        if a.size % self.size:
            raise ValueError(f"nezha: reduce_scatter: len(sendbuf)={a.size} is not a multiple "
                             f"of the number of ranks {self.size}")
        c = a.size // self.size
        out = self._sized(recvbuf, "recvbuf", dt, c, f"len(sendbuf) / size = {c}")
        self._no_overlap(a, out, allow_same=False)
        op = self._op(op, dt)
        es = dt.itemsize

        def build(s, plan):
            for chan, off, cnt in plan.slices:
                s.reduce_scatter(chan, address(out), address(a), c, off, cnt,
                                 np.empty(self.size * cnt * es + 1, np.uint8))
            if op == ReduceOp.AVG:
                s.set_avg(address(out), c, float(self.size))

        return self._submit("reduce_scatter", _eng.COLL_REDUCE_SCATTER, dt, op, c, -1,
                            lambda: self.planner.blocks("reduce_scatter", c, es), build,
                            recvbuf, [a, out], ckey=(address(a), address(out)))

    def alltoall(self, sendbuf, recvbuf):
        """Block j of sendbuf goes to rank j, which stores it as block i (from rank i)."""
        return self._alltoall(sendbuf, recvbuf)._block()

    def ialltoall(self, sendbuf, recvbuf):
        """Non-blocking alltoall; returns a Request."""
        return self._kick(self._alltoall(sendbuf, recvbuf))

    def _alltoall(self, sendbuf, recvbuf):
        a, dt = as_array(sendbuf, "sendbuf", writable=False)
        if a.size % self.size:
            raise ValueError(f"nezha: alltoall: len(sendbuf)={a.size} is not a multiple of "
                             f"the number of ranks {self.size}")
        out = self._sized(recvbuf, "recvbuf", dt, a.size, "len(sendbuf)")
        self._no_overlap(a, out, allow_same=False)
        c, es = a.size // self.size, dt.itemsize

        def build(s, plan):
            for chan, off, cnt in plan.slices:
                s.alltoall(chan, address(out), address(a), c, off, cnt)

        return self._submit("alltoall", _eng.COLL_ALLTOALL, dt, 0, c, -1,
                            lambda: self.planner.blocks("alltoall", c, es, ALGO_DIRECT), build,
                            recvbuf, [a, out], ckey=(address(a), address(out)))

    def barrier(self):
        """Return only when every rank has entered the barrier."""
        return self._barrier()._block()

    def ibarrier(self):
        """Non-blocking barrier; returns a Request."""
        return self._kick(self._barrier())

    def _barrier(self):
        def build(s, plan):
            s.barrier(plan.slices[0][0])

        return self._submit("barrier", _eng.COLL_BARRIER, DType.UINT8, 0, 0, -1,
                            self.planner.single, build, None, [], ckey=())

    def send(self, buf, dest):
        """Send buf to rank dest (matched in order with dest's recv calls from this rank)."""
        return self._send(buf, dest)._block()

    def isend(self, buf, dest):
        """Non-blocking send; returns a Request."""
        return self._kick(self._send(buf, dest))

    def _send(self, buf, dest):
        a, dt = as_array(buf, "buf", writable=False)
        dest = self._peer(dest, "dest")
        seq = self._p2p_out[dest]
        self._p2p_out[dest] += 1
        # point-to-point stays on channel 0: its order must match the peer's receives
        return self._submit("send", _eng.COLL_SENDRECV, dt, 0, a.size, self.rank,
                            lambda: Plan([(0, 0, a.size)], 0),
                            lambda s, plan: s.send(0, dest, address(a), a.nbytes), None, [a],
                            seq=seq)

    def recv(self, buf, source):
        """Receive into buf from rank source; sizes and dtypes must match the send."""
        return self._recv(buf, source)._block()

    def irecv(self, buf, source):
        """Non-blocking receive; returns a Request."""
        return self._kick(self._recv(buf, source))

    def _recv(self, buf, source):
        a, dt = as_array(buf, "buf", writable=True)
        source = self._peer(source, "source")
        seq = self._p2p_in[source]
        self._p2p_in[source] += 1
        return self._submit("recv", _eng.COLL_SENDRECV, dt, 0, a.size, source,
                            lambda: Plan([(0, 0, a.size)], 0),
                            lambda s, plan: s.recv(0, source, address(a), a.nbytes), buf, [a],
                            seq=seq)

    # ---- argument checks (before anything is sent) -----------------------------------

    def _op(self, op, dt):
        try:
            return _OPS_OK[dt][op]
        except (KeyError, TypeError):
            pass
        try:
            op = ReduceOp(op)
        except ValueError:
            raise ValueError(f"nezha: unknown reduction op {op!r}; use nezha.SUM, PROD, MIN, "
                             "MAX, AVG, BAND, BOR or BXOR") from None
        check_op_dtype(op, dt)
        return op

    def _root(self, root):
        if not isinstance(root, (int, np.integer)) or not 0 <= root < self.size:
            raise ValueError(f"nezha: root={root!r} is not a rank of this communicator "
                             f"(0..{self.size - 1})")
        return int(root)

    def _peer(self, peer, what):
        peer = self._root(peer)
        if peer == self.rank:
            raise ValueError(f"nezha: {what}={peer} is this rank; send/recv need another rank")
        return peer

    def _same_shape(self, buf, name, a, dt):
        out, dt2 = as_array(buf, name, writable=True)
        if dt2 != dt:
            raise TypeError(f"nezha: {name} dtype {dt2.name.lower()} differs from sendbuf "
                            f"dtype {dt.name.lower()}")
        if out.size != a.size:
            raise ValueError(f"nezha: {name} has {out.size} elements, sendbuf {a.size}")
        self._no_overlap(a, out)
        return out

    def _sized(self, buf, name, dt, count, what):
        out, dt2 = as_array(buf, name, writable=True)
        if dt2 != dt:
            raise TypeError(f"nezha: {name} dtype {dt2.name.lower()} differs from sendbuf "
                            f"dtype {dt.name.lower()}")
        if out.size != count:
            raise ValueError(f"nezha: {name} has {out.size} elements; it needs {what} = {count}")
        return out

    @staticmethod
    def _no_overlap(a, out, allow_same=True):
        if np.shares_memory(a, out) and not (allow_same and address(a) == address(out)
                                             and a.nbytes == out.nbytes):
            raise ValueError("nezha: sendbuf and recvbuf overlap; use distinct buffers "
                             "(or recvbuf=None for in place)")

    # ---- execution -------------------------------------------------------------------

    def _submit(self, name, coll, dt, op, count, root, plan, build, result, keep, seq=None,
                ckey=None):
        self._check_usable()
        if seq is None:
            seq = self._seq
            self._seq += 1
        req = Request(self, name, seq, result)
        req.keep = keep
        req.spec = (coll, int(dt), int(op), count, root, plan, build, ckey)
        with self._cv:
            self._queue.append(req)
        return req

    def _run_blocking(self, req):
        """Blocking call: run the queue in this thread unless someone already does."""
        with self._cv:
            mine = not self._busy
            self._busy = True if mine else self._busy
        if mine:
            self._drain()
        return req.wait()

    def _kick(self, req):
        """Non-blocking call: make sure the progress thread runs the queue."""
        with self._cv:
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="nezha-progress",
                                                daemon=True)
                self._worker.start()
            self._cv.notify_all()
        return req

    def _work(self):
        while True:
            with self._cv:
                while not self._closed and (not self._queue or self._busy):
                    self._cv.wait()
                if self._closed and not self._queue:
                    return
                self._busy = True
            self._drain()

    def _drain(self):
        while True:
            with self._cv:
                if not self._queue or self._broken is not None:
                    self._busy = False
                    self._cv.notify_all()
                    return
                req = self._queue.popleft()
            try:
                self._execute(req)
                req._finish()
            except BaseException as exc:
                req._finish(exc)
                self._fail(exc)

    def _execute(self, req):
        coll, dt, op, count, root, planfn, build, ckey = req.spec
        # Same call on the same buffers as before, and the model has not changed since:
        # run the schedule built then (small collectives are dominated by this cost).
        key = None if ckey is None else (coll, dt, op, count, root, ckey, self.planner.version)
        hit = self._cache.get(key) if key is not None else None
        if hit is not None:
            s, plan = hit
            s.reset(req.seq & 0xFFFFFFFF)
        else:
            plan = planfn()
            s = _eng.Schedule(self.rank, self.size, self.nchan, coll, req.seq & 0xFFFFFFFF, dt,
                              op, count, root, plan.algo, plan.hash)
            build(s, plan)
            if key is not None:
                if len(self._cache) >= 64:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[key] = (s, plan)
        req.schedule, req.plan = s, plan
        if log.enabled("INFO", "COLL"):
            log.info("COLL", f"{req.name} #{req.seq} count {count} {DType(dt).name.lower()} "
                     f"root {root} {plan}")
        self._run(req, s)
        self._last_plan = plan
        # Feed the cost model only from what can teach it something: striped payloads, or
        # large ones (one channel's rate). One rail never records (it costs nothing extra).
        if plan.key is not None and self.nchan > 1 and (
                len(plan.slices) > 1 or count * plan.esize >= GLOBAL_MIN_BYTES):
            times = self._engine.channel_times_ns()
            nbytes = [0] * self.nchan
            for chan, _, cnt in plan.slices:
                nbytes[chan] += cnt * plan.esize
            self.planner.model.record(plan.key, nbytes, [t for t, _ in times])
            if self.planner.model.sync_due():
                self._sync_model()

    def _run(self, req, s):
        """Drive schedule s to the end; raise the right error if it fails."""
        eng = self._engine
        rc = eng.start(s)
        deadline = _eng.now_ns() + int(min(self.timeout, 1e9) * 1e9)
        while rc in (_eng.ERR_OK, _eng.ERR_CTRL):
            if rc == _eng.ERR_CTRL:
                self._on_ctrl(eng.error()[3], req)
            rc = eng.progress(s, deadline)
            if rc == _eng.ERR_OK:
                return
        raise self._engine_error(rc, req)

    def _sync_model(self):
        """Sum every rank's channel timings so that all update the same cost model.

        Runs at the same point of the collective sequence on every rank (the model decides
        from the collectives it recorded, which are the same everywhere)."""
        model = self.planner.model
        keys = model.sync_keys()
        vec = model.sync_vector(keys)
        seq = 0x80000000 | (model.syncs & 0x7FFFFFFF)
        req = Request(self, "model sync", seq)
        s = _eng.Schedule(self.rank, self.size, self.nchan, _eng.COLL_ALLREDUCE, seq,
                          int(DType.FLOAT64), int(ReduceOp.SUM), vec.size, -1, ALGO_RD, 0)
        steps = max(1, self.size.bit_length())
        s.rd_allreduce(self.planner.best_channel(), address(vec), address(vec), vec.size,
                       np.empty(steps * vec.nbytes + 1, np.uint8))
        req.schedule = s
        self._run(req, s)
        model.apply(keys, vec, self.size)

    # ---- errors ----------------------------------------------------------------------

    def _check_usable(self):
        if self._broken is not None:
            raise NezhaError(f"nezha: rank {self.rank}: this communicator was closed after an "
                             f"error: {self._broken}")
        if self._closed:
            raise NezhaError("nezha: the communicator is closed")

    def _on_ctrl(self, idx, req):
        """A control socket is readable: an abort from a peer, or its orderly close."""
        peer, ri, sock = self._ctrl[idx]
        msg = _read_ctrl(sock, 1.0)
        if msg is None:
            self._engine.set_ctrl_fd(idx, -1)  # peer finished and closed; not an error by itself
            return
        raise _remote_error(msg, peer, self._mesh.peer_name(peer), req, self._waiting(req))

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

    def _pending_abort(self, peer, wait):
        """An abort message from peer, if one arrives within wait seconds."""
        for p, ri, sock in self._ctrl:
            if p != peer or sock.fileno() < 0:
                continue
            try:
                r, _, _ = select.select([sock], [], [], wait)
            except (OSError, ValueError):
                continue
            if r:
                msg = _read_ctrl(sock, wait)
                if msg is not None:
                    return msg
        return None

    def _engine_error(self, rc, req):
        op_i, ep, eno, _ = self._engine.error()
        s = req.schedule
        name = f"{req.name} #{req.seq}"
        peer, chan = (ep % self.size, ep // self.size) if ep >= 0 else (None, None)
        where = ""
        if peer is not None:
            where = f"rank {peer} ({self._mesh.peer_name(peer)}) on rail {self._mesh.chan_name(chan)}"
        if rc == _eng.ERR_MISMATCH:
            exp, got = s.header_expected(), s.header_received(ep)
            return CollectiveMismatch(
                f"nezha: rank {self.rank}: collective mismatch with {where}: this rank called "
                f"{_describe(exp)}, rank {peer} called {_describe(got)} ({_diff(exp, got)})")
        if rc in (_eng.ERR_CLOSED, _eng.ERR_SOCKET) and peer is not None:
            msg = self._pending_abort(peer, 0.5)
            if msg is not None:
                return _remote_error(msg, peer, self._mesh.peer_name(peer), req,
                                     self._waiting(req))
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
                "different collective (NEZHA_TIMEOUT sets the limit)")
        return NezhaError(f"nezha: rank {self.rank}: {name} failed (engine status {rc}) {where}")

    def _fail(self, exc):
        """After an error: tell every peer why, fail what is queued, close."""
        if self._broken is not None:
            return
        self._broken = exc
        log.warn("COLL", f"{exc}")
        kind = (_KIND_MISMATCH if isinstance(exc, CollectiveMismatch) else
                _KIND_TIMEOUT if isinstance(exc, NezhaTimeout) else
                _KIND_PEER if isinstance(exc, PeerError) else _KIND_OTHER)
        # Relay remote aborts too: a rank that only sees us close must still learn why.
        text = str(exc).encode()[:4000]
        frame = _CTRL.pack(_ABORT, kind, len(text)) + text
        for _, _, sock in self._ctrl:
            try:
                sock.send(frame)
            except OSError:
                pass
        with self._cv:
            pending = list(self._queue)
            self._queue.clear()
        for r in pending:
            r._finish(NezhaError(f"nezha: {r.name} #{r.seq} not run: an earlier operation "
                                 f"failed: {exc}"))
        self._teardown()

    # ---- lifetime --------------------------------------------------------------------

    def close(self):
        """Finish queued operations, then close every connection (idempotent)."""
        if self._closed:
            return
        if self._broken is None and self._mesh is not None:
            with self._cv:
                idle = not self._busy
                if idle and self._queue:
                    self._busy = True
            if idle and self._queue:
                self._drain()
            with self._cv:
                while self._busy:
                    self._cv.wait(0.1)
        self._teardown()

    def _teardown(self):
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._mesh is not None:
            self._mesh.close()
        if self._boot is not None:
            self._boot.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if not self._closed:
                self._teardown()
        except Exception:
            pass

    def __repr__(self):
        return f"<nezha.Communicator rank {self.rank}/{self.size} rails {self.rails}>"


def _read_ctrl(sock, wait):
    """One abort frame (kind, text), or None on EOF."""
    buf = b""
    deadline = time.monotonic() + wait
    need = _CTRL.size
    header = None
    while True:
        try:
            chunk = sock.recv(need - len(buf))
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                return (_KIND_OTHER, "incomplete control message")
            select.select([sock], [], [], left)
            continue
        except OSError:
            return None
        if not chunk:
            return None if header is None and not buf else (_KIND_OTHER, "truncated message")
        buf += chunk
        if len(buf) < need:
            continue
        if header is None:
            magic, kind, n = _CTRL.unpack(buf)
            if magic != _ABORT:
                return (_KIND_OTHER, "unknown control message")
            header, buf, need = (kind, n), b"", n
            if n == 0:
                return (kind, "")
            continue
        return (header[0], buf.decode(errors="replace"))


def _remote_error(msg, peer, peer_name, req, waiting=""):
    kind, text = msg
    head = f"rank {peer} ({peer_name}) aborted while this rank ran {req.name} #{req.seq}"
    head += f" ({waiting}): " if waiting else ": "
    text = text.removeprefix("nezha: ")
    cls = CollectiveMismatch if kind == _KIND_MISMATCH else PeerError
    exc = cls(f"nezha: {head}{text}")
    exc._remote = True
    return exc


def _describe(h):
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
    return f"{coll} #{h['seq']} ({', '.join(parts)})"


def _diff(exp, got):
    names = {"seq": "sequence number", "coll": "collective", "count": "count",
             "dtype": "dtype", "op": "op", "root": "root", "algo": "algorithm",
             "plan": "rail plan", "magic": "protocol"}
    d = [names[k] for k in names if exp[k] != got[k]]
    return "differs in " + ", ".join(d) if d else "headers differ"
