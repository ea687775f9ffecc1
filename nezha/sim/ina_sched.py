"""INA allreduces as nezha runs them, for the flow simulator: the same decisions, from the
same code, as the communicator's INA rail (nezha/rails/ina/, executor._execute_offload).

What decides an allreduce on a communicator with an INA rail, and where the model takes it:
- the route: small (one datagram, `Planner.ina_small` through `InaOffload.small_route`:
  two hops, when the cost model puts them under recursive doubling and failover can recover
  one), split (`InaOffload.wants`: at least 2 x NEZHA_INA_MIN_BYTES and a reduction the
  service does), or TCP alone. The model calls those methods on an InaOffload whose
  communicator is a stand-in holding the planner (`offload`);
- the split point k: `Planner.offload_split` (costmodel.OffloadModel: cold half each, then
  by the agreed rates, the INA share at least NEZHA_INA_MIN_BYTES); after each split call
  the model feeds `OffloadModel.learn` what InaOffload.finish feeds it (the slowest rank's
  TCP and INA times);
- the TCP part [0, k): nezha_sched.workload on the planner of the TCP rails (the engine's
  own schedule for k elements);
- the INA part [k, n): datagrams of `_ina.mtu_chunk(mtu)` payload bytes (the client's rule
  at registration, NEZHA_INA_CHUNK=0) or NEZHA_INA_CHUNK, `_ina.chunk_elems` elements each,
  every one carrying `_ina.HEADER_BYTES` + `_ina.IP_UDP_BYTES` (+ shaping.ETH_HEADER on a
  tbf-shaped wire), and a window of `client.default_window(chunk, rate, ping)` slots per
  rank (NEZHA_INA_WINDOW=0): the INA link's rate x a PING's round trip (`ping_rtt`), the
  window the rail converges to once it learned the rate (InaOffload.retune);
- before both parts a rank copies the INA share (InaOffload.start: out-of-place `out[k:n] =
  a[k:n]`, in place a snapshot for a re-run) at the copy rate of failover.SNAPSHOT_BPS;
  after them the ranks agree (one small allreduce over TCP: `agree_s`).

The INA part at fluid level (the slot protocol, seeds §7.1, SwitchML / NetReduce): every
rank streams its share up to the switch's aggregator (fabric.agg_host); its results stream
down behind *every* rank's upload (STREAM on all of them: a chunk's sum needs every rank's
chunk); the last chunk's result comes back once every rank's last chunk is in (FULL), so a
one-datagram allreduce is two hops. A rank has `window` chunks in flight and sends chunk
c + W only after chunk c's result: at most W chunks per round trip, a rate cap on its up
and down flows of W x (chunk + headers) / rtt, rtt = both hops' latency and software alpha
(INA_HOP_FACTOR x the TCP step's, the planner's constant) plus one chunk's store-and-forward
at the service and at the rank, at the link's rate. Not modelled: loss and retransmission,
the slot pool's quota (nslots bounds the window), the service's CPU (`agg_gbps` bounds its
input), and a switch queue overflowing (the credit sweep's windows of 32+).
"""
import copy
import math
import types

import numpy as np

from nezha._core import ina as _ina
from nezha.config import Config
from nezha.costmodel import INA_HOP_FACTOR
from nezha.lab.shaping import DEFAULT_MTU, ETH_HEADER
from nezha.rails.ina.client import default_window
from nezha.rails.ina.offload import InaOffload
from nezha.sim import nezha_sched as N
from nezha.sim.fabric import FabricError
from nezha.sim.workload import FULL, NET, STREAM, Workload, concat
from nezha.types import DType, ReduceOp

KIND = "allreduce"


