"""Rails formed from every rank's NICs: one rail per IPv4 subnet that every host reaches.

Each rank reports its interfaces (name, address, prefix, speed, kind, and whether the
interface carries the default route or the job's control traffic). form() is a pure function
of those reports, so every rank computes the same rails in the same order. The rules, in order:

  down or no IPv4 address   left out
  loopback                  left out (unless the whole job is on one host and nothing else is)
  bridge                    left out: a bridge device or a port of one, or a name starting with
                            docker, virbr or br- (container and VM networks, not wires)
  missing somewhere         a subnet that some host does not reach (a host lacks that NIC, or
                            its address is in another subnet) is left out on every host
  management                the subnet holding the bootstrap's control address (MASTER_ADDR,
                            or the PMIx server's address under mpirun) or the default route is
                            left out, unless no other subnet reaches every host: it is how the
                            ranks found each other, not a data rail (the lab's mgmt network
                            carries MASTER_ADDR and Open MPI's PMIx traffic; a cluster's
                            Ethernet carries the default route)
  second NIC on a subnet    only the first (by name) of a host's interfaces in one subnet

NEZHA_SOCKET_IFNAME, when set, replaces all of this (rails/tcp/ifaces.py select_interfaces).
"""
from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import socket
from dataclasses import dataclass, field

from nezha import log
from nezha.errors import InvalidUsageError
from nezha.rails.tcp.ifaces import DEFAULT_EXCLUDE, Interface, list_interfaces, select_interfaces

BRIDGE_PREFIXES = DEFAULT_EXCLUDE[1:] + ("br-",)   # docker, virbr, and docker's br-<id>
ARPHRD_INFINIBAND = 32


@dataclass
class Rail:
    """One formed rail: a subnet and, for every rank, its interface on it."""
    name: str
    subnet: str
    ifnames: list[str]             # per rank
    speed_mbps: int | None         # slowest member's nominal speed, None if any is unknown
                                   # or untrusted (a virtual NIC's: trusted_speed)
    kind: str


@dataclass
class Formation:
    """The rails, and for every rank and interface why it was taken or left out."""
    rails: list[Rail] = field(default_factory=list)
    reasons: list[dict[str, str]] = field(default_factory=list)   # per rank: ifname -> reason
    notes: list[str] = field(default_factory=list)                # job-wide decisions, logged

    def for_rank(self, rank: int) -> list[str]:
        """This rank's interface names, in rail order."""
        return [r.ifnames[rank] for r in self.rails]


def _sys(name, what):
    try:
        with open(f"/sys/class/net/{name}/{what}") as f:
            return f.read().strip()
    except OSError:
        return None


def _default_route_ifaces() -> set[str]:
    try:
        with open("/proc/net/route") as f:
            rows = [line.split() for line in f.readlines()[1:]]
    except OSError:
        return set()
    return {r[0] for r in rows if len(r) > 7 and r[1] == "00000000" and r[7] == "00000000"}


def control_addresses(environ=None) -> list[str]:
    """IPv4 addresses the job's bootstrap talks over: MASTER_ADDR and the PMIx server's."""
    env = os.environ if environ is None else environ
    out = []
    if env.get("MASTER_ADDR"):
        try:
            out.append(socket.gethostbyname(env["MASTER_ADDR"]))
        except OSError:
            pass
    for k, v in env.items():
        if k.startswith("PMIX_SERVER_URI"):
            out += re.findall(r"tcp4://(\d+\.\d+\.\d+\.\d+):", v)
    return list(dict.fromkeys(out))


def kind_of(iface: Interface) -> str:
    """loopback, bridge, infiniband, ethernet (a NIC) or virtual (veth, tun, ...)."""
    if iface.is_loopback:
        return "loopback"
    if (_sys(iface.name, "bridge/bridge_id") is not None or _sys(iface.name, "brport/port_no")
            is not None or iface.name.startswith(BRIDGE_PREFIXES)):
        return "bridge"
    if _sys(iface.name, "type") == str(ARPHRD_INFINIBAND):
        return "infiniband"
    return "ethernet" if os.path.exists(f"/sys/class/net/{iface.name}/device") else "virtual"


