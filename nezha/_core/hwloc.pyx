"""hwloc 2.x binding: load this machine's topology, or an XML export, as plain Python records.

It only reads: every object becomes a dict (see load()); nezha/topo/model.py decides what
is a NIC or a GPU, so the sysfs fallback and this binding feed the same code.
"""
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.errno cimport errno
from libc.string cimport strerror

from nezha._core.libhwloc cimport *

COMPILED_API_VERSION = HWLOC_API_VERSION


def api_version():
    """(runtime, compiled) hwloc API versions, e.g. (0x20800, 0x20800)."""
    return hwloc_get_api_version(), HWLOC_API_VERSION


def version_text(unsigned v):
    """0x00020800 -> '2.8' (the API version, not the release: 2.9 keeps API 2.8)."""
    return f"{v >> 16}.{(v >> 8) & 0xff}" + (f".{v & 0xff}" if v & 0xff else "")


def check_api_version():
    """Raise RuntimeError if the library at run time is not the major version compiled for."""
    cdef unsigned runtime = hwloc_get_api_version()
    if (runtime >> 16) != (HWLOC_API_VERSION >> 16):
        raise RuntimeError(
            f"libhwloc at run time has API {version_text(runtime)}, nezha was built against "
            f"{version_text(HWLOC_API_VERSION)}: rebuild nezha (make build)")
    return runtime


cdef str _s(const char *p):
    return p.decode("utf-8", "replace") if p != NULL else None


cdef list _bits(hwloc_const_bitmap_t b):
    # Indexes set in a bitmap; an infinite bitmap (never in a loaded topology's sets) stops at -1.
    cdef list out = []
    cdef int i
    if b == NULL:
        return None
    i = hwloc_bitmap_first(b)
    while i != -1:
        out.append(i)
        i = hwloc_bitmap_next(b, i)
    return out


cdef dict _pci(hwloc_pcidev_attr_s *p):
    return {"busid": "%04x:%02x:%02x.%01x" % (p.domain, p.bus, p.dev, p.func),
            "class_id": p.class_id, "vendor_id": p.vendor_id, "device_id": p.device_id,
            "linkspeed_gbps": p.linkspeed}


cdef dict _record(hwloc_obj_t o, int parent):
    cdef unsigned i
    cdef dict rec = {
        "type": _s(hwloc_obj_type_string(o.type)),
        "subtype": _s(o.subtype),
        "name": _s(o.name),
        "os_index": None if o.os_index == <unsigned>-1 else o.os_index,
        "logical_index": o.logical_index,
        "parent": parent,
        "infos": {_s(o.infos[i].name): _s(o.infos[i].value) for i in range(o.infos_count)},
        "cpuset": _bits(o.cpuset),
        "nodeset": _bits(o.nodeset),
    }
    if o.type == HWLOC_OBJ_PCI_DEVICE:
        rec["pci"] = _pci(&o.attr.pcidev)
    elif o.type == HWLOC_OBJ_BRIDGE:
        rec["bridge_host"] = o.attr.bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST
        if o.attr.bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI:
            rec["pci"] = _pci(&o.attr.bridge.upstream_pci)
    elif o.type == HWLOC_OBJ_OS_DEVICE:
        rec["osdev_type"] = o.attr.osdev.type
    return rec


cdef int _walk(hwloc_obj_t o, int parent, list out, dict index) except -1:
    # Depth first over normal, memory and I/O children (Misc objects carry nothing we use);
    # index: object address -> position in out, to name the objects of distance matrices.
    cdef int me = len(out)
    cdef hwloc_obj_t c
    cdef hwloc_obj_t firsts[3]
    firsts[0], firsts[1], firsts[2] = o.first_child, o.memory_first_child, o.io_first_child
    index[<size_t>o] = me
    out.append(_record(o, parent))
    for k in range(3):
        c = firsts[k]
        while c != NULL:
            _walk(c, me, out, index)
            c = c.next_sibling
    return 0


cdef list _distances(hwloc_topology_t topo, dict index):
    cdef unsigned nr = 0, i, j, k
    cdef hwloc_distances_s **arr
    cdef hwloc_distances_s *d
    if hwloc_distances_get(topo, &nr, NULL, 0, 0) != 0 or nr == 0:
        return []
    arr = <hwloc_distances_s **>PyMem_Malloc(nr * sizeof(void *))
    if arr == NULL:
        raise MemoryError()
    out = []
    try:
        if hwloc_distances_get(topo, &nr, arr, 0, 0) != 0:
            return []
        for k in range(nr):
            d = arr[k]
            out.append({
                "name": _s(hwloc_distances_get_name(topo, d)),
                "latency": bool(d.kind & HWLOC_DISTANCES_KIND_MEANS_LATENCY),
                "bandwidth": bool(d.kind & HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH),
                "objects": [index.get(<size_t>d.objs[i]) for i in range(d.nbobjs)],
                "values": [[d.values[i * d.nbobjs + j] for j in range(d.nbobjs)]
                           for i in range(d.nbobjs)],
            })
            hwloc_distances_release(topo, d)
    finally:
        PyMem_Free(arr)
    return out


def load(xml=None):
    """The topology as {"api_version", "this_system", "objects": [...], "distances": [...]}.

    xml: path of an hwloc XML export, or None for this machine. Each object is a dict with
    type, subtype, name, os_index, logical_index, parent (position in the list, -1 for the
    root), infos, cpuset and nodeset (lists of indexes, None for I/O objects), and for PCI
    devices and PCI bridges "pci" (busid, class_id, vendor_id, device_id, linkspeed_gbps),
    for bridges "bridge_host", for OS devices "osdev_type". Raises OSError or ValueError.
    """
    cdef hwloc_topology_t topo
    cdef bytes path
    runtime = check_api_version()
    if hwloc_topology_init(&topo) != 0:
        raise MemoryError("hwloc_topology_init failed")
    try:
        # Without this filter PCI and OS devices are dropped, from XML too.
        hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT)
        if xml is not None:
            path = str(xml).encode()
            if hwloc_topology_set_xml(topo, path) != 0:
                err = errno
                raise ValueError(f"hwloc cannot read {xml} as an XML topology "
                                 f"({strerror(err).decode()})")
        if hwloc_topology_load(topo) != 0:
            err = errno
            what = f"{xml}" if xml is not None else "this machine's topology"
            raise ValueError(f"hwloc cannot load {what} ({strerror(err).decode()})")
        objects, index = [], {}
        _walk(hwloc_get_root_obj(topo), -1, objects, index)
        return {"api_version": version_text(runtime),
                "this_system": bool(hwloc_topology_is_thissystem(topo)),
                "objects": objects, "distances": _distances(topo, index)}
    finally:
        hwloc_topology_destroy(topo)
