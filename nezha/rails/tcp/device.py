"""TCP rail: one per chosen network interface, sockets bound to that interface's address."""
import socket

from nezha.rails.base import Rail, RailProperties


class TcpRail(Rail):
    """A NIC used as a rail: listens on its own address so traffic stays on that NIC."""

    kind = "tcp"

    def __init__(self, iface, port_range=None):
        self.iface = iface
        self.name = iface.name
        self.address = iface.address
        self.port_range = port_range
        self.listener = None

    def properties(self):
        """Name, address, nominal speed and MTU of the interface."""
        return RailProperties(name=self.name, kind=self.kind, address=self.address,
                              speed_mbps=self.iface.speed_mbps, mtu=self.iface.mtu)

    def listen(self):
        """Bind a listener to the interface address; the handle is {addr, port}."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ports = [0] if not self.port_range else range(self.port_range[0], self.port_range[1] + 1)
        for port in ports:
            try:
                s.bind((self.address, port))
                break
            except OSError:
                continue
        else:
            s.close()
            raise OSError(f"nezha: no free port in NEZHA_PORT_RANGE on {self.name} ({self.address})")
        s.listen(128)
        self.listener = s
        return {"addr": self.address, "port": s.getsockname()[1]}

    def close(self):
        """Close the listener (endpoints belong to the communicator's mesh)."""
        if self.listener is not None:
            self.listener.close()
            self.listener = None
