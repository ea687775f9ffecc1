"""Communicator: the user's object. Checks arguments, numbers collectives, runs them."""
import collections
import math
import os
import threading
import weakref

import numpy as np

from nezha import log
from nezha._core import engine as _eng
from nezha.algorithms import slices
from nezha.bootstrap import discover
from nezha.buffers import Spares, address, as_array
from nezha.config import Config
from nezha.errors import InvalidUsageError, NezhaError
from nezha.diagnose import Diagnose
from nezha.executor import PRESNAP_POOL_BYTES, Executor
from nezha.failover import LAZY_MAX_BYTES, Failover
from nezha.mesh import Mesh
from nezha.planner import ALGO_DIRECT, ALGO_HIER, ALGO_NAMES, ALGO_RD, ALGO_TREE, Plan, Planner
from nezha.rails.tcp.device import TcpRail
from nezha.topo import bind as topo_bind
from nezha.topo import placement
from nezha.topo import rails as topo_rails
from nezha.topo import rateprobe as topo_rateprobe
from nezha.topo import steplatency as topo_steplatency
from nezha.transports import hostcoll
from nezha.transports.loop import loop_rails
from nezha.types import DType, ReduceOp, check_op_dtype

# (dtype -> {op: ReduceOp}) for the ops each dtype allows; the slow path explains refusals.
_OPS_OK = {dt: {o: o for o in ReduceOp if not (
    (o in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dt.is_float)
    or (o == ReduceOp.AVG and not dt.is_float))} for dt in DType}
for _d in _OPS_OK.values():
    _d.update({int(o): o for o in list(_d)})




def _local_size():
    """Ranks on this host as the launcher says (1 when it does not)."""
    for k in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"):
        try:
            return int(os.environ[k])
        except (KeyError, ValueError):
            pass
    return 1


def _weak_call(method):
    """method's result while its object lives, else None."""
    ref = weakref.WeakMethod(method)

    def call(*a):
        m = ref()
        return None if m is None else m(*a)
    return call


def _into_scratch(into, nbytes, buf=None):
    """A build that writes into the library's memory, not the user's: scratch, for a rank
    that already returned from a lazy collective and re-runs it (failover.py); buf, the
    spare an in-place collective runs into out of place (executor._execute). into(address,
    keep) makes the build, which keeps the memory alive."""
    scratch = np.empty(nbytes + 1, np.uint8) if buf is None else buf
    return into(address(scratch), scratch)


def _zerocopy_min(cfg):
    """Smallest zero-copy send in bytes (NEZHA_ZEROCOPY, NEZHA_ZEROCOPY_MIN); 0 = off."""
    zmin = cfg["ZEROCOPY_MIN"]
    if cfg["ZEROCOPY"] != "on" or zmin == math.inf:
        return 0
    return max(1, int(zmin))