def local_report(interfaces=None, environ=None) -> list[dict]:
    """This host's interfaces as the JSON-able records form() takes."""
    ifaces = list_interfaces() if interfaces is None else interfaces
    routes = _default_route_ifaces()
    control = control_addresses(environ)
    out = []
    for i in ifaces:
        subnet = (str(ipaddress.IPv4Network(f"{i.address}/{i.prefixlen}", strict=False))
                  if i.address and i.prefixlen is not None else None)
        out.append({"name": i.name, "address": i.address, "prefixlen": i.prefixlen,
                    "subnet": subnet, "up": i.is_up, "speed_mbps": i.speed_mbps,
                    "kind": kind_of(i), "default_route": i.name in routes,
                    "control": [a for a in control if subnet and
                                ipaddress.IPv4Address(a) in ipaddress.IPv4Network(subnet)]})
    return out


TRUSTED_KINDS = ("ethernet", "infiniband")


def trusted_speed(nic: dict) -> int | None:
    """A reported NIC's speed if it means something: a physical NIC's negotiated link speed.
    A virtual NIC's is made up (veth says 10000 Mb/s whatever tbf shapes it to), so it
    counts as unknown, and NEZHA_PROBE=auto measures the rail at start-up instead."""
    return nic["speed_mbps"] if nic.get("kind") in TRUSTED_KINDS else None