class InaParams:
    """What the client sends: payload bytes per datagram, slots in flight per rank, and the
    wire bytes every datagram adds (headers; the Ethernet header when the wire counts frames,
    as the lab's tbf does)."""

    def __init__(self, mtu=DEFAULT_MTU, chunk_bytes=0, window=0, frames=True):
        if mtu is not None and not 64 + _ina.HEADER_BYTES + _ina.IP_UDP_BYTES <= mtu:
            raise FabricError(f"mtu={mtu!r}: too small for one datagram (at least "
                              f"{64 + _ina.HEADER_BYTES + _ina.IP_UDP_BYTES})")
        chunk_bytes = int(chunk_bytes or 0)
        if chunk_bytes and (chunk_bytes % 8 or not 8 <= chunk_bytes <= _ina.MAX_PAYLOAD):
            raise FabricError(f"chunk_bytes={chunk_bytes}: a multiple of 8 in 8.."
                              f"{_ina.MAX_PAYLOAD} (NEZHA_INA_CHUNK)")
        if window is not None and int(window) < 0:
            raise FabricError(f"window={window!r}: slots in flight per rank, at least 1 "
                              "(0: the client's default)")
        self.chunk_bytes = chunk_bytes or int(_ina.mtu_chunk(int(mtu or DEFAULT_MTU)))
        # 0: the client's default, from the rail's rate x round trip once a Rail knows them
        self.window_given = bool(int(window or 0))
        self.window = int(window or 0) or default_window(self.chunk_bytes)
        self.overhead = _ina.HEADER_BYTES + _ina.IP_UDP_BYTES + (ETH_HEADER if frames else 0)

    def chunks(self, nelem, esize):
        """(datagrams, elements per datagram) of nelem elements of esize bytes."""
        dt = {1: DType.UINT8, 2: DType.FLOAT16, 4: DType.FLOAT32, 8: DType.FLOAT64}[esize]
        ce = int(_ina.chunk_elems(int(dt), self.chunk_bytes))
        return max(1, math.ceil(int(nelem) / ce)), ce

    def describe(self):
        return (f"chunk {self.chunk_bytes} B + {self.overhead} B of headers, window "
                f"{self.window} slots ({self.window * self.chunk_bytes >> 10} KiB per rank)")


def config(overrides=None):
    """nezha's configuration (defaults, with NEZHA_* overrides by name without the prefix)."""
    return Config._read(dict(overrides or {}), {})


def offload(pl, failover=False, version=2, overrides=None):
    """An InaOffload of the planner pl as the communicator makes it (its split model set
    from NEZHA_INA_MIN_BYTES, NEZHA_INA_SMALL, NEZHA_INA_CHUNK), alive, on a stand-in
    communicator: its route and split methods are the rail's own."""
    cfg = config(overrides)
    pl.set_offload(int(cfg["INA_MIN_BYTES"]), cfg["INA_SMALL"], int(cfg["INA_CHUNK"]))
    off = InaOffload.__new__(InaOffload)
    off.comm = types.SimpleNamespace(planner=pl, _failover=bool(failover), size=pl.ranks)
    off.min_bytes = int(cfg["INA_MIN_BYTES"])
    off.version, off.alive, off.since_fail = version, True, 0
    off.model = pl.offload
    return off


