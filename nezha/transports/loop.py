"""loop: several rails on one machine, over the loopback addresses 127.0.0.1, 127.0.0.2, ...

Each is a TCP rail with its own listener and address, so a test (or someone trying nezha
on a laptop) gets a multi-rail job without NICs, namespaces or root. With NEZHA_FAULTS
(transports/fault.py) every rail can be stalled, reset, closed or corrupted from the test,
which is how votes, repair and re-admission are tested without the lab.
"""
from nezha.rails.tcp.device import TcpRail
from nezha.rails.tcp.ifaces import Interface


def loop_rails(n, port_range=None):
    """n rails named loop0.. on 127.0.0.1.."""
    return [TcpRail(Interface(name=f"loop{i}", address=f"127.0.0.{i + 1}", netmask="255.0.0.0",
                              prefixlen=8, is_up=True, is_loopback=True, mtu=65536), port_range)
            for i in range(n)]
