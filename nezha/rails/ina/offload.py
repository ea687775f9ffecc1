"""The communicator's side of an INA rail: which collectives go to it, how much of each, the
agreement after each one, and re-admission after a failure.

An allreduce of n elements is split at k: the TCP rails (the engine) reduce [0, k) while
the INA service reduces [k, n) on a thread of its own (its C loop runs without the GIL).
A reduce_scatter or allgather of blocks of n elements is split at k in every block: the TCP
rails do [0, k) of each block, INA [k, n) of each. k comes from the two paths' measured
rates (one pair per kind, in the planner: costmodel.OffloadModel), so both finish together:
per rank, the offloaded allreduce moves
S each way, the ring 2(N-1)/N * S; the offloaded reduce_scatter S up and S/N down, the
allgather S/N up and S down, their rings (N-1)/N * S each way; the rates measured include
that.

Every decision is taken alike on every rank, from numbers every rank holds alike: after each
split collective the ranks take the MAX, over the TCP rails, of an int64 vector (INA failed
here?, TCP ns, INA ns, elements INA left unfinished here). The same numbers give the same
rates, hence the same k next time; a failure anywhere makes every rank re-run on the TCP
rails, from its saved input, the part of [k, n) (of every block) that some rank got no
result for (results are final once they arrive: the service sends each chunk's result
only when every rank's part is in), drop the INA rail, and try it again every
READMIT_EVERY eligible collectives.

A small allreduce (one datagram) may instead go whole to the service (Planner.ina_small:
two hops against recursive doubling's log2(N) steps); it is lazy, and its failure is
settled by the failover vote (Failover.ina_small_failed), not by an agreement here.
"""
import threading
import time

import numpy as np

from nezha import log
from nezha.errors import NezhaError
from nezha.rails.ina.client import InaClient, parse_addrs, reduce_support, window_why
from nezha.types import ReduceOp

READMIT_EVERY = 16   # eligible collectives between tries to register again after a failure
KINDS = ("allreduce", "reduce_scatter", "allgather")


def link_Bps(host):
    """The trusted nominal speed (B/s) of this host's interface toward host (the route's
    source address), or 0: a physical NIC's negotiated speed (topo.rails.trusted_speed);
    a virtual one's (the lab's veth) means nothing, nor an unknown one."""
    import socket
    from nezha.rails.tcp.ifaces import list_interfaces
    from nezha.topo.rails import kind_of, trusted_speed
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            src = s.getsockname()[0]
        for i in list_interfaces():
            if i.address == src:
                mbps = trusted_speed({"speed_mbps": i.speed_mbps, "kind": kind_of(i)})
                return int(mbps or 0) * 125_000
    except OSError:
        pass
    return 0


def window_inputs(model, nominal_Bps):
    """(rate B/s or None, where from) for the default window: the rail's trusted nominal
    speed (agreed: the slowest rank's) if every rank knows one, else the fastest rate the
    split model learned for the rail (agreed times; a rate the window bounded grows the
    window by about WINDOW_MARGIN per learning until it no longer does), else unknown."""
    if nominal_Bps > 0:
        return float(nominal_Bps), "nominal link speed"
    learned = max(model.rate_ina.values(), default=0.0)
    if learned > 0:
        return float(learned), "learned rate"
    return None, "no rate yet"


class _Heartbeat(threading.Thread):
    """Pings the service every period while the client is open, also while the program
    computes: the other ranks then tell this rank late (heard) from lost (not heard)."""

    def __init__(self, client, period):
        super().__init__(name="nezha-ina-heartbeat", daemon=True)
        self.client, self.period = client, max(float(period), 0.005)

    def run(self):
        client = self.client
        while not client._closed:
            try:
                client.ping()
            except Exception:  # noqa: BLE001 - an unreachable service: the collective says so
                pass
            time.sleep(self.period)