class Communicator(Executor, Diagnose):
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
        self._torn = threading.RLock()  # _teardown runs once (the caller's and the guard's)
        self._torn_done = False
        self._host = None  # the host area (transports/hostcoll.py), when all ranks share a host
        overrides = dict(config or {})
        if rails is not None:
            overrides["SOCKET_IFNAME"] = rails if isinstance(rails, str) else ",".join(rails)
        self.config = cfg = Config.load(overrides or None)
        log.configure(cfg)
        t = float(timeout if timeout is not None else cfg["TIMEOUT"])
        if not t > 0:
            raise InvalidUsageError(f"nezha: timeout must be > 0, not {timeout!r}")
        self._st = _eng.RunState(t)  # what runs and has run: one object every layer shares
        self._mesh = None
        self._aborts = {}            # peer -> (kind, text) of its abort (Diagnose._take_aborts)
        self._boot = boot = discover(mpi_comm, cfg["CONNECT_TIMEOUT"])
        self.rank, self.size, self.local_rank = boot.rank, boot.size, boot.local_rank
        log.set_rank(self.rank)
        if "tcp" not in cfg["RAILS"] and "loop" not in cfg["RAILS"]:
            raise InvalidUsageError(f"nezha: NEZHA_RAILS={cfg.raw('RAILS')} leaves no tcp rail: "
                                    "tcp (or loop, its test form) carries every rail between "
                                    "hosts and the control connections (shm only joins ranks "
                                    "of one host; ina and rdma are planned)")
        if "loop" in cfg["RAILS"]:
            tcp = loop_rails(cfg["LOOP_RAILS"], cfg["PORT_RANGE"])[: cfg["MAX_RAILS"]]
        else:
            # NEZHA_SOCKET_IFNAME if set, else the rails every host reaches (nezha/topo/rails.py)
            ifaces = topo_rails.select(boot, cfg["SOCKET_IFNAME"], cfg["HOST_ID"])
            ifaces = ifaces[: cfg["MAX_RAILS"]]
            tcp = [TcpRail(i, cfg["PORT_RANGE"]) for i in ifaces]
        log.info("INIT", f"rank {self.rank}/{self.size} local_rank {self.local_rank} "
                 f"bootstrap {boot.kind} rails {[r.name for r in tcp]}")
        topo_bind.apply(cfg["BIND"], self.local_rank, [r.name for r in tcp])  # before threads
        # rail placement for hierarchical collectives: only where it can matter (the probe
        # costs a fraction of a second)
        near = (topo_bind.near_rails(self.local_rank, [r.name for r in tcp])
                if cfg["HIER_RAILS"] != "striped" and len(tcp) > 1 and _local_size() > 1
                else [])
        self._mesh = mesh = Mesh(boot, tcp, cfg["SOCKET_NCONNS"], cfg["CONNECT_TIMEOUT"],
                                 int(cfg["SOCKET_BUFFER"]), use_shm="shm" in cfg["RAILS"],
                                 shm_bytes=int(cfg["SHM_BUFFER"]), host=cfg["HOST_ID"],
                                 faults=cfg["FAULTS"] or None,
                                 rail_timeout=cfg["RAIL_TIMEOUT"], near=near,
                                 zerocopy_min=_zerocopy_min(cfg))
        self.nchan = mesh.nchan
        seg = cfg["SEGMENT_SIZE"]
        self._engine = _eng.Engine(mesh.endpoints(), self.size, self.nchan,
                                   mesh.ctrl_endpoints() if self.size > 1 else [],
                                   int(seg if seg != math.inf else 1 << 20),
                                   cfg["HEARTBEAT"])
        self._engine.set_spin(cfg["SPIN_US"] * 1e-6)
        # re-admission: a dead rank is a PeerError at once (weak: no cycle with the mesh)
        mesh.peer_gone = _weak_call(self._peer_gone)
        self._engine.set_failover(True, [c // mesh.nconns for c in range(self.nchan)],
                                  cfg["RAIL_TIMEOUT"])
        # Failover needs a second rail to go to, and costs a vote per collective.
        self._failover = cfg["FAILOVER"] and len(mesh.rails) > 1 and self.size > 1
        self._fo = Failover(self, cfg["READMIT"])  # the failover layer, behind its hooks
        self._stage_bytes = int(seg if seg != math.inf else 1 << 20)
        self._events = []
        self.planner = Planner(self.nchan, cfg, [mesh.chan_name(c) for c in range(self.nchan)],
                               self.size,
                               nominal=topo_rails.nominal_rates(mesh.rails, mesh.nconns))
        self.planner.set_hosts(mesh.host_of, mesh.crowding)  # MIN_RAIL_PIECE=auto: by layout
        if self._failover:
            piece = self.planner.min_piece
            self.planner.piece_bytes = 0 if piece == math.inf else max(int(piece), 1 << 20)
            self.planner.set_failover(True)
        self._hier = self.planner.hier_groups(self.rank)
        self._hier_chunk = int(cfg["HIER_CHUNK"])
        self._hosts = self.planner.hier_hosts()  # for hier allgather, reduce_scatter, broadcast
        if self._hosts is not None:
            self.planner.set_hier_rails(cfg["HIER_RAILS"], placement.agreed_near(
                [p.get("near_rails") if isinstance(p.get("near_rails"), list) else []
                 for p in mesh.peers], self._hosts, len(mesh.rails)))
        # this rank's place among the ranks of its host as nezha counts hosts (a launcher
        # may see one node where the lab has several)
        self.local_rank = self._hier[0].index(self.rank)
        self._p2p_out = collections.Counter()
        self._p2p_in = collections.Counter()
        self._cache = {}  # (call, buffers, model version) -> (schedule, plan)
        self._spares = Spares(PRESNAP_POOL_BYTES)  # the library's own buffers (_spare)
        if self._failover and cfg["SPARE_BYTES"] not in (0, math.inf):
            # the out-of-place run's target (executor._out_of_place), touched now: made in
            # the first collective, its page faults were in the run. After 3 s idle on this
            # VM (idle memory goes back to the host: 2 MiB pages then fault at 10x the
            # cost) they made the first 16 MiB allreduce on 400 + 100 Mbit/s 7 % slower
            # than the optimum; touched here 0-0.3 %. On 4 KiB pages: touched here, outside
            # any run, those cost less after idle (Communicator() 459 ms against 507 on 2
            # MiB pages, median of 6 jobs each) and the runs into it no more
            # (docs/results/session28/first-call)
            self._spares.get("snap", int(cfg["SPARE_BYTES"]), huge=False)[::4096] = 0
        self._writing = {}     # posted, unfinished requests -> spans they may write (failover)
        # failover snapshots of posted calls' in-place inputs: taken when posted, at the
        # run; and in-place runs done out of place instead (stats()["snapshots"])
        self._nsnaps = [0, 0, 0]
        # repeated blocking collectives on the same buffers (fastpath.pxi)
        self._fast = _eng.FastPath(self._st, self._engine, self.planner.model,
                                   self._failover)
        self._nobuf = np.empty(0, np.uint8)  # the barrier's fast-path key: it has no buffers
        # every rank on this host: allreduces reduce straight out of one shared segment.
        # Not with failover (several rails): its votes and lazy re-runs are the engine's,
        # and the area has none; not when an algorithm is forced (NEZHA_ALGO)
        # (every rank takes part in the set-up's rounds; any one's settings can say no)
        if mesh.shm is not None and len(mesh.shm.local) == self.size - 1:
            want = (cfg["SHM_COLL"] != math.inf and not self._failover
                    and cfg["ALGO"] == "auto")
            self._host = hostcoll.setup(boot, mesh.peers, want, cfg["SHM_COLL"],
                                        int(cfg["SHM_COLL_CHUNK"]), cfg["SPIN_US"] * 1e-6)
            if self._host is not None:
                self._fast.set_host(self._host.area)
        # the INA rail shares large allreduces with the TCP rails (nezha/rails/ina/offload.py)
        self._ina = None
        if "ina" in cfg["RAILS"] and cfg["INA_ADDR"] and self.size > 1:
            from nezha.rails.ina.offload import InaOffload
            self._ina = InaOffload(self, cfg["INA_ADDR"], int(cfg["INA_MIN_BYTES"]),
                                   cfg["INA_TIMEOUT"])
        # no trusted nominal speed: a short timed allreduce seeds the prior (topo/rateprobe.py)
        self.probe = topo_rateprobe.startup(self, cfg)
        # the model's step latency from this machine, not a constant (topo/steplatency.py)
        self.probe["step"] = topo_steplatency.startup(self, cfg)
        # its calls ran as collectives (the counters every rank keeps alike go on from
        # them); the user's first is still #0 in messages and stats()
        self._st.base = self._st.seq
        if log.enabled("INFO", "PLAN"):
            log.info("PLAN", self.planner.describe())
            if self._hosts is not None:
                log.info("PLAN", self.planner.describe_rails([r.name for r in mesh.rails]))
        self._fo.start_guard()

    # ---- properties ------------------------------------------------------------------

    @property
    def timeout(self):
        """Seconds any operation may take before it raises (NEZHA_TIMEOUT)."""
        return self._st.timeout

    @timeout.setter
    def timeout(self, seconds):
        if not float(seconds) > 0:
            raise InvalidUsageError(f"nezha: timeout must be > 0, not {seconds!r}")
        self._st.timeout = float(seconds)

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
        return {"rank": self.rank, "size": self.size,
                "collectives": self._st.seq - self._st.base, "rails": rails,
                "last_plan": repr(self._st.last_plan),
                "model": self.planner.model.summary(), "probe": dict(self.probe),
                "alive": {self._mesh.chan_name(c): a for c, a in enumerate(self.planner.alive)},
                "failover": self._failover, "events": list(self._events),
                "fast_path_calls": self._fast.hits, "votes": self._st.votes,
                "snapshots": {"at_post": self._nsnaps[0], "at_run": self._nsnaps[1],
                              "out_of_place": self._nsnaps[2]},
                "vote_resends": self._engine.vote_counts()[0],
                "health_polls": self._engine.health_counts()[0],
                "zerocopy": self._engine.zerocopy_counts(),
                "tx_kicks": self._engine.tx_kicks(),
                "last_channels": [{"channel": self._mesh.chan_name(c), "ns": t, "bytes": b}
                                  for c, (t, b) in enumerate(times)]}

    def algorithm_for(self, nbytes, coll="allreduce"):
        """Name of the algorithm the planner picks for nbytes of a collective (as OSU counts
        them: per rank for allgather, the whole sendbuf for reduce_scatter)."""
        if (coll == "broadcast" and self._broadcast_lazy(nbytes) and self._st.prev_early
                and self.planner.algorithm(coll, nbytes) == ALGO_TREE):
            return ALGO_NAMES[ALGO_RD]  # what the next one runs (_broadcast)
        return ALGO_NAMES[self.planner.algorithm(
            coll, nbytes * (self.size if coll == "allgather" else 1))]

    # ---- collectives -----------------------------------------------------------------
    # Each _name() checks its arguments (raising before anything is sent) and queues a
    # request with two functions: plan() and build(schedule, plan), run when the request
    # reaches the head of the queue (so that every rank plans it after the same history).

    def allreduce(self, sendbuf, recvbuf=None, op=ReduceOp.SUM):
        """Reduce sendbuf over all ranks into recvbuf (into sendbuf when recvbuf is None)."""
        done = self._fast.allreduce(self, sendbuf, recvbuf, op)
        if done is not None:
            return done
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

        # builds hold addresses, not buffers (the fast path keeps them past this call)
        def into(dst_addr, scratch=None):
            def build(s, algo, chan, off, cnt, src, _keep=scratch):
                o = dst_addr + off * es
                slices.allreduce(s, algo, chan, o, address(src) + off * es, cnt, es, self._hier,
                                 self._hier_chunk, self.planner.rail_owners(chan))
                if op == ReduceOp.AVG:
                    s.add_avg(o, cnt, float(self.size))
            return build

        req = self._submit("allreduce", _eng.COLL_ALLREDUCE, dt, op, count, -1,
                           lambda: self.planner.allreduce(count, es), into(address(out)),
                           result, [a, out], ckey=(address(a), address(out)), src=a,
                           inplace=address(out) == address(a),
                           retarget=lambda buf=None: _into_scratch(into, count * es, buf),
                           fast=(sendbuf, recvbuf, a, out, a, op, True, None))
        if (self._host is not None and self.planner.algo == "auto"
                and self._host.takes(count * es)):
            req.host = (a, out, dt, op)  # in the host area (executor.py); not when forced
        elif self._ina is not None:
            req.ina = ("allreduce", a, out, dt, op, None)  # decided at run time (executor.py)
        return req

    def reduce(self, sendbuf, recvbuf=None, op=ReduceOp.SUM, root=0):
        """Reduce sendbuf over all ranks into recvbuf on root (in place when None there)."""
        done = self._fast.reduce(self, sendbuf, recvbuf, op, root)
        if done is not None:
            return None if done is self._fast else done  # off the root: no result
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
        # small: an allreduce whose result the other ranks drop (as fast as a tree, and
        # finishing proves every rank entered: with failover it needs no vote)
        rd = self.planner.algorithm("reduce", count * es) == ALGO_RD
        dst = out if at_root else self._spare("sink", count * es) if rd else None

        def into(dst_addr, scratch=None):
            def build(s, algo, chan, off, cnt, src, _keep=scratch):
                o = dst_addr + off * es
                slices.reduce(s, algo, chan, root, at_root, o, address(src) + off * es, cnt,
                              es, self._hier, self._hier_chunk)
                if op == ReduceOp.AVG and at_root:
                    s.add_avg(o, cnt, float(self.size))
            return build

        return self._submit("reduce", _eng.COLL_REDUCE, dt, op, count, root,
                            lambda: self.planner.reduce(count, es),
                            into(0 if dst is None else address(dst)), result, [a, out, dst],
                            ckey=(address(a), 0 if dst is None else address(dst)), src=a,
                            inplace=at_root and address(out) == address(a),
                            retarget=(lambda buf=None: _into_scratch(into, count * es, buf))
                            if rd else None,
                            # off the root recvbuf is not looked at; the entry keeps the
                            # sink (never the user's buffer)
                            fast=(sendbuf, recvbuf if at_root else None, a,
                                  out if at_root else a, a, op, at_root,
                                  None if at_root else dst))

    def broadcast(self, buf, root=0):
        """Copy buf from root to every rank."""
        done = self._fast.broadcast(self, buf, root)
        if done is not None:
            return done
        return self._broadcast(buf, root)._block()

    def ibroadcast(self, buf, root=0):
        """Non-blocking broadcast; returns a Request."""
        return self._kick(self._broadcast(buf, root))

    def _broadcast(self, buf, root=0):
        root = self._root(root)
        at_root = self.rank == root
        a, dt = as_array(buf, "buf", writable=not at_root)
        es, count = dt.itemsize, a.size
        lazy = self._broadcast_lazy(count * es, root)
        # the zeros the others add when it runs as an allreduce (ALGO_RD)
        src = self._spare("zeros", count * es) if lazy and not at_root else a

        def into(dst_addr, scratch=None):
            def build(s, algo, chan, off, cnt, src, _keep=scratch):
                # a tree's (hier's) root sends src: a re-run's is the kept copy, dst_addr
                # scratch; a lazy hier one's first slice opens with a barrier (lazy_ok)
                p = 0 if src is None else address(src) + off * es
                slices.broadcast(s, algo, chan, root, dst_addr + off * es, p, cnt, self._hosts,
                                 self.planner.rail_owners(chan),
                                 self._hier if lazy and off == 0 else None,
                                 self.planner.flat_tree(chan, cnt * es, root))
            return build

        def plan():
            # planned when it runs: after a lazy tree (RunState.prev_early), an allreduce,
            # whose finishing proves every rank past that tree; the same on every rank
            small = ALGO_RD if lazy and self._st.prev_early else ALGO_TREE
            return self.planner.broadcast(count, es, small, root)

        return self._submit("broadcast", _eng.COLL_BROADCAST, dt, 0, count, root, plan,
                            into(address(a)), buf, [a, src], ckey=(address(a), address(src)),
                            src=src if lazy else None, inplace=lazy and at_root,
                            retarget=(lambda buf=None: _into_scratch(into, count * es, buf))
                            if lazy else None,
                            fast=(buf, None, a, a, src, None, not at_root, None))

    def _broadcast_lazy(self, nbytes, root=0):
        """With failover a small broadcast is lazy (no vote): a binomial tree whose root and
        inner ranks return once their sends are handed to the rail, keeping a copy of their
        input, or, right after such a tree, an allreduce in which the other ranks OR in
        zeros (two early trees in a row would leave a rank two collectives of them behind).
        A hierarchical one (several ranks per host) is lazy too, up to LAZY_MAX_BYTES: it
        opens with a barrier of headers (slices.broadcast's sync), so, like an allreduce,
        a rank finishing it proves every rank entered it (never early: RunState.ran). Its
        closing vote, an all-to-all of P(P - 1) frames, cost ~1 ms at 2 x 4 on 2 CPUs where
        the broadcast itself takes 0.1-0.7 ms (docs/results/session28/bcast-hier).
        Without failover, the tree (or hier)."""
        return (self._failover and nbytes <= LAZY_MAX_BYTES
                and self.planner.algorithm("broadcast", nbytes, root) in (ALGO_TREE, ALGO_HIER))

    def _spare(self, name, nbytes):
        """A library-owned buffer of nbytes (zero-filled when made), reused across calls.
        Cached schedules point into it: it only grows, and plan cache keys hold its address.
        (Spares.get; the buffers a request holds alone come from the same pool: Spares.lend)"""
        return self._spares.get(name, nbytes)

    def allgather(self, sendbuf, recvbuf):
        """Gather every rank's sendbuf into recvbuf (rank i's at block i) on all ranks."""
        done = self._fast.allgather(self, sendbuf, recvbuf)
        if done is not None:
            return done
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

        algo, nbytes = self.planner.algorithm("allgather", out.nbytes), out.nbytes

        def into(dst, scratch=None):  # addresses, not buffers (as in _allreduce)
            def build(s, algo, chan, off, cnt, src, _keep=scratch):
                slices.allgather(s, algo, chan, dst, address(src), c, off, cnt, self._hosts,
                                 self.planner.rail_owners(chan, "allgather"))
            return build

        req = self._submit("allgather", _eng.COLL_ALLGATHER, dt, 0, c, -1,
                           lambda: self.planner.blocks("allgather", c, es, algo),
                           into(address(out)), recvbuf,
                           [a, out], ckey=(address(a), address(out)), src=a,
                           retarget=lambda buf=None: _into_scratch(into, nbytes, buf),
                           fast=(sendbuf, recvbuf, a, out, a, None, True, None))
        if self._ina is not None:
            req.ina = ("allgather", a, out, dt, ReduceOp.SUM, algo)  # as in _allreduce
        return req

    def reduce_scatter(self, sendbuf, recvbuf, op=ReduceOp.SUM):
        """Reduce sendbuf over all ranks; rank i gets block i of the result in recvbuf."""
        done = self._fast.reduce_scatter(self, sendbuf, recvbuf, op)
        if done is not None:
            return done
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

        algo, nbytes = self.planner.algorithm("reduce_scatter", a.nbytes), out.nbytes

        def into(dst, scratch=None):  # addresses, not buffers (as in _allreduce)
            def build(s, algo, chan, off, cnt, src, _keep=scratch):
                slices.reduce_scatter(s, algo, chan, dst, address(src), c, off, cnt,
                                      es, self.size, self._hosts,
                                      self.planner.rail_owners(chan, "reduce_scatter"))
                if op == ReduceOp.AVG:
                    s.add_avg(dst + off * es, cnt, float(self.size))
            return build

        req = self._submit("reduce_scatter", _eng.COLL_REDUCE_SCATTER, dt, op, c, -1,
                           lambda: self.planner.blocks("reduce_scatter", c, es, algo),
                           into(address(out)), recvbuf, [a, out],
                           ckey=(address(a), address(out)), src=a,
                           retarget=lambda buf=None: _into_scratch(into, nbytes, buf),
                           fast=(sendbuf, recvbuf, a, out, a, op, True, None))
        if self._ina is not None:
            req.ina = ("reduce_scatter", a, out, dt, op, algo)  # as in _allreduce
        return req

    def alltoall(self, sendbuf, recvbuf):
        """Block j of sendbuf goes to rank j, which stores it as block i (from rank i)."""
        done = self._fast.alltoall(self, sendbuf, recvbuf)
        if done is not None:
            return done
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
        c, es, nbytes = a.size // self.size, dt.itemsize, out.nbytes

        def into(dst, scratch=None):  # addresses, not buffers (as in _allreduce)
            def build(s, algo, chan, off, cnt, src, _keep=scratch):
                slices.alltoall(s, chan, dst, address(src), c, off, cnt)
            return build

        return self._submit("alltoall", _eng.COLL_ALLTOALL, dt, 0, c, -1,
                            lambda: self.planner.blocks("alltoall", c, es, ALGO_DIRECT),
                            into(address(out)), recvbuf, [a, out],
                            ckey=(address(a), address(out)), src=a,
                            retarget=lambda buf=None: _into_scratch(into, nbytes, buf),
                            fast=(sendbuf, recvbuf, a, out, a, None, True, None))

    def barrier(self):
        """Return only when every rank has entered the barrier."""
        if self._fast.barrier(self, self._nobuf) is None:
            self._barrier()._block()

    def ibarrier(self):
        """Non-blocking barrier; returns a Request."""
        return self._kick(self._barrier())

    def _barrier(self):
        def build(s, algo, chan, off, cnt, src):
            if self._hier[1] is not None:  # several ranks per host: one crosses per host
                _eng.hosts_barrier(s, chan, *self._hier)
            else:
                _eng.dissemination_barrier(s, chan)

        return self._submit("barrier", _eng.COLL_BARRIER, DType.UINT8, 0, 0, -1,
                            self.planner.single, build, None, [], ckey=(),
                            retarget=lambda buf=None: build,
                            fast=(self._nobuf, None, self._nobuf, self._nobuf, self._nobuf,
                                  None, False, None))

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
        # one channel (agreed by both ends: the planner's best) keeps sends in order
        return self._submit("send", _eng.COLL_SENDRECV, dt, 0, a.size, self.rank,
                            lambda: Plan([(self._p2p_channel(), 0, a.size)], 0),
                            lambda s, algo, chan, off, cnt, src: _eng.p2p_send(
                                s, chan, dest, address(a) + off * dt.itemsize, cnt * dt.itemsize),
                            None, [a], seq=seq)

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
                            lambda: Plan([(self._p2p_channel(), 0, a.size)], 0),
                            lambda s, algo, chan, off, cnt, src: _eng.p2p_recv(
                                s, chan, source, address(a) + off * dt.itemsize,
                                cnt * dt.itemsize),
                            buf, [a], seq=seq)

    def _p2p_channel(self):
        # not a channel a vote has just cut (the planner hears of it at the next vote)
        return self.planner.best_channel(avoid=self._fo.cut)

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

    # ---- lifetime --------------------------------------------------------------------

    def close(self):
        """Finish queued operations, then close every connection (idempotent)."""
        if self._st.closed:
            return
        if self._st.broken is None and self._mesh is not None:
            with self._st.cv:
                idle = not self._st.busy
                if idle and self._st.queue:
                    self._st.busy = True
            if idle and self._st.queue:
                self._drain()
            with self._st.cv:
                # a close from another thread keeps busy until it has torn down: stop
                # waiting once it is closed (tests/test_health_thread.py hung here forever)
                self._st.waiters += 1  # woken when the drainer gives busy up (RunState.take)
                try:
                    while self._st.busy and not self._st.closed:
                        self._st.cv.wait(0.1)
                finally:
                    self._st.waiters -= 1
                mine = not self._st.closed
                self._st.busy = True  # ours now: the guard thread must not vote meanwhile
            if mine and self._st.broken is None:
                try:
                    self._fo.settle()
                except NezhaError as exc:  # closing anyway; a peer that needed us will say
                    log.warn("HEALTH", f"closing: {exc}")
        self._teardown()

    def _teardown(self):
        with self._st.cv:
            self._st.closed = True
            self._st.cv.notify_all()
        # The caller (close, an error) and the guard thread (an error found while the caller
        # was away) can both get here: closing fds twice closes someone else's, and the
        # fuzzer saw rank 0 hang joining a health thread already joined. The second waits.
        with self._torn:
            if self._torn_done:
                return
            self._torn_done = True
            if getattr(self, "_ina", None) is not None:
                self._ina.close()
            if self._host is not None:
                self._host.close()
            if getattr(self, "_engine", None) is not None:
                self._engine.close()
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
            if not self._st.closed:
                self._teardown()
        except Exception:
            pass

    def __repr__(self):
        return f"<nezha.Communicator rank {self.rank}/{self.size} rails {self.rails}>"