def route(off, nbytes, esize=4, dtype=DType.FLOAT32, op=ReduceOp.SUM):
    """('small', 0), ('split', k) or ('tcp', count): what executor._execute_offload does with
    an allreduce of nbytes."""
    count = max(int(nbytes) // esize, 1)
    if off.small_route(count, esize, dtype, op):
        return "small", 0
    k = off.split(KIND, count, 1, esize, dtype, op)
    if k is None:
        return "tcp", count
    return "split", int(k)


def ina_part(ranks, nelem, esize, prm, chan, rtt_s=None, agg=None):
    """The INA share of one allreduce: per rank an upload (its nelem elements in datagrams),
    a download streaming behind every rank's upload, and the last datagram's result after
    every rank's last datagram. Ranks 0..ranks-1, the aggregator is rank `agg` (default
    `ranks`: the workload's host_of maps it to fabric.agg_host). rtt_s: one datagram's round
    trip without queueing; the window caps every flow at window x datagram / rtt_s."""
    agg = ranks if agg is None else agg
    n = ranks
    nch, ce = prm.chunks(nelem, esize)
    last = (int(nelem) - (nch - 1) * ce) * esize + prm.overhead
    wire = int(nelem) * esize + nch * prm.overhead
    r = np.arange(n)
    up, down, tail = r, n + r, 2 * n + r
    src = np.r_[r, np.full(2 * n, agg)]
    dst = np.r_[np.full(n, agg), r, r]
    nb = np.r_[np.full(n, float(wire)), np.full(n, float(wire - last)), np.full(n, float(last))]
    dep_t = np.r_[np.repeat(down, n), np.repeat(tail, n), tail]
    dep_p = np.r_[np.tile(up, n), np.tile(up, n), down]
    dep_k = np.r_[np.full(n * n, STREAM), np.full(n * n, FULL), np.full(n, FULL)]
    wl = Workload(n + 1, np.full(3 * n, NET), nb, src, dst, np.full(3 * n, chan),
                  np.r_[np.ones(n, bool), np.zeros(2 * n, bool)], (dep_t, dep_p, dep_k),
                  step=np.r_[np.zeros(n), np.ones(n), np.full(n, 2)],
                  label=f"nezha INA allreduce {n} ranks, {nelem} elements, {prm.describe()}")
    if rtt_s and nch > prm.window:  # a collective of at most W datagrams is in flight whole
        cap = prm.window * (prm.chunk_bytes + prm.overhead) / rtt_s
        wl.rate_cap = np.full(3 * n, cap)
    wl.ina_chunks = nch
    return wl


def rtt(prm, rate_Bps, latency_s, alpha_s):
    """One datagram's round trip without queueing: both hops' latency and software alpha,
    and a store-and-forward of the datagram at the service and at the rank."""
    return 2 * (latency_s + alpha_s) + 2 * (prm.chunk_bytes + prm.overhead) / rate_Bps


def ping_rtt(prm, rate_Bps, latency_s, alpha_s):
    """A PING's round trip (header only), what the client measures at registration for its
    window (InaClient.rtt_s): both hops' latency and software alpha, the headers' bytes."""
    return 2 * (latency_s + alpha_s) + 2 * prm.overhead / rate_Bps


def ina_alpha(tcp_alpha):
    """Software latency of a hop through the service: INA_HOP_FACTOR TCP steps (the
    planner's constant, costmodel.ina_small_time)."""
    return INA_HOP_FACTOR * float(tcp_alpha)


def workload(off, pl, nbytes, prm, ina_chan, esize=4, rtt_s=None, dtype=DType.FLOAT32,
             op=ReduceOp.SUM):
    """(Workload, route, k): one allreduce of nbytes as the communicator with an INA rail
    runs it. TCP ops on the planner's channels (ranks 0..N-1), INA tasks on channel
    ina_chan with the aggregator as rank N. k: the elements [0, k) the TCP rails reduce."""
    n = pl.ranks
    count = max(int(nbytes) // esize, 1)
    how, k = route(off, nbytes, esize, dtype, op)
    if how == "tcp":
        wl, plan = N.workload("allreduce", count * esize, pl, esize)
        wl.tcp_tasks, wl.plan = wl.ntasks, plan
        return wl, how, count
    ina = ina_part(n, count - k, esize, prm, ina_chan, rtt_s)
    if how == "small" or k == 0:
        ina.tcp_tasks, ina.plan = 0, None
        return ina, how, k
    tcp, plan = N.workload("allreduce", k * esize, pl, esize)
    wl = concat([tcp, ina], label=f"nezha TCP [0, {k}) + INA [{k}, {count})")
    wl.tcp_tasks, wl.plan = tcp.ntasks, plan
    wl.ina_chunks = ina.ina_chunks
    return wl, how, k


def copy_s(nbytes_ina, procs=4, rate=None):
    """What InaOffload.start copies before both parts run (its INA share: out of place into
    the output, in place a snapshot), every rank at once: failover.SNAPSHOT_BPS, the
    per-process copy rate of 4 processes on the lab's 2-core VM."""
    from nezha.sim.failover import SNAPSHOT_BPS
    return float(nbytes_ina) / (rate or SNAPSHOT_BPS * 4 / max(procs, 1))


def part_times(wl, res, ranks):
    """Per rank: (time to its last TCP op, time to its last INA result), s from the call's
    start (0 where the part is empty)."""
    end = np.where(np.isnan(res.t_end), 0.0, res.t_end)
    ntcp = getattr(wl, "tcp_tasks", 0)
    tcp = np.zeros(ranks)
    ina = np.zeros(ranks)
    idx = np.arange(wl.ntasks)
    t_sel, i_sel = idx < ntcp, idx >= ntcp
    for side in (wl.src, wl.dst):
        m = t_sel & (side < ranks)
        np.maximum.at(tcp, side[m], end[m])
    m = i_sel & (wl.dst < ranks)
    np.maximum.at(ina, wl.dst[m], end[m])
    return tcp, ina


def learn(off, k, count, esize, tcp_t, ina_t):
    """What InaOffload.finish feeds the split model after a split call: the MAX over the
    ranks of each part's time (agreed over TCP), in ns."""
    off.model.learn(KIND, k * esize, int(max(tcp_t) * 1e9), (count - k) * esize,
                    int(max(ina_t) * 1e9))


def chan_times(wl, res, ranks, nchan):
    """Per rank and TCP channel, the time to the rank's last op there (benchloop.call's
    feed for the TCP part's cost model)."""
    end = np.where(np.isnan(res.t_end), 0.0, res.t_end)[:wl.tcp_tasks]
    chan_t = np.zeros((ranks, nchan))
    for side in (wl.src[:wl.tcp_tasks], wl.dst[:wl.tcp_tasks]):
        np.maximum.at(chan_t, (side, np.minimum(wl.chan[:wl.tcp_tasks], nchan - 1)), end)
    return chan_t


class Rail:
    """One communicator with TCP rails and an INA rail on a multi-rail fabric whose last
    rail is the INA one (its switch holds the aggregator): what one call costs, and the
    learning after it, as the communicator does both."""

    def __init__(self, pl, off, prm, fab, alpha_tcp, agree_s=0.0, copy_rate=None,
                 latency=0.0, rtt_rate=None):
        """rtt_rate: B/s a datagram crosses a link at in the window's round trip (default
        the INA rail's rate; the lab's tbf passes it at the bucket's peak while it holds
        tokens, rail_of gives that)."""
        self.pl, self.off, self.prm, self.fab = pl, off, prm, fab
        self.n = pl.ranks
        self.ina_rail = fab.rails - 1
        if fab.agg_host is None or self.ina_rail < 1 or pl.nchan != self.ina_rail:
            raise FabricError(f"rails={fab.rails}: give the TCP rails ({pl.nchan}) then one "
                              "INA rail, with an aggregator (aggregator_gbps)")
        a = list(np.broadcast_to(np.asarray(alpha_tcp, float), (self.ina_rail,)))
        self.alpha = a + [ina_alpha(max(a) if a else 0.0)]
        rate = fab.rates[self.ina_rail] * 1e9 / 8
        if not prm.window_given:  # the client's window: its rate x its PINGs' round trip
            prm = copy.copy(prm)
            prm.window = default_window(prm.chunk_bytes, rate,
                                        ping_rtt(prm, rtt_rate or rate, latency, self.alpha[-1]))
            self.prm = prm
        self.rtt_s = rtt(prm, rtt_rate or rate, latency, self.alpha[-1])
        self.host_of = np.r_[fab.place(self.n), fab.agg_host]
        self.agree_s, self.copy_rate = float(agree_s), copy_rate

    def call(self, nbytes, buckets=None, esize=4, learn_split=True, tol=1e-4):
        """One allreduce of nbytes: a dict with route, k, per-rank times (s, from the first
        rank's entry: the copy, both parts, the agreement), each part's times."""
        from nezha.sim import network as NW
        count = max(int(nbytes) // esize, 1)
        wl, how, k = workload(self.off, self.pl, nbytes, self.prm, self.ina_rail, esize,
                              self.rtt_s)
        pre = copy_s((count - k) * esize, rate=self.copy_rate) if how == "split" else 0.0
        if buckets is not None and pre:
            buckets.idle(pre)
        res = NW.simulate(wl, self.fab, self.host_of, "rail", 1, self.alpha, tol=tol,
                          buckets=buckets)
        tcp_t, ina_t = part_times(wl, res, self.n)
        post = 0.0
        if how == "split":
            if learn_split:
                learn(self.off, k, count, esize, tcp_t, ina_t)
            post = self.agree_s
            if buckets is not None and post:
                buckets.idle(post)
        t = pre + np.maximum(tcp_t, ina_t) + post
        return {"route": how, "k": k, "t_rank": t, "tcp_t": tcp_t, "ina_t": ina_t, "wl": wl,
                "res": res, "plan": wl.plan}

    def converged(self, nbytes, calls=8, esize=4):
        """The call after `calls` calls of nbytes have taught the split model (flat links)."""
        out = None
        for _ in range(calls):
            out = self.call(nbytes, None, esize)
            if out["route"] != "split":
                break
        return out


def lab_rails(run):
    """The TCP rail indices of a nezha-ina bench run: its NEZHA_SOCKET_IFNAME (compare's
    {tcp_ifnames}); the INA rail is the first one left."""
    env = (run or {}).get("env") or {}
    names = [x.strip() for x in (env.get("NEZHA_SOCKET_IFNAME") or "").split(",") if x.strip()]
    tcp = sorted(int(x[4:]) for x in names if x.startswith("rail") and x[4:].isdigit())
    return tcp


def rail_of(doc, run):
    """A Rail for one nezha-ina run of a compare document, as that run's communicator was:
    the lab's rates (TCP rails at tbf's TCP goodput, the INA rail at its rate: its datagrams
    carry their headers), its planner (benchloop.planner_then, lab_overrides, the probe),
    its INA settings. Returns (fabric, planner, offload, InaParams, rates_bps in the
    fabric's rail order: the TCP rails, then the INA rail)."""
    from nezha.lab import shaping
    from nezha.sim import benchloop as BL
    from nezha.sim import fabric as F
    lab = doc.get("lab") or {}
    n, rates_bps = int(lab["hosts"]), list(lab["rates_bps"])
    tcp = lab_rails(run)
    rest = [i for i in range(len(rates_bps)) if i not in tcp]
    if not tcp or not rest:
        names = (run.get("env") or {}).get("NEZHA_SOCKET_IFNAME")
        raise ValueError(f"run {run.get('system')}: no TCP rail or no INA rail in its "
                         f"NEZHA_SOCKET_IFNAME ({names})")
    ina = rest[0]
    mtu = lab.get("mtu") or shaping.DEFAULT_MTU
    good = shaping.goodput_ceiling(mtu)
    bps = [rates_bps[i] for i in tcp] + [rates_bps[ina]]
    fab = F.MultiRail(n, len(bps), [b * good / 1e9 for b in bps[:-1]] + [bps[-1] / 1e9], 0.0,
                      aggregator_gbps=float("inf"))
    env = run.get("env") or {}
    over = {k[6:]: v for k, v in env.items() if k.startswith("NEZHA_INA_")}
    pl = BL.planner_then(N.make_planner(n, fab.place(n), len(tcp), None, 1,
                                        BL.lab_overrides(doc, run)), doc)
    pl.piece_bytes = 1 << 20
    if run.get("doc"):
        BL.seed_probe(pl, run["doc"], tcp)
        BL.seed_step_latency(pl, run["doc"])
    off = offload(pl, BL.failover_of(run.get("doc"), len(tcp)), overrides=over)
    prm = InaParams(mtu, int(over.get("INA_CHUNK") or 0) or 0, int(over.get("INA_WINDOW") or 0))
    return fab, pl, off, prm, bps


def replays(doc, alpha, min_size=64 << 10, refill=True, system="nezha-ina", copy_rate=None,
            agree=True, variants=(False, True), max_runs=None):
    """Every nezha-ina allreduce run of a compare document, replayed as benchloop.replays
    replays nezha's TCP runs (the bench's calls in order, the planner and the split model
    learning as the ranks' did, a barrier between calls): {False: [...], True: [...]}, one
    {nbytes: predicted s} per run, flat links (False) or with the lab's tbf buckets (True).
    A split call starts with the copy of its INA share and ends with the agreement (the
    lab's small-allreduce latency, as the barrier). alpha: the TCP rails' s per transfer.
    variants: which of flat (False) and tbf (True) to run; max_runs: the first so many runs."""
    from nezha.sim import benchloop as BL
    from nezha.sim import bucket as B
    gap = BL.small_latency((doc.get("summary") or {}).get("allreduce", {}).get(system) or [])
    budget = (doc.get("options") or {}).get("time_budget")
    out = {False: [], True: []}
    runs = [run for run in doc.get("runs") or [] if run.get("system") == system
            and run.get("collective") == "allreduce" and run.get("doc")]
    for run in runs[:max_runs]:
        for tbf in variants:
            fab, pl, off, prm, bps = rail_of(doc, run)
            rail = Rail(pl, off, prm, fab, alpha, gap if agree else 0.0, copy_rate,
                        rtt_rate=B.LAB_PEAK_BPS / 8)
            bk = B.lab_buckets(fab, bps)
            if not tbf:
                bk.burst[bk.shaped] = 0.0
                bk.tokens[:] = 0.0
            failover = BL.failover_of(run["doc"], pl.nchan)

            def step(nb, rail=rail, bk=bk, failover=failover):
                got = rail.call(nb, bk)
                synced = False
                if got["route"] != "small" and got["plan"] is not None:
                    k = got["k"] * 4
                    chan_t = chan_times(got["wl"], got["res"], rail.n, pl.nchan)
                    synced = BL.feed(pl, got["plan"], k, chan_t,
                                     lazy=BL.lazy_of(pl, got["plan"], k, failover))
                extra = BL.SYNC_S if synced else 0.0
                bk.idle(gap + extra)
                t = got["t_rank"]
                return (f"{got['route']} k={got['k']} {got['plan']!r}", float(t.mean()) + extra,
                        float(t.max()) + extra)
            rows = BL.replay(pl, fab, rail.host_of, BL.schedule_of(run["doc"], min_size),
                             rail.alpha, bk, gap, budget, refill, failover, step=step)
            out[tbf].append({r["nbytes"]: r["predicted_s"] for r in rows})
    return out
