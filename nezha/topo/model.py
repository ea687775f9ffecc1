"""What a topology holds for nezha: packages, NUMA nodes, NICs, GPUs, and which NIC is near which GPU.

Built from a flat list of hwloc-shaped objects (nezha._core.hwloc.load(), or nezha/topo/sysfs.py
when hwloc is absent): each has a type ("Machine", "Package", "NUMANode", "Core", "PU", "Bridge",
"PCIDev", "OSDev", ...), a parent position, cpuset and nodeset (None for I/O objects), infos, and
"pci" or "osdev_type" where they apply. The rules follow hwloc's model, not particular machines.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

# hwloc 2.x enum hwloc_obj_osdev_type_e
OSDEV_BLOCK, OSDEV_GPU, OSDEV_NETWORK, OSDEV_OPENFABRICS, OSDEV_DMA, OSDEV_COPROC = range(6)

PCI_CLASS_3D = 0x0302   # "3D controller": compute GPUs without a display (Tesla, A100, ...)

# OS devices that mean "a compute GPU": subtype or Backend info, else the name hwloc gives them.
# A DRM "card0" is not one: a server's BMC display controller carries only that.
GPU_BACKENDS = ("CUDA", "RSMI", "NVML", "LevelZero", "OpenCL")   # also the naming preference
_GPU_NAME = re.compile(r"^(cuda|rsmi|nvml|ze|opencl)\d")
_NAME_BACKEND = {"cuda": "CUDA", "rsmi": "RSMI", "nvml": "NVML", "ze": "LevelZero",
                 "opencl": "OpenCL"}


@dataclass
class Package:
    """One processor package (socket)."""
    index: int            # os_index
    cores: int
    pus: int
    numa_nodes: list[int]


@dataclass
class NumaNode:
    """One NUMA node: its CPUs and the package it sits in (None if it spans several)."""
    index: int            # os_index, as in numactl and /sys/devices/system/node
    package: int | None
    cpus: list[int]


@dataclass
class Nic:
    """One PCI network function carrying a network and/or OpenFabrics OS device."""
    name: str                      # the OpenFabrics device (mlx5_0) if any, else the interface (eth0)
    busid: str | None              # PCI bus id, None for a NIC outside the PCI tree
    numa_node: int | None          # None when its locality spans several NUMA nodes
    kind: str                      # ethernet, infiniband, roce, usnic, efa, omnipath, rdma
    netdevs: list[str] = field(default_factory=list)
    ofdevs: list[str] = field(default_factory=list)
    speed_mbps: int | None = None  # the link's speed where known (this machine's sysfs)
    pci_link_gbps: float | None = None   # PCIe link bandwidth hwloc reports, GB/s
    model: str | None = None
    locality: list[int] = field(default_factory=list)   # NUMA nodes it is attached near


@dataclass
class Gpu:
    """One PCI function that is a compute GPU, with the NIC(s) nearest to it."""
    name: str                      # cuda0 / rsmi0 / nvml0 / opencl0d0, or gpu@<busid>
    busid: str | None
    numa_node: int | None
    backends: list[str]
    model: str | None = None
    nearest_nics: list[str] = field(default_factory=list)
    nic_hops: int | None = None    # edges of hwloc's tree between the GPU and its nearest NIC


@dataclass
class Topology:
    """Everything `nezha topo` reports about one machine."""
    source: str                    # "hwloc 2.8 (this machine)", "hwloc 2.8 XML x.xml", "sysfs"
    this_system: bool
    machine: dict
    packages: list[Package]
    numa_nodes: list[NumaNode]
    cores: int
    pus: int
    nics: list[Nic]
    gpus: list[Gpu]
    numa_distances: dict | None    # {"nodes": [os_index...], "values": [[...]], "name": ...}
    notes: list[str] = field(default_factory=list)   # what the probe could not tell
    core_cpus: list[list[int]] = field(default_factory=list, repr=False)  # PUs of each core

    def to_json(self) -> dict:
        """JSON-ready dict: packages, numa_nodes, nics, gpus (lists of objects) and the rest."""
        d = asdict(self)
        del d["core_cpus"]   # for binding; the counts say enough on screen
        return d


class _Tree:
    """Parent links and depths of the object list, for ancestors and hop counts."""

    def __init__(self, objects):
        self.objs = objects
        self.depth = []
        for o in objects:   # parents come before children (depth-first order)
            p = o["parent"]
            self.depth.append(0 if p < 0 else self.depth[p] + 1)

    def ancestors(self, i):
        """i, its parent, ..., the root."""
        out = []
        while i >= 0:
            out.append(i)
            i = self.objs[i]["parent"]
        return out

    def hops(self, a, b):
        """Edges between a and b through their lowest common ancestor."""
        up = set(self.ancestors(a))
        for c in self.ancestors(b):
            if c in up:
                return self.depth[a] + self.depth[b] - 2 * self.depth[c]
        raise ValueError("objects in two trees")

    def first_up(self, i, test):
        """Nearest strict ancestor of i that passes test, or None."""
        i = self.objs[i]["parent"]
        while i >= 0:
            if test(self.objs[i]):
                return i
            i = self.objs[i]["parent"]
        return None

    def nodeset(self, i):
        """NUMA nodes of i's locality: the nodeset of its first ancestor with one (I/O has none)."""
        while i >= 0 and self.objs[i].get("nodeset") is None:
            i = self.objs[i]["parent"]
        return self.objs[i]["nodeset"] if i >= 0 else []


