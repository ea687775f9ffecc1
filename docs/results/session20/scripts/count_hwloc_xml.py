#!/usr/bin/env python
"""Count packages, NUMA nodes, NICs, GPUs and each GPU's nearest NICs straight from hwloc XML
files (ElementTree only, no nezha code), to check `nezha topo --xml FILE --json` against.

Rules (issue 15's wording): a NIC is a PCIDev carrying an OSDev of type NETWORK (2) or
OPENFABRICS (3), once; a GPU is a PCIDev carrying a CUDA/NVML/RSMI/OpenCL/Level Zero OSDev
(by subtype or name; a DRM card/renderD is not one), once, or a 3D controller (class 0x0302)
carrying no OSDev. Nearest NICs: fewest edges between the two PCIDevs in the XML's object
tree; ties broken by sharing the GPU's nodeset (its first non-I/O ancestor's).
    python count_hwloc_xml.py FILE... [--compare]   # --compare runs nezha topo and diffs
"""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

GPU_WORDS = ("cuda", "nvml", "rsmi", "opencl", "ze")
IO_TYPES = {"Bridge", "PCIDev", "OSDev", "Misc"}


def osdevs(pci):
    """OSDev children of one PCIDev (hwloc puts them directly below it)."""
    return [c for c in pci if c.tag == "object" and c.get("type") == "OSDev"]


def is_gpu_osdev(o):
    """CUDA/NVML/RSMI/OpenCL/Level Zero, by subtype or by name."""
    word = (o.get("subtype") or o.get("name") or "").lower()
    return o.get("osdev_type") in ("1", "5") and word.startswith(GPU_WORDS)


def count(path):
    """One file's counts, from the XML alone."""
    root = ET.parse(path).getroot()
    parent = {c: p for p in root.iter() for c in p}
    objs = [o for o in root.iter("object")]
    pkgs = [o for o in objs if o.get("type") == "Package"]
    numa = [o for o in objs if o.get("type") == "NUMANode"]
    pcis = [o for o in objs if o.get("type") == "PCIDev"]
    nics, gpus = [], []
    for p in pcis:
        ods = osdevs(p)
        if any(o.get("osdev_type") in ("2", "3") for o in ods):
            nics.append(p)
        cls = (p.get("pci_type") or "")[:4]
        if any(is_gpu_osdev(o) for o in ods) or (cls == "0302" and not ods):
            gpus.append(p)

    def chain(o):
        out = [o]
        while o in parent and parent[o].tag == "object":
            o = parent[o]
            out.append(o)
        return out

    def dist(a, b):
        ca, cb = chain(a), chain(b)
        ib = {id(o): i for i, o in enumerate(cb)}
        for i, o in enumerate(ca):
            if id(o) in ib:
                return i + ib[id(o)]
        raise ValueError("no common ancestor")

    def nodeset(o):
        for a in chain(o)[1:]:
            if a.get("type") not in IO_TYPES and a.get("nodeset"):
                return a.get("nodeset")
        return None

    def name(p):
        ods = osdevs(p)
        of = [o.get("name") for o in ods if o.get("osdev_type") == "3"]
        return (of or [o.get("name") for o in ods] or [p.get("pci_busid")])[0]

    near = {}
    for g in gpus:
        if not nics:
            near[g.get("pci_busid")] = []
            continue
        d = {id(n): dist(g, n) for n in nics}
        best = min(d.values())
        tied = [n for n in nics if d[id(n)] == best]
        same = [n for n in tied if nodeset(n) == nodeset(g)]
        near[g.get("pci_busid")] = sorted(name(n) for n in (same or tied))
    return dict(packages=len(pkgs), numa_nodes=len(numa), nics=len(nics), gpus=len(gpus),
                nearest=near)


def probe(path):
    """What nezha topo --xml says, reduced to the same shape."""
    out = subprocess.run([sys.executable, "-m", "nezha", "topo", "--xml", path, "--json"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    d = json.loads(out)
    return dict(packages=len(d["packages"]), numa_nodes=len(d["numa_nodes"]),
                nics=len(d["nics"]), gpus=len(d["gpus"]),
                nearest={g["busid"]: sorted(g["nearest_nics"])
                         for g in d["gpus"]})


def main(argv):
    """Print one line per file; with --compare, the probe's line and 'same' or 'DIFFERS'."""
    compare = "--compare" in argv
    files = [a for a in argv if a != "--compare"]
    bad = 0
    for f in files:
        mine = count(f)
        print(f"{f.rsplit('/', 1)[-1]}: xml {json.dumps(mine, sort_keys=True)}")
        if compare:
            got = probe(f)
            same = got == mine
            bad += not same
            print(f"  probe {json.dumps(got, sort_keys=True)}\n  {'same' if same else 'DIFFERS'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
