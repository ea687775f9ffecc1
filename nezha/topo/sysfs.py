"""This machine's topology from Linux sysfs, when nezha was built without hwloc.

It produces the same hwloc-shaped object list as nezha._core.hwloc.load(), so model.build()
classifies both the same way. What it cannot tell is listed in the result's "notes" (and
logged): no CUDA/ROCm/OpenCL devices (a GPU is a 3D controller, or a display controller driven
by nvidia or amdgpu), no caches, no PCI link speeds, PCI bridges only where sysfs shows them.
"""
from __future__ import annotations

import glob
import os
import re

SYS = "/sys"
_BDF = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_GPU_DRIVERS = ("nvidia", "amdgpu")
NOTES = ("no hwloc: GPUs from PCI class and driver only (no CUDA/ROCm/OpenCL device numbering)",
         "no hwloc: no caches, no PCIe link speeds; PCI bridges as the sysfs device paths show them")


def _read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def _cpulist(text) -> list[int]:
    out = []
    for part in (text or "").split(","):
        if "-" in part:
            a, b = part.split("-")
            out += range(int(a), int(b) + 1)
        elif part.strip():
            out.append(int(part))
    return out


def load(root: str = SYS) -> dict:
    """{"objects": [...], "distances": [...], "this_system": True, "notes": [...]}."""
    objs: list[dict] = []

    def add(type_, parent, **kw):
        rec = {"type": type_, "subtype": None, "name": None, "os_index": None,
               "logical_index": sum(1 for o in objs if o["type"] == type_), "parent": parent,
               "infos": {}, "cpuset": None, "nodeset": None}
        rec.update(kw)
        objs.append(rec)
        return len(objs) - 1

    cpus = _cpulist(_read(f"{root}/devices/system/cpu/online", "0"))
    node_cpus = {}
    for d in sorted(glob.glob(f"{root}/devices/system/node/node[0-9]*")):
        node_cpus[int(d.rsplit("node", 1)[1])] = _cpulist(_read(f"{d}/cpulist", ""))
    if not node_cpus:
        node_cpus = {0: cpus}
    machine = add("Machine", -1, os_index=0, cpuset=cpus, nodeset=sorted(node_cpus))

    packages: dict[int, list[tuple[int, int]]] = {}   # package -> [(core id, cpu)]
    for c in cpus:
        t = f"{root}/devices/system/cpu/cpu{c}/topology"
        pkg = int(_read(f"{t}/physical_package_id", "0") or 0)
        core = int(_read(f"{t}/core_id", str(c)) or c)
        packages.setdefault(max(pkg, 0), []).append((core, c))
    pkg_obj = {}
    for pkg, members in sorted(packages.items()):
        pcpus = sorted(c for _, c in members)
        nodes = sorted(n for n, nc in node_cpus.items() if set(nc) & set(pcpus))
        pkg_obj[pkg] = add("Package", machine, os_index=pkg, cpuset=pcpus, nodeset=nodes)
        for n in nodes:
            if set(node_cpus[n]) <= set(pcpus):
                add("NUMANode", pkg_obj[pkg], os_index=n, cpuset=node_cpus[n], nodeset=[n])
        cores: dict[int, list[int]] = {}
        for core, c in members:
            cores.setdefault(core, []).append(c)
        for core, ccpus in sorted(cores.items()):
            ci = add("Core", pkg_obj[pkg], os_index=core, cpuset=sorted(ccpus), nodeset=nodes)
            for c in sorted(ccpus):
                add("PU", ci, os_index=c, cpuset=[c], nodeset=nodes)
    for n, nc in node_cpus.items():   # nodes without CPUs, or spanning packages
        if not any(o["type"] == "NUMANode" and o["os_index"] == n for o in objs):
            add("NUMANode", machine, os_index=n, cpuset=nc, nodeset=[n])

    # PCI functions that matter: NICs (net, infiniband) and GPUs (PCI class, driver).
    pci_at: dict[str, int] = {}

    def pci(path) -> int | None:
        """Object of the PCI function at sysfs device path, adding it and its bridges."""
        parts = os.path.realpath(path).split("/")
        chain = [p for p in parts if _BDF.match(p)]
        if not chain:
            return None
        node = int(_read(f"{root}/bus/pci/devices/{chain[-1]}/numa_node", "-1") or -1)
        parent = machine
        for o_i, o in enumerate(objs):
            if o["type"] == "Package" and node in (o["nodeset"] or ()):
                parent = o_i
        host = f"host:{chain[0].rsplit(':', 1)[0]}:{node}"
        if host not in pci_at:
            pci_at[host] = add("Bridge", parent, bridge_host=True)
        parent = pci_at[host]
        for k, bdf in enumerate(chain):
            if bdf not in pci_at:
                dev = f"{root}/bus/pci/devices/{bdf}"
                cls = int(_read(f"{dev}/class", "0x0") or "0x0", 16) >> 8
                rec = {"busid": bdf, "class_id": cls,
                       "vendor_id": int(_read(f"{dev}/vendor", "0x0") or "0x0", 16),
                       "device_id": int(_read(f"{dev}/device", "0x0") or "0x0", 16),
                       "linkspeed_gbps": 0.0}
                is_bridge = k < len(chain) - 1
                driver = os.path.basename(os.path.realpath(f"{dev}/driver")) \
                    if os.path.exists(f"{dev}/driver") else None
                pci_at[bdf] = add("Bridge" if is_bridge else "PCIDev", parent, pci=rec,
                                  bridge_host=False, infos={"Driver": driver} if driver else {})
            parent = pci_at[bdf]
        return parent

    for d in sorted(glob.glob(f"{root}/class/net/*")):
        at = pci(f"{d}/device") if os.path.exists(f"{d}/device") else None
        if at is not None:   # virtual interfaces (veth, bridges, lo) are not in the PCI tree
            add("OSDev", at, name=os.path.basename(d), osdev_type=2,
                infos={"Address": _read(f"{d}/address", "")})
    for d in sorted(glob.glob(f"{root}/class/infiniband/*")):
        at = pci(f"{d}/device") if os.path.exists(f"{d}/device") else None
        if at is not None:
            lid = _read(f"{d}/ports/1/lid", None)
            add("OSDev", at, name=os.path.basename(d), osdev_type=3,
                infos={"Port1LID": lid} if lid else {})
    for dev in sorted(glob.glob(f"{root}/bus/pci/devices/*")):
        cls = int(_read(f"{dev}/class", "0x0") or "0x0", 16) >> 8
        drv = os.path.basename(os.path.realpath(f"{dev}/driver")) \
            if os.path.exists(f"{dev}/driver") else ""
        if cls == 0x0302 or (cls >> 8 == 0x03 and drv in _GPU_DRIVERS):
            at = pci(dev)
            if at is not None and drv in _GPU_DRIVERS and cls != 0x0302:
                objs[at]["pci"]["class_id"] = 0x0302   # counted as a compute GPU by the model

    distances = []
    nodes = sorted(node_cpus)
    rows = [_read(f"{root}/devices/system/node/node{n}/distance") for n in nodes]
    if len(nodes) > 1 and all(rows):
        index = {o["os_index"]: i for i, o in enumerate(objs) if o["type"] == "NUMANode"}
        distances.append({"name": "NUMALatency", "latency": True, "bandwidth": False,
                          "objects": [index[n] for n in nodes],
                          "values": [[int(v) for v in r.split()] for r in rows]})
    # Children must follow their parents in the list (model._Tree relies on it): they do,
    # since every object is added after its parent.
    return {"api_version": None, "this_system": True, "objects": objs, "distances": distances,
            "notes": list(NOTES)}
