"""NEZHA_BIND: bind a rank, and so the progress and health threads it starts, near its NIC.

The NIC is found through the rank's GPU when LOCAL_RANK maps to one (the GPU's nearest NIC),
else through its rails (the first rail whose interface is a PCI NIC hwloc places), else through
the CPUs it may already run on. numa binds to the CPUs of that NIC's NUMA node; core to one
core of them, chosen by local rank. Threads inherit the binding of the thread that starts
them, so it is applied before the engine starts its threads. none (the default) binds nothing:
binding a rank that shares its host with other work can hurt it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from nezha import log


@dataclass
class Binding:
    """The CPUs chosen and why (cpus None: nothing to bind)."""
    cpus: list[int] | None
    why: str


def plan(topo, mode: str, local_rank: int, rail_ifnames=(), allowed=None) -> Binding:
    """The binding for one rank; topo is a nezha.topo.model.Topology."""
    if mode == "none":
        return Binding(None, "NEZHA_BIND=none")
    allowed = set(allowed) if allowed is not None else None
    nics = {n.name: n for n in topo.nics}
    nodes, via = [], None   # a NIC attached above several NUMA nodes is near all of them
    if 0 <= local_rank < len(topo.gpus):
        gpu = topo.gpus[local_rank]
        near = [nics[n] for n in gpu.nearest_nics if nics[n].locality]
        if near:
            nodes, via = near[0].locality, f"GPU {gpu.name}'s nearest NIC {near[0].name}"
        elif gpu.numa_node is not None:
            nodes, via = [gpu.numa_node], f"GPU {gpu.name}"
    if not nodes:
        for name in rail_ifnames:
            nic = next((n for n in topo.nics if name in n.netdevs), None)
            if nic is not None and nic.locality:
                nodes, via = nic.locality, f"rail NIC {name}"
                break
    if not nodes and allowed:
        # No NIC locality (virtual NICs): the NUMA node holding most of the allowed CPUs.
        best = max(topo.numa_nodes, key=lambda n: len(allowed & set(n.cpus)), default=None)
        if best is not None and allowed & set(best.cpus):
            nodes, via = [best.index], "the CPUs it may run on (no NIC locality known)"
    if not nodes:
        return Binding(None, "no NUMA node found for this rank's NIC: not bound")
    where = f"NUMA node{'s' if len(nodes) > 1 else ''} {','.join(map(str, nodes))}"
    cpus = sorted(c for n in topo.numa_nodes if n.index in nodes for c in n.cpus
                  if allowed is None or c in allowed)
    if not cpus:
        return Binding(None, f"{where} ({via}) has none of the allowed CPUs: not bound")
    if mode == "core":
        cores = _cores(topo, cpus)
        core = cores[local_rank % len(cores)]
        return Binding(core, f"core {local_rank % len(cores)} of {where} ({via})")
    return Binding(cpus, f"{where} ({via})")


def nearest_rails(topo, local_rank: int, rail_ifnames=(), allowed=None) -> list[int]:
    """Indices into rail_ifnames of the rank's nearest NICs: its GPU's nearest ones when
    LOCAL_RANK maps to a GPU, else those on the NUMA nodes of the CPUs it may run on when
    that is not every node (a rank free to run anywhere is near every NIC); [] unknown."""
    ifs = list(rail_ifnames)

    def rails_of(nics):
        return sorted({i for i, f in enumerate(ifs) for n in nics if f in n.netdevs})

    if 0 <= local_rank < len(topo.gpus):
        byname = {n.name: n for n in topo.nics}
        got = rails_of([byname[n] for n in topo.gpus[local_rank].nearest_nics if n in byname])
        if got:
            return got
    if allowed:
        nodes = {n.index for n in topo.numa_nodes if set(allowed) & set(n.cpus)}
        if nodes and len(nodes) < len(topo.numa_nodes):
            return rails_of([n for n in topo.nics if set(n.locality or ()) & nodes])
    return []


def near_rails(local_rank: int, rail_ifnames=()) -> list[int]:
    """nearest_rails on this machine's topology ([] when it cannot be probed)."""
    from nezha.topo import probe
    try:
        topo = probe.load()
    except Exception as e:   # placement is an optimisation: without it, local rank mod rails
        log.info("TOPO", f"no topology for rail placement ({e}): local rank mod rails")
        return []
    got = nearest_rails(topo, local_rank, rail_ifnames, os.sched_getaffinity(0))
    log.info("TOPO", f"local rank {local_rank}'s nearest rails: "
             f"{[list(rail_ifnames)[i] for i in got] or 'unknown'}")
    return got


def _cores(topo, cpus) -> list[list[int]]:
    """cpus grouped by core (PUs sharing a core), in order; one group per CPU if unknown."""
    groups = [sorted(set(c) & set(cpus)) for c in getattr(topo, "core_cpus", ()) or ()]
    groups = [g for g in groups if g]
    return groups or [[c] for c in cpus]


def apply(mode: str, local_rank: int, rail_ifnames=()) -> Binding:
    """Probe this machine and bind the calling thread (and threads started after) per mode."""
    if mode == "none":
        return Binding(None, "NEZHA_BIND=none")
    from nezha.topo import probe
    try:
        topo = probe.load()
    except Exception as e:   # a topology problem must not stop the job: run unbound
        log.warn("TOPO", f"NEZHA_BIND={mode}: no topology ({e}); not bound")
        return Binding(None, str(e))
    b = plan(topo, mode, local_rank, rail_ifnames, os.sched_getaffinity(0))
    if b.cpus:
        os.sched_setaffinity(0, b.cpus)
        log.info("TOPO", f"NEZHA_BIND={mode}: bound to CPUs {b.cpus} ({b.why})")
    else:
        log.info("TOPO", f"NEZHA_BIND={mode}: {b.why}")
    return b
