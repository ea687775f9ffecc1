"""Fabrics built from a few parameters: links as numpy arrays, paths by index arithmetic.

A fabric has hosts, each with one NIC per rail (rail planes: multi-rail; one rail: leaf-spine
and fat-tree), and directed links with a capacity (bytes/s) and a latency (s). Every host
also has a shared-memory link (transfers between ranks of one host) and, when a CPU cost
per byte is given, a CPU link that every receive-and-reduce and local reduce crosses, so
that reductions on one host share its CPU as flows share a wire.

Paths between two hosts are numbered 0..npaths-1; `links_of(src, dst, rail, choice)` gives
their link ids (vectorised, -1 padded). A path choice means: the spine (leaf-spine), the
aggregation switch (fat-tree, same pod) or the core switch (fat-tree, other pod); Ethereal
and ECMP pick one, spraying uses them all.
"""
import numpy as np

GBIT = 1e9 / 8  # bytes/s in one Gb/s


class FabricError(ValueError):
    """An impossible fabric or placement; the message names the parameter."""


def _need(cond, param, value, what):
    if not cond:
        raise FabricError(f"{param}={value!r}: {what}")


class Fabric:
    """Links, hosts and paths of one fabric (build with multirail, leafspine or fattree)."""

    def __init__(self, name, hosts, rails):
        self.name = name
        self.hosts = hosts
        self.rails = rails
        self._cap, self._lat, self._names = [], [], []
        self.failed = set()

    # ---- building ---------------------------------------------------------------------

    def _add(self, n, cap, lat, name_fn):
        first = len(self._cap)
        self._cap += [float(cap)] * n
        self._lat += [float(lat)] * n
        self._names.append((first, n, name_fn))
        return np.arange(first, first + n)

    def _host_links(self, shm_rate, shm_latency, cpu_cost):
        self.shm = self._add(self.hosts, shm_rate, shm_latency, lambda i: f"host{i}:shm")
        self.cpu = (self._add(self.hosts, 1.0 / cpu_cost, 0.0, lambda i: f"host{i}:cpu")
                    if cpu_cost > 0 else None)

    def _done(self):
        self.cap = np.array(self._cap)
        self.lat = np.array(self._lat)
        self.nlinks = len(self.cap)
        _need(self.nlinks > 0, "links", 0, "the fabric has no links")

    def link_name(self, link):
        """A readable name of link id `link` (e.g. leaf3->spine7)."""
        for first, n, fn in self._names:
            if first <= link < first + n:
                return fn(link - first)
        raise IndexError(link)

    def link_names(self):
        """Names of every link, by id."""
        return [self.link_name(i) for i in range(self.nlinks)]

    # ---- placement --------------------------------------------------------------------

    def place(self, ranks, ranks_per_host=1):
        """host_of[rank]: ranks fill hosts in order, ranks_per_host on each."""
        _need(ranks >= 1, "ranks", ranks, "needs at least one rank")
        _need(ranks_per_host >= 1, "ranks_per_host", ranks_per_host, "must be at least 1")
        _need(ranks <= self.hosts * ranks_per_host, "ranks", ranks,
              f"the fabric holds at most hosts x ranks_per_host = {self.hosts} x "
              f"{ranks_per_host} = {self.hosts * ranks_per_host} ranks ({self.describe()})")
        return np.arange(ranks) // ranks_per_host

    # ---- paths ------------------------------------------------------------------------

    def npaths(self, src, dst):
        """Number of equal-cost paths from host src to host dst (arrays)."""
        raise NotImplementedError

    def links_of(self, src, dst, rail, choice):
        """(n, hops) link ids of path `choice` from src to dst on `rail`, -1 padded."""
        raise NotImplementedError

    def group_of(self, host):
        """The switch group a host hangs off (leaf or edge switch): Ethereal's rack."""
        return np.asarray(host)

    def uplink_of(self, src, dst, choice):
        """Which uplink of src's group path `choice` leaves by (Theorem 1's unit)."""
        return np.asarray(choice)

    def describe(self):
        """One line naming the fabric and its parameters."""
        return self.name

    def fail(self, link):
        """Mark a link failed (capacity 0 from the simulator's point of view)."""
        _need(0 <= link < self.nlinks, "fail_link", link, f"no such link (0..{self.nlinks - 1})")
        self.failed.add(int(link))

    def find_link(self, name):
        """Link id by name (e.g. leaf0->spine0)."""
        for i in range(self.nlinks):
            if self.link_name(i) == name:
                return i
        raise FabricError(f"fail_link={name!r}: no link of that name in {self.describe()}")