def _natural(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def form(reports: list[list[dict]], hosts: list[str] | None = None,
         names: list[str] | None = None) -> Formation:
    """Rails from every rank's report (rank order). hosts[r]: rank r's host identity (ranks
    of one host share it; default: each rank its own host); names[r]: its name in messages."""
    n = len(reports)
    hosts = hosts or [f"rank {r}" for r in range(n)]
    names = names or hosts
    f = Formation(reasons=[{} for _ in range(n)])
    on_one_host = len(set(hosts)) == 1
    cand: dict[str, dict[int, dict]] = {}   # subnet -> rank -> its interface there
    for r, nics in enumerate(reports):
        for nic in sorted(nics, key=lambda x: _natural(x["name"])):
            why = None
            if not nic["up"] or not nic["address"]:
                why = "left out: down or without an IPv4 address"
            elif nic["kind"] == "loopback" and not on_one_host:
                why = "left out: loopback"
            elif nic["kind"] == "bridge":
                why = "left out: a bridge (container or VM network), not a wire"
            elif nic["subnet"] in cand and r in cand[nic["subnet"]]:
                why = (f"left out: same subnet {nic['subnet']} as "
                       f"{cand[nic['subnet']][r]['name']} on this host")
            if why:
                f.reasons[r][nic["name"]] = why
            else:
                cand.setdefault(nic["subnet"], {})[r] = nic
    everywhere = {}
    for subnet, members in cand.items():
        missing = [r for r in range(n) if r not in members]
        if missing:
            who = ", ".join(f"rank {r} ({names[r]})" for r in missing[:4])
            more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
            note = f"subnet {subnet} is missing on {who}{more}: left out on every host"
            f.notes.append(note)
            for r, nic in members.items():
                f.reasons[r][nic["name"]] = f"left out: {note.split(': ')[0]}"
        else:
            everywhere[subnet] = members
    # Loopback only when nothing else reaches every rank (one host, no NIC).
    real = {s: m for s, m in everywhere.items() if m[0]["kind"] != "loopback"}
    for s, m in everywhere.items():
        if s not in real and real:
            for r, nic in m.items():
                f.reasons[r][nic["name"]] = "left out: loopback"
    everywhere = real or everywhere
    mgmt = {s for s, m in everywhere.items()
            if any(nic["control"] or nic["default_route"] for nic in m.values())}
    if mgmt and len(mgmt) < len(everywhere):
        for s in sorted(mgmt):
            m = everywhere.pop(s)
            control = [a for nic in m.values() for a in nic["control"]]
            what = (f"the bootstrap's control address {control[0]}" if control
                    else "the default route")
            f.notes.append(f"subnet {s} carries {what}: management network, not a rail")
            for r, nic in m.items():
                f.reasons[r][nic["name"]] = f"left out: management network ({what})"
    elif mgmt:
        f.notes.append("the management network is the only one reaching every host: "
                       "used as the rail")
    for i, s in enumerate(sorted(everywhere, key=lambda s: ipaddress.IPv4Network(s))):
        m = everywhere[s]
        ifn = [m[r]["name"] for r in range(n)]
        speeds = [trusted_speed(m[r]) for r in range(n)]
        kinds = {m[r]["kind"] for r in range(n)}
        rail = Rail(name=ifn[0] if len(set(ifn)) == 1 else f"rail{i}", subnet=s,
                    ifnames=ifn, speed_mbps=min(speeds) if None not in speeds else None,
                    kind=kinds.pop() if len(kinds) == 1 else "mixed")
        f.rails.append(rail)
        for r in range(n):
            f.reasons[r][ifn[r]] = f"rail {i} ({rail.name}, {s})"
    return f


def select(boot, spec: str | None, host: str | None = None) -> list[Interface]:
    """This rank's TCP rail interfaces: NEZHA_SOCKET_IFNAME if set, else rails formed with the
    other ranks (one allgather round, taken by every rank either way so rounds stay aligned).
    host: NEZHA_HOST_ID (which ranks count as one host). Each interface's speed_mbps is the
    rail's nominal speed agreed by every rank (the slowest end; None if any end is unknown),
    so that a cost-model prior built from it is the same everywhere."""
    ifaces = list_interfaces()
    mine = local_report(ifaces)
    chosen = select_interfaces(spec, ifaces) if spec else None
    from nezha.transports import shm
    got = boot.allgather({"host": shm.host_id(host), "hostname": socket.gethostname(),
                          "nics": mine, "selected": [i.name for i in chosen or ()]})
    if spec:
        return [dataclasses.replace(iface, speed_mbps=_agreed_speed(got, k))
                for k, iface in enumerate(chosen)]
    f = form([g["nics"] for g in got], [g["host"] for g in got], [g["hostname"] for g in got])
    for note in f.notes:
        log.info("TOPO", note)
    for name, why in f.reasons[boot.rank].items():
        log.info("TOPO", f"{name}: {why}")
    if not f.rails:
        here = "; ".join(f"{k}: {v}" for k, v in f.reasons[boot.rank].items())
        raise InvalidUsageError("nezha: no network reaches every host, so no rail could be "
                                f"formed (set NEZHA_SOCKET_IFNAME); here: {here}")
    by_name = {i.name: i for i in ifaces}
    return [dataclasses.replace(by_name[rail.ifnames[boot.rank]], speed_mbps=rail.speed_mbps)
            for rail in f.rails]


def _agreed_speed(got, k) -> int | None:
    """Slowest nominal speed of every rank's k-th chosen interface; None if any is unknown."""
    speeds = []
    for g in got:
        if k >= len(g["selected"]):
            return None   # ranks chose different numbers of rails: the mesh reports it
        nic = next((n for n in g["nics"] if n["name"] == g["selected"][k]), None)
        speeds.append(nic and trusted_speed(nic))
    return min(speeds) if speeds and None not in speeds else None


def nominal_rates(rails_, nconns: int) -> list[float] | None:
    """Per-channel prior for the cost model: each rail's agreed nominal Mbit/s, once per
    connection; None (equal split) unless every rail's speed is known."""
    speeds = [r.properties().speed_mbps for r in rails_]
    if not speeds or None in speeds:
        return None
    return [float(s) for s in speeds for _ in range(nconns)]