class InaOffload:
    """One INA rail of a communicator (the first address of NEZHA_INA_ADDR)."""

    # the window's inputs (_open measures them, finish agrees them): this rank's least
    # PING round trip to the service, its link's trusted speed (0: unknown); and the why
    rtt_ns = 0
    nominal_Bps = 0
    window_why = ""

    def __init__(self, comm, addr_text, min_bytes, timeout):
        addrs = parse_addrs(addr_text)
        if not addrs:
            raise NezhaError("nezha: NEZHA_RAILS names ina but NEZHA_INA_ADDR is empty: give "
                             "the service's address (host:port, one per rail)")
        self.comm = comm
        self.addr = addrs[0]
        self.min_bytes = int(min_bytes)
        self.timeout = float(timeout)
        self.generation = 0
        self.client = None
        self.alive = False
        self.since_fail = 0
        # the split and its agreed rates live in the planner (costmodel.OffloadModel)
        cfg = comm.config
        comm.planner.set_offload(min_bytes, cfg["INA_SMALL"], int(cfg["INA_CHUNK"]))
        self.model = comm.planner.offload
        self.small = 0    # small allreduces run whole on the service
        self.small_failures = 0
        self.offloads = 0
        self.failures = 0
        self.kept = 0     # failures after which part of the INA share was final (not re-run)
        self.version = 1  # the service's protocol version: 2 takes reduce_scatter, allgather
        self._open(init=True)
        self.alive = True

    @property
    def address(self):
        return f"{self.addr[0]}:{self.addr[1]}"

    def _open(self, init=False):
        """Register a new job (a fresh tag per generation, so no datagram of a failed one is
        ever counted in it). At init a missing service is an error naming the address."""
        c = self.comm
        self.generation += 1
        try:
            self.client = InaClient(self.addr, secret=c._boot.secret, rank=c.rank, size=c.size,
                                    tag=f"nz{self.generation}", timeout=max(self.timeout, 2.0))
            self.client.timeout = self.timeout  # no progress for this long: the rail failed
            self.client.set_late(c.timeout)     # unless every rank still reaches the service
            self.client.set_spin(c.config["SPIN_US"] * 1e-6)  # a small result comes soon
            if init:  # one service answers every rank alike (re-admission agrees on it)
                self.version = self.client.version
            # the window's inputs, agreed after the next split collective (finish)
            rtt = self.client.rtt_s
            self.rtt_ns = int(rtt * 1e9) if rtt else 0
            self.nominal_Bps = link_Bps(self.addr[0])
            self.window_why = window_why(self.client.chunk_bytes, None, None,
                                         self.client.nslots)[1]
            _Heartbeat(self.client, c.config["HEARTBEAT"]).start()
            ok = True
        except NezhaError as exc:
            if init:
                raise type(exc)(f"nezha: rank {c.rank}: no INA service answers at "
                                f"{self.address} (NEZHA_INA_ADDR): {exc}") from None
            log.info("HEALTH", f"INA service at {self.address} still unavailable: {exc}")
            self.client, ok = None, False
        return ok

    def split(self, kind, count, blocks, es, dt, op):
        """Elements [k, count) (of each of `blocks` blocks) go to INA: k, or None to leave the
        whole collective to TCP."""
        if not self.alive or not self.wants(kind, count, blocks, es, dt, op):
            return None
        k = self.comm.planner.offload_split(kind, count, blocks, es)
        return None if k >= count else k  # the model says TCP alone finishes first

    # ---- small allreduces, whole on the service ----------------------------------------
    def small_route(self, count, es, dt, op):
        """Whether this allreduce goes whole to the service (Planner.ina_small), from what
        every rank holds alike: the agreed alive state, the settings, the layout, and every
        TCP rail alive (a collective that does not vote must not keep a dead rail from being
        re-admitted). Counts toward re-admitting the rail while it is left out."""
        c = self.comm
        if not self.small_wanted(count, es, dt, op):
            return False
        if not self.alive:
            self.eligible("allreduce", count, 1, es, dt, op, small=True)
            return False
        return not c._failover or all(c.planner.alive)

    def small_wanted(self, count, es, dt, op):
        """Whether the rail takes this allreduce whole while alive (small_route without the
        state of the rails)."""
        return (self.comm.planner.ina_small(count * es, self.comm._failover)
                and reduce_support(dt, op))

    def run_small(self, out, dt, op):
        """out (one datagram's worth) reduced in place over the service; the error, or None.
        Never partial: the result is one datagram, all or nothing."""
        self.small += 1
        try:
            self.client.allreduce(out, op, dt)
        except NezhaError as exc:
            return exc
        return None

    def small_failed(self, exc):
        """A small allreduce got no result here (run_small, or the fast path's C call)."""
        self.small_failures += 1
        log.warn("HEALTH", f"INA rail at {self.address}: small allreduce failed: {exc}")

    def start(self, kind, a, out, k, n, dt, op):
        """Put [k, n) (of every block) on the service now; returns the job for finish().
        allreduce: a in, out (may be a) out; reduce_scatter: a = size blocks in, out = this
        rank's block; allgather: a = this rank's block, out = size blocks."""
        snap = None
        if kind == "allreduce":
            if out is a:
                snap = a[k:n].copy()  # in place: INA overwrites it, a re-run needs the input
            else:
                out[k:n] = a[k:n]
        job = dict(kind=kind, k=k, n=n, snap=snap, a=a, t0=time.perf_counter_ns(), t1=None,
                   err=None, done=0)

        def run(client=self.client):
            try:
                if kind == "allreduce":
                    client.allreduce(out, op, dt, start=k, stop=n)
                elif kind == "reduce_scatter":
                    client.reduce_scatter(a, out, op, dt, start=k, stop=n)
                else:
                    client.allgather(a, out, dt, start=k, stop=n)
            except BaseException as exc:  # noqa: BLE001 - finish() reports it
                job["err"] = exc
            job["done"] = client.done_prefix  # [k, k + done) (of every block) is final here
            job["t1"] = time.perf_counter_ns()  # its own end: finish() may come later

        job["thread"] = t = threading.Thread(target=run, name="nezha-ina", daemon=True)
        t.start()
        return job

    @staticmethod
    def wait(job):
        """Until the INA part ended (its own timeout bounds it)."""
        job["thread"].join()

    def finish(self, job, out, tcp_ns, rerun):
        """After the TCP part: wait for INA, agree with every rank, re-run on TCP
        (rerun(lo, hi): elements [lo, hi) of every block) what INA did not finish on every
        rank, learn the rates."""
        kind, k, n = job["kind"], job["k"], job["n"]
        self.wait(job)
        failed = int(job["err"] is not None)
        if failed:
            log.warn("HEALTH", f"INA rail at {self.address} failed: {job['err']}")
            # leave the service now: the ranks still waiting for a result this rank sends no
            # more data for then find it unheard within the INA timeout and fail too, where
            # its heartbeats would keep it "late" until NEZHA_TIMEOUT (60 s) and the agreement
            # below would wait that long
            self._close_client()
        ina_ns = job["t1"] - job["t0"]
        # MAX of (failed, times, elements left): the slowest rank's times and the least any
        # rank finished; results below that are final on every rank, the rest is re-run
        left = (n - k) - job["done"] if failed else 0
        # and the window's inputs: the longest round trip (registration's PINGs), the
        # slowest nominal link speed (MAX of minus it; 0 where a rank knows none)
        agreed = np.array([failed, tcp_ns, ina_ns, left, self.rtt_ns, -self.nominal_Bps],
                          np.int64)
        self.comm._internal_allreduce(agreed, "ina agreement", ReduceOp.MAX)
        if agreed[0]:
            self.failures += 1
            lo = n - int(agreed[3])
            self.kept += lo > k
            if kind == "allreduce":
                if job["snap"] is not None:
                    out[lo:n] = job["snap"][lo - k:]
                else:
                    out[lo:n] = job["a"][lo:n]
            log.info("HEALTH", f"INA rail: re-running {n - lo} of {n - k} offloaded elements "
                     f"{'' if kind == 'allreduce' else 'of every block '}on the TCP rails")
            if lo < n:
                rerun(lo, n)   # every rank: what INA left, over the TCP rails
            self._drop()
            return
        self.offloads += 1
        es = out.itemsize * (1 if kind == "allreduce" else self.comm.size)
        self.model.learn(kind, k * es, int(agreed[1]), (n - k) * es, int(agreed[2]))
        self.retune(int(agreed[4]), -int(agreed[5]))

    def retune(self, rtt_ns, nominal_Bps):
        """The window from agreed numbers (every rank alike, between two collectives):
        default_window of the rail's rate (window_inputs) and the agreed round trip.
        Logged when it moves."""
        c = self.client
        if c is None or rtt_ns <= 0:
            return
        rate, src = window_inputs(self.model, nominal_Bps)
        old = c.window
        w, why = c.set_window(rate, rtt_ns * 1e-9)
        self.window_why = f"{why} ({src}; round trip: the slowest rank's least PING)"
        if w != old:
            log.info("PLAN", f"INA rail at {self.address}: window {old} -> {w} slots: "
                     f"{self.window_why}")

    @property
    def rate_tcp(self):
        """Agreed rates of the TCP share per kind (costmodel.OffloadModel)."""
        return self.model.rate_tcp

    @property
    def rate_ina(self):
        """Agreed rates of the INA share per kind (costmodel.OffloadModel)."""
        return self.model.rate_ina

    def _close_client(self):
        if self.client is not None:
            try:
                self.client.close()
            except Exception:  # noqa: BLE001 - it failed already; nothing to keep
                pass
            self.client = None

    def _drop(self):
        self.alive = False
        self.comm._fast.clear()  # no small allreduce may reach the old client any more
        self.since_fail = 0
        self._close_client()
        self.model.forget()
        log.warn("HEALTH", f"INA rail at {self.address} left out; trying it again every "
                 f"{READMIT_EVERY} collectives it could take")

    def wants(self, kind, count, blocks, es, dt, op):
        """Whether this collective (blocks of count elements) is one the rail takes a part of
        while alive: large enough, a reduction the service does (an allgather reduces
        nothing), a kind the service's protocol version has."""
        return (count * blocks * es >= 2 * self.min_bytes
                and (kind == "allgather" or reduce_support(dt, op))
                and (kind == "allreduce" or self.version >= 2))

    def eligible(self, kind, count, blocks, es, dt, op, small=False):
        """Called for every such collective alike on every rank (small: one small_route
        sends to the rail when alive): counts toward re-admission."""
        if self.alive or not (small or self.wants(kind, count, blocks, es, dt, op)):
            return
        self.since_fail += 1
        if self.since_fail < READMIT_EVERY:
            return
        self.since_fail = 0
        opened = self._open()
        # MAX of (failed here, -version): the version every rank's wants() then uses alike
        ok = np.array([0 if opened else 1, -self.client.version if opened else 0], np.int64)
        self.comm._internal_allreduce(ok, "ina re-admission", ReduceOp.MAX)
        if ok[0] == 0:
            self.alive = True
            self.version = int(-ok[1])
            log.warn("HEALTH", f"INA rail at {self.address} answers again: re-admitted (cold)")
        elif self.client is not None:
            self.client.close()
            self.client = None

    def close(self):
        if self.client is not None:
            try:
                self.client.close()
            finally:
                self.client = None