def _check_rates(**kw):
    for k, v in kw.items():
        _need(v > 0, k, v, "must be positive")


def _check_lat(**kw):
    for k, v in kw.items():
        _need(v >= 0, k, v, "must not be negative")


class MultiRail(Fabric):
    """N hosts x R rail planes; every plane one non-blocking switch (rate per plane)."""

    def __init__(self, hosts, rails, rate_gbps=100.0, latency=1e-6, shm_gbps=32.0,
                 shm_latency=5e-6, cpu_cost=0.0, aggregator_gbps=None):
        """aggregator_gbps: put an in-network aggregator in every rail's switch (NetReduce,
        SwitchML): one more host, index `hosts` (self.agg_host), that a rank reaches over its
        uplink alone and that reaches a rank over its downlink alone; the aggregator's
        input rate, over all ports, is aggregator_gbps (inf: line rate on every port)."""
        _need(hosts >= 1, "hosts", hosts, "needs at least one host")
        _need(rails >= 1, "rails", rails, "a host without rails has no links to the others")
        rates = list(rate_gbps) if np.ndim(rate_gbps) else [rate_gbps] * rails
        lats = list(latency) if np.ndim(latency) else [latency] * rails
        _need(len(rates) == rails, "rate_gbps", rate_gbps, f"give one rate or {rails}")
        _need(len(lats) == rails, "latency", latency, f"give one latency or {rails}")
        _check_rates(rate_gbps=min(rates), shm_gbps=shm_gbps)
        _check_lat(latency=min(lats), shm_latency=shm_latency, cpu_cost=cpu_cost)
        super().__init__(f"multirail {hosts}x{rails}", hosts, rails)
        self.rates = rates
        self.agg_host = None
        if aggregator_gbps is not None:
            _check_rates(aggregator_gbps=aggregator_gbps)
            self.agg = self._add(rails, aggregator_gbps * GBIT, 0.0,
                                 lambda r: f"rail{r}:aggregator")
            self.agg_host = hosts
        self.up = np.stack([self._add(hosts, rates[r] * GBIT, lats[r] / 2,
                                      lambda i, r=r: f"host{i}->rail{r}") for r in range(rails)])
        self.down = np.stack([self._add(hosts, rates[r] * GBIT, lats[r] / 2,
                                        lambda i, r=r: f"rail{r}->host{i}")
                              for r in range(rails)])
        self._host_links(shm_gbps * GBIT, shm_latency, cpu_cost)
        self._done()

    def describe(self):
        """One line naming the fabric and its parameters."""
        return (f"multi-rail: {self.hosts} hosts x {self.rails} rails at "
                f"{'+'.join(f'{r:g}' for r in self.rates)} Gb/s")

    def npaths(self, src, dst):
        """Number of equal-cost paths from host src to host dst (arrays)."""
        return np.ones(np.broadcast(src, dst).shape, np.int64)

    def links_of(self, src, dst, rail, choice):
        """(n, hops) link ids of the path from src to dst on `rail`, -1 padded."""
        src, dst, rail = np.broadcast_arrays(*(np.asarray(x, np.int64) for x in (src, dst, rail)))
        out = np.full(src.shape + (2,), -1, np.int64)
        if self.agg_host is not None:  # to and from the switch's aggregator
            to_agg, from_agg = dst == self.agg_host, src == self.agg_host
            s_, d_ = np.where(from_agg, 0, src), np.where(to_agg, 0, dst)
            out[..., 0] = np.where(from_agg, self.down[rail, d_], self.up[rail, s_])
            out[..., 1] = np.where(to_agg, self.agg[rail], np.where(from_agg, -1,
                                                                      self.down[rail, d_]))
            same = (src == dst) & ~to_agg
            out[same, 0] = self.shm[src[same]]
            out[same, 1] = -1
            return out
        same = src == dst
        out[..., 0] = np.where(same, self.shm[src], self.up[rail, src])
        out[..., 1] = np.where(same, -1, self.down[rail, dst])
        return out