def _gpu_backend(o) -> str | None:
    """The compute backend an OS device stands for, or None (DRM card, disk, NIC...)."""
    for word in (o.get("subtype"), o["infos"].get("Backend")):
        if word in GPU_BACKENDS:
            return word
    m = _GPU_NAME.match(o.get("name") or "")
    return _NAME_BACKEND[m[1]] if m else None


def _nic_kind(netdevs, ofdevs) -> str:
    """ethernet, infiniband, roce, usnic, efa, omnipath or rdma, from what hwloc records."""
    names = [o["name"] or "" for o in ofdevs]
    for prefix, kind in (("usnic", "usnic"), ("efa", "efa"), ("hfi1", "omnipath")):
        if any(n.startswith(prefix) for n in names):
            return kind
    # IPoIB hardware addresses are 20 bytes (59 characters), Ethernet's 6 (17).
    ipoib = any(len(o["infos"].get("Address", "")) > 17 for o in netdevs)
    lids = [v for o in ofdevs for k, v in o["infos"].items() if re.fullmatch(r"Port\d+LID", k)]
    if ipoib or any(int(v, 16) if v.startswith("0x") else int(v or 0) for v in lids):
        return "infiniband"   # LIDs are InfiniBand's; RoCE ports have LID 0
    if ofdevs:
        return "roce" if netdevs else "rdma"
    return "ethernet"


def _numa_of(tree, i) -> int | None:
    nodes = tree.nodeset(i)
    return nodes[0] if nodes and len(nodes) == 1 else None


def _sort_key_busid(busid):
    return (busid is None, busid or "")


