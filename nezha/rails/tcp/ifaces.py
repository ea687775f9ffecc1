"""This host's network interfaces, and NCCL-style selection of those that become TCP rails."""
from __future__ import annotations

import fcntl
import ipaddress
import re
import socket
import struct
from dataclasses import dataclass

from nezha.config import parse_name_list
from nezha.errors import InvalidUsageError

# <linux/sockios.h> and <net/if.h>
SIOCGIFFLAGS = 0x8913
SIOCGIFADDR = 0x8915
SIOCGIFNETMASK = 0x891B
SIOCGIFMTU = 0x8921
IFF_UP = 0x1
IFF_LOOPBACK = 0x8

DEFAULT_EXCLUDE = ("lo", "docker", "virbr")   # NCCL's default exclusions, as name prefixes


@dataclass(frozen=True)
class Interface:
    """One network interface: name, primary IPv4 address, state, speed and MTU."""
    name: str
    address: str | None = None       # primary IPv4 address (SIOCGIFADDR), None if it has none
    netmask: str | None = None
    prefixlen: int | None = None
    is_up: bool = False
    is_loopback: bool = False
    speed_mbps: int | None = None    # /sys/class/net/<name>/speed; None for virtual or down links
    mtu: int | None = None

    @property
    def usable(self) -> bool:
        """True if a rail can use it: up, with an IPv4 address."""
        return self.is_up and self.address is not None

    def describe(self) -> str:
        """Short form for messages, e.g. `eth0 (10.0.0.2/24, up)`."""
        addr = f"{self.address}/{self.prefixlen}" if self.address else "no IPv4"
        return f"{self.name} ({addr}, {'up' if self.is_up else 'down'})"


def _ioctl(sock: socket.socket, request: int, name: str) -> bytes:
    # struct ifreq: 16-byte name, then a 24-byte union the kernel fills in at offset 16.
    return fcntl.ioctl(sock.fileno(), request, struct.pack("16s24x", name.encode()))


def _speed(name: str) -> int | None:
    try:
        with open(f"/sys/class/net/{name}/speed") as f:
            speed = int(f.read().strip())
    except (OSError, ValueError):
        return None   # EINVAL for loopback, virtual and down links
    return speed if speed > 0 else None


def _probe(sock: socket.socket, name: str) -> Interface:
    flags = struct.unpack_from("H", _ioctl(sock, SIOCGIFFLAGS, name), 16)[0]
    try:
        mtu = struct.unpack_from("i", _ioctl(sock, SIOCGIFMTU, name), 16)[0]
    except OSError:
        mtu = None
    address = netmask = prefixlen = None
    try:
        address = socket.inet_ntoa(_ioctl(sock, SIOCGIFADDR, name)[20:24])
        netmask = socket.inet_ntoa(_ioctl(sock, SIOCGIFNETMASK, name)[20:24])
        prefixlen = ipaddress.IPv4Network(f"0.0.0.0/{netmask}").prefixlen
    except OSError:
        pass   # EADDRNOTAVAIL: no IPv4 address
    return Interface(name, address, netmask, prefixlen, bool(flags & IFF_UP),
                     bool(flags & IFF_LOOPBACK), _speed(name), mtu)


def list_interfaces() -> list[Interface]:
    """Every interface of this host, in kernel index order, with or without IPv4."""
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                out.append(_probe(sock, name))
            except OSError:
                continue   # vanished between listing and probing
    return out


def _by_name(ifaces) -> list[Interface]:
    # Natural order (eth2 before eth10), so that a prefix gives the same rail order everywhere.
    return sorted(ifaces, key=lambda i: [int(t) if t.isdigit() else t
                                         for t in re.split(r"(\d+)", i.name)])


def _error(spec: str | None, what: str, found) -> InvalidUsageError:
    here = ", ".join(i.describe() for i in found) or "none"
    head = f"NEZHA_SOCKET_IFNAME={spec}" if spec else "NEZHA_SOCKET_IFNAME unset"
    return InvalidUsageError(f"{head}: {what}; interfaces here: {here}")


def select_interfaces(spec: str | None, interfaces: list[Interface] | None = None
                      ) -> list[Interface]:
    """The interfaces that become TCP rails, in rail order, for NEZHA_SOCKET_IFNAME=spec."""
    found = list_interfaces() if interfaces is None else list(interfaces)
    ordered = _by_name(found)
    if not spec or not spec.strip():
        chosen = [i for i in ordered if i.usable and not i.name.startswith(DEFAULT_EXCLUDE)]
        chosen = chosen or [i for i in ordered if i.usable and i.is_loopback]
        if not chosen:
            raise _error(spec, "no interface is up with an IPv4 address", found)
        return chosen
    try:
        names = parse_name_list(spec)
    except ValueError as e:
        raise _error(spec, str(e), found) from None

    def matches(iface, name):
        return iface.name == name if names.exact else iface.name.startswith(name)

    if names.exclude:
        chosen = [i for i in ordered
                  if i.usable and not any(matches(i, n) for n, _ in names.entries)]
        if not chosen:
            raise _error(spec, "every interface that is up with an IPv4 address is excluded", found)
        return chosen
    chosen = []
    for name, _port in names.entries:   # the port is accepted and not used yet
        hits = [i for i in ordered if matches(i, name)]
        if not hits:
            verb = "is named" if names.exact else "matches"
            raise _error(spec, f"no interface {verb} {name!r}", found)
        for i in hits:
            # Skipping it instead would give this host fewer rails than its peers.
            if not i.usable:
                state = "down" if not i.is_up else "without an IPv4 address"
                raise _error(spec, f"interface {i.name} (from {name!r}) is {state}", found)
            if i not in chosen:
                chosen.append(i)
    return chosen