class LeafSpine(Fabric):
    """Two tiers: leaves x spines, hosts_per_leaf hosts under every leaf, one NIC each."""

    def __init__(self, leaves, spines, hosts_per_leaf, rate_gbps=400.0, latency=0.5e-6,
                 uplink_gbps=None, shm_gbps=32.0, shm_latency=5e-6, cpu_cost=0.0):
        _need(leaves >= 1, "leaves", leaves, "needs at least one leaf")
        _need(hosts_per_leaf >= 1, "hosts_per_leaf", hosts_per_leaf, "needs at least one host")
        _need(spines >= 1 or leaves == 1, "spines", spines,
              f"with {leaves} leaves and no spine the leaves are disconnected")
        uplink_gbps = rate_gbps if uplink_gbps is None else uplink_gbps
        _check_rates(rate_gbps=rate_gbps, uplink_gbps=uplink_gbps, shm_gbps=shm_gbps)
        _check_lat(latency=latency, shm_latency=shm_latency, cpu_cost=cpu_cost)
        H = leaves * hosts_per_leaf
        super().__init__(f"leafspine {leaves}x{spines}x{hosts_per_leaf}", H, 1)
        self.leaves, self.spines, self.hpl = leaves, spines, hosts_per_leaf
        self.rate, self.uplink = rate_gbps, uplink_gbps
        bw, ubw = rate_gbps * GBIT, uplink_gbps * GBIT
        self.hup = self._add(H, bw, latency, lambda i: f"host{i}->leaf{i // hosts_per_leaf}")
        self.hdown = self._add(H, bw, latency, lambda i: f"leaf{i // hosts_per_leaf}->host{i}")
        self.lup = self._add(leaves * spines, ubw, latency,
                             lambda i: f"leaf{i // spines}->spine{i % spines}").reshape(
                                 leaves, spines) if spines else np.zeros((leaves, 0), int)
        self.sdown = self._add(leaves * spines, ubw, latency,
                               lambda i: f"spine{i // leaves}->leaf{i % leaves}").reshape(
                                   spines, leaves) if spines else np.zeros((0, leaves), int)
        self._host_links(shm_gbps * GBIT, shm_latency, cpu_cost)
        self._done()

    def describe(self):
        """One line naming the fabric and its parameters."""
        return (f"leaf-spine: {self.leaves} leaves x {self.spines} spines x "
                f"{self.hpl} hosts per leaf, {self.rate:g} Gb/s (uplinks {self.uplink:g})")

    def group_of(self, host):
        """The leaf of each host."""
        return np.asarray(host) // self.hpl

    def npaths(self, src, dst):
        """Spines between different leaves, else one path."""
        src, dst = np.asarray(src), np.asarray(dst)
        return np.where(src // self.hpl == dst // self.hpl, 1, self.spines)

    def links_of(self, src, dst, rail, choice):
        """(n, 4) link ids: host->leaf, leaf->spine, spine->leaf, leaf->host (-1 padded)."""
        src, dst, choice = np.broadcast_arrays(*(np.asarray(x, np.int64)
                                                 for x in (src, dst, choice)))
        ls, ld = src // self.hpl, dst // self.hpl
        out = np.full(src.shape + (4,), -1, np.int64)
        same_host, same_leaf = src == dst, ls == ld
        out[..., 0] = np.where(same_host, self.shm[src], self.hup[src])
        out[..., 1] = np.where(same_host, -1, np.where(same_leaf, self.hdown[dst], -1))
        far = ~same_leaf
        if far.any():
            c = choice[far] % self.spines
            out[far, 1] = self.lup[ls[far], c]
            out[far, 2] = self.sdown[c, ld[far]]
            out[far, 3] = self.hdown[dst[far]]
        return out


class FatTree(Fabric):
    """Three tiers, k pods: k/2 edge and k/2 aggregation switches per pod, (k/2)^2 cores.

    hosts_per_edge defaults to k/2 (the k^3/4-host fat-tree); more hosts with faster
    uplinks (uplink_gbps) give Ethereal's 512-GPU k=8 fabric (16 GPUs per ToR, 4 x 1600)."""

    def __init__(self, k, hosts_per_edge=None, rate_gbps=400.0, latency=0.5e-6,
                 uplink_gbps=None, shm_gbps=32.0, shm_latency=5e-6, cpu_cost=0.0):
        _need(k >= 2 and k % 2 == 0, "k", k, "must be an even number >= 2")
        hpe = k // 2 if hosts_per_edge is None else hosts_per_edge
        _need(hpe >= 1, "hosts_per_edge", hpe, "needs at least one host")
        uplink_gbps = rate_gbps if uplink_gbps is None else uplink_gbps
        _check_rates(rate_gbps=rate_gbps, uplink_gbps=uplink_gbps, shm_gbps=shm_gbps)
        _check_lat(latency=latency, shm_latency=shm_latency, cpu_cost=cpu_cost)
        h = k // 2
        E = k * h  # edge switches (and aggregation switches)
        H = E * hpe
        super().__init__(f"fattree k={k}", H, 1)
        self.k, self.h, self.hpe = k, h, hpe
        self.rate, self.uplink = rate_gbps, uplink_gbps
        bw, ubw = rate_gbps * GBIT, uplink_gbps * GBIT
        self.hup = self._add(H, bw, latency, lambda i: f"host{i}->edge{i // hpe}")
        self.hdown = self._add(H, bw, latency, lambda i: f"edge{i // hpe}->host{i}")
        # edge e (global) to aggregation a of its pod (local index j)
        self.eup = self._add(E * h, ubw, latency,
                             lambda i: f"edge{i // h}->agg{(i // h) // h * h + i % h}"
                             ).reshape(E, h)
        self.adown = self._add(E * h, ubw, latency,
                               lambda i: f"agg{i // h}->edge{(i // h) // h * h + i % h}"
                               ).reshape(E, h)
        # aggregation A = pod*h + j connects to cores j*h .. j*h+h-1
        self.aup = self._add(E * h, ubw, latency,
                             lambda i: f"agg{i // h}->core{(i // h) % h * h + i % h}"
                             ).reshape(E, h)
        self.cdown = self._add(h * h * k, ubw, latency,
                               lambda i: f"core{i // k}->agg{(i % k) * h + (i // k) // h}"
                               ).reshape(h * h, k)
        self._host_links(shm_gbps * GBIT, shm_latency, cpu_cost)
        self._done()

    def describe(self):
        """One line naming the fabric and its parameters."""
        return (f"fat-tree: k={self.k}, {self.hosts} hosts ({self.hpe} per edge), "
                f"{self.rate:g} Gb/s (uplinks {self.uplink:g})")

    def group_of(self, host):
        """The edge switch (ToR) of each host."""
        return np.asarray(host) // self.hpe

    def npaths(self, src, dst):
        """1 under one edge, k/2 in one pod, (k/2)^2 between pods."""
        es, ed = np.asarray(src) // self.hpe, np.asarray(dst) // self.hpe
        return np.where(es == ed, 1, np.where(es // self.h == ed // self.h, self.h,
                                              self.h * self.h))

    def uplink_of(self, src, dst, choice):
        """The edge uplink a path leaves by (aggregation index in the pod)."""
        es, ed = np.asarray(src) // self.hpe, np.asarray(dst) // self.hpe
        return np.where(es // self.h == ed // self.h, choice % self.h, choice // self.h)

    def links_of(self, src, dst, rail, choice):
        """(n, 6) link ids of path `choice` (-1 padded)."""
        src, dst, choice = np.broadcast_arrays(*(np.asarray(x, np.int64)
                                                 for x in (src, dst, choice)))
        h, k = self.h, self.k
        es, ed = src // self.hpe, dst // self.hpe
        ps, pd = es // h, ed // h
        out = np.full(src.shape + (6,), -1, np.int64)
        same_host, same_edge = src == dst, es == ed
        out[..., 0] = np.where(same_host, self.shm[src], self.hup[src])
        out[..., 1] = np.where(same_edge & ~same_host, self.hdown[dst], -1)
        pod = ~same_edge & (ps == pd)
        if pod.any():
            j = choice[pod] % h
            out[pod, 1] = self.eup[es[pod], j]
            out[pod, 2] = self.adown[pd[pod] * h + j, ed[pod] % h]
            out[pod, 3] = self.hdown[dst[pod]]
        far = ps != pd
        if far.any():
            c = choice[far] % (h * h)
            j = c // h
            out[far, 1] = self.eup[es[far], j]
            out[far, 2] = self.aup[ps[far] * h + j, c % h]
            out[far, 3] = self.cdown[c, pd[far]]
            out[far, 4] = self.adown[pd[far] * h + j, ed[far] % h]
            out[far, 5] = self.hdown[dst[far]]
        return out


def build(kind, **kw):
    """A fabric by kind name: multirail, leafspine, fattree."""
    kinds = {"multirail": MultiRail, "leafspine": LeafSpine, "fattree": FatTree}
    if kind not in kinds:
        raise FabricError(f"fabric={kind!r}: choose one of {', '.join(kinds)}")
    return kinds[kind](**kw)
