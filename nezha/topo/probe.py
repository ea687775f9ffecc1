"""Load a topology: this machine's through hwloc (or sysfs without it), or an hwloc XML export."""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET

from nezha import log
from nezha.errors import InvalidUsageError
from nezha.topo import model

_XML_FORMATS = (1, 2)   # topology version="..." majors hwloc 2.x reads (1.x exports have none)


class TopologyError(InvalidUsageError):
    """A topology file nezha cannot use: missing, not an hwloc XML export, or a newer format."""


def hwloc_module():
    """nezha._core.hwloc, or (None, reason) when it was not built or cannot load libhwloc."""
    try:
        from nezha._core import hwloc
    except ImportError as e:
        return None, (f"nezha._core.hwloc is not available ({e}); build with hwloc's headers "
                      "(Debian: libhwloc-dev) and `make build`")
    try:
        hwloc.check_api_version()
    except RuntimeError as e:
        return None, str(e)
    return hwloc, None


def check_xml(path: str) -> None:
    """Raise TopologyError unless path is a readable hwloc XML export in a format hwloc 2 reads."""
    if not os.path.exists(path):
        raise TopologyError(f"topology file {path}: no such file")
    if os.path.isdir(path):
        raise TopologyError(f"topology file {path}: is a directory")
    try:
        with open(path, "rb") as f:
            root = next(ET.iterparse(f, events=("start",)))[1]
    except OSError as e:
        raise TopologyError(f"topology file {path}: cannot read it ({e.strerror})") from None
    except (ET.ParseError, StopIteration) as e:
        raise TopologyError(f"topology file {path}: not XML ({e}); expected an hwloc XML "
                            "export (lstopo --of xml)") from None
    if root.tag != "topology":
        raise TopologyError(f"topology file {path}: XML whose root element is <{root.tag}>, "
                            "not an hwloc export (<topology>; lstopo --of xml)")
    version = root.get("version")
    if version is not None:
        m = re.match(r"(\d+)\.", version + ".")
        if not m or int(m[1]) not in _XML_FORMATS:
            raise TopologyError(f"topology file {path}: hwloc XML format {version}, which this "
                                "hwloc (2.x) cannot read; export it with hwloc 2 (lstopo --of "
                                "xml --export-xml-flags v2) or load it with a newer hwloc")


def load(xml: str | None = None) -> model.Topology:
    """The topology of an XML export, or of this machine (hwloc, else sysfs with notes)."""
    hwloc, why = hwloc_module()
    if xml is not None:
        check_xml(xml)
        if hwloc is None:
            raise TopologyError(f"reading {xml} needs hwloc: {why}")
        try:
            raw = hwloc.load(xml)
        except ValueError as e:
            raise TopologyError(str(e)) from None
        return model.build(raw, f"hwloc API {raw['api_version']}, XML {xml}")
    if hwloc is not None:
        raw = hwloc.load()
        topo = model.build(raw, f"hwloc API {raw['api_version']}, this machine")
    else:
        from nezha.topo import sysfs
        log.warn("TOPO", f"topology from sysfs, not hwloc: {why}")
        raw = sysfs.load()
        topo = model.build(raw, "sysfs (no hwloc)")
        for note in topo.notes:
            log.info("TOPO", f"sysfs probe: {note}")
    if topo.this_system:
        for nic in topo.nics:
            nic.speed_mbps = next(filter(None, map(link_speed, nic.netdevs)), None)
    return topo


def link_speed(ifname: str) -> int | None:
    """Mbit/s of a network interface from /sys/class/net/<name>/speed, None if unknown."""
    try:
        with open(f"/sys/class/net/{ifname}/speed") as f:
            speed = int(f.read().strip())
    except (OSError, ValueError):
        return None   # virtual, down, or not a link with a speed
    return speed if speed > 0 else None