def build(raw: dict, source: str) -> Topology:
    """Classify the objects of a loaded topology (see the module docstring)."""
    objs = raw["objects"]
    tree = _Tree(objs)
    of_type = {}
    for i, o in enumerate(objs):
        of_type.setdefault(o["type"], []).append(i)

    def count_below(i, typ):
        return sum(1 for j in of_type.get(typ, ()) if i in tree.ancestors(j))

    packages = []
    for i in of_type.get("Package", ()):
        o = objs[i]
        packages.append(Package(o["os_index"] if o["os_index"] is not None else o["logical_index"],
                                count_below(i, "Core"), count_below(i, "PU"),
                                list(o.get("nodeset") or [])))
    numa = []
    pkg_of = {p.index: set(objs[i].get("cpuset") or ()) for p, i in
              zip(packages, of_type.get("Package", ()))}
    for i in of_type.get("NUMANode", ()):
        o = objs[i]
        cpus = list(o.get("cpuset") or ())
        owners = [p for p, cs in pkg_of.items() if cpus and set(cpus) <= cs]
        numa.append(NumaNode(o["os_index"], owners[0] if len(owners) == 1 else None, cpus))
    numa.sort(key=lambda n: n.index)

    # Group OS devices by the PCI function they sit under (the function, not the OS device, is
    # the NIC or the GPU: mlx5_0 + ib0 is one NIC, cuda0 + nvml0 + opencl0d0 one GPU).
    def pci_parent(i):
        return tree.first_up(i, lambda o: o["type"] == "PCIDev")

    by_function: dict[int, list[int]] = {}
    for i in of_type.get("OSDev", ()):
        key = pci_parent(i)
        by_function.setdefault(key if key is not None else -1 - i, []).append(i)

    nics, nic_at = [], {}
    for key, devs in by_function.items():
        netdevs = [objs[i] for i in devs if objs[i].get("osdev_type") == OSDEV_NETWORK]
        ofdevs = [objs[i] for i in devs if objs[i].get("osdev_type") == OSDEV_OPENFABRICS]
        if not netdevs and not ofdevs:
            continue
        at = key if key >= 0 else devs[0]
        pci = objs[key] if key >= 0 else None
        nic = Nic(name=(ofdevs or netdevs)[0]["name"],   # the HCA, as NCCL_IB_HCA names it
                  busid=pci["pci"]["busid"] if pci else None,
                  numa_node=_numa_of(tree, at),
                  kind=_nic_kind(netdevs, ofdevs),
                  netdevs=[o["name"] for o in netdevs], ofdevs=[o["name"] for o in ofdevs],
                  pci_link_gbps=(pci["pci"]["linkspeed_gbps"] or None) if pci else None,
                  model=pci["infos"].get("PCIDevice") if pci else None,
                  locality=list(tree.nodeset(at) or ()))
        nics.append(nic)
        nic_at[nic.name] = at
    nics.sort(key=lambda n: (_sort_key_busid(n.busid), n.name))

    gpus, gpu_at = [], {}
    for i in of_type.get("PCIDev", ()):
        o = objs[i]
        devs = [objs[j] for j in by_function.get(i, ())]
        backends = {}
        for d in devs:
            b = _gpu_backend(d)
            if b and (b != "OpenCL" or d["infos"].get("OpenCLDeviceType", "GPU") == "GPU"):
                backends.setdefault(b, d["name"])
        if not backends and o["pci"]["class_id"] != PCI_CLASS_3D:
            continue
        order = [b for b in GPU_BACKENDS if b in backends]
        model = next((d["infos"]["GPUModel"] for d in devs if "GPUModel" in d["infos"]),
                     o["infos"].get("PCIDevice"))
        gpu = Gpu(name=backends[order[0]] if order else f"gpu@{o['pci']['busid']}",
                  busid=o["pci"]["busid"], numa_node=_numa_of(tree, i), backends=order,
                  model=model)
        gpus.append(gpu)
        gpu_at[gpu.name] = i
    gpus.sort(key=lambda g: _sort_key_busid(g.busid))

    for g in gpus:
        _nearest(tree, g, gpu_at[g.name], nics, nic_at)

    return Topology(
        source=source, this_system=bool(raw.get("this_system")),
        machine={k: v for k, v in objs[0]["infos"].items()
                 if k in ("DMIProductName", "DMISysVendor", "OSName", "Architecture",
                          "HostName", "CPUModel")} if objs else {},
        packages=packages, numa_nodes=numa,
        cores=len(of_type.get("Core", ())), pus=len(of_type.get("PU", ())),
        nics=nics, gpus=gpus, numa_distances=_numa_distances(raw, objs),
        notes=list(raw.get("notes", ())),
        core_cpus=[list(objs[i].get("cpuset") or ()) for i in of_type.get("Core", ())])


def _nearest(tree, gpu, at, nics, nic_at):
    """Set gpu.nearest_nics: fewest edges of hwloc's tree (its PCI tree, and the CPU tree above
    it when the path leaves the PCI tree), ties broken by sharing the GPU's NUMA node; NICs
    still tied are all nearest (the two ports of one card, say)."""
    if not nics:
        return
    gpu_nodes = set(tree.nodeset(at))

    def key(n):
        same = bool(gpu_nodes & set(tree.nodeset(nic_at[n.name])))
        return (tree.hops(at, nic_at[n.name]), not same)

    best = min(key(n) for n in nics)
    tied = [n for n in nics if key(n) == best]
    # All tied NICs are listed; RDMA-capable ones, then wider PCIe links, come first, so that
    # nearest_nics[0] is the one to use when only one is wanted.
    tied.sort(key=lambda n: (not n.ofdevs, -(n.pci_link_gbps or 0.0)))
    gpu.nearest_nics = [n.name for n in tied]
    gpu.nic_hops = best[0]


def _numa_distances(raw, objs) -> dict | None:
    """The NUMA latency matrix hwloc holds (os_index order), or None if it has none."""
    for d in raw.get("distances", ()):
        members = d["objects"]
        if not d.get("latency") or not members or None in members:
            continue
        if any(objs[i]["type"] != "NUMANode" for i in members):
            continue
        order = sorted(range(len(members)), key=lambda k: objs[members[k]]["os_index"])
        return {"name": d.get("name"),
                "nodes": [objs[members[k]]["os_index"] for k in order],
                "values": [[d["values"][a][b] for b in order] for a in order]}
    return None
