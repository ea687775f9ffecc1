"""The rail contract shared by every kind of rail (tcp now; shm, ina, rdma to come).

A rail is one device/path (a NIC, a shared-memory segment, an aggregation service). It
knows nothing of algorithms: it listens, opens authenticated endpoints to peers, reports
its properties, and hands non-blocking byte-stream endpoints (file descriptors driven by
the engine's C loop) to the communicator. See docs/rails.md.
"""
from dataclasses import dataclass

RAIL_API_VERSION = 1


@dataclass
class RailProperties:
    """What a rail says about itself (NCCL's ncclNetProperties, trimmed)."""

    name: str
    kind: str                      # "tcp" | "shm" | "ina" | "rdma"
    address: str | None = None
    speed_mbps: int | None = None  # nominal; the planner trusts measurements over this
    latency_us: float | None = None
    mtu: int | None = None
    pci_path: str | None = None
    numa_node: int | None = None
    max_endpoints: int = 64


class Rail:
    """Base class: one device on this rank."""

    kind = "?"
    api_version = RAIL_API_VERSION

    def properties(self) -> RailProperties:
        """This rail's properties."""
        raise NotImplementedError

    def listen(self):
        """Start listening; return the handle peers need to connect (JSON-able)."""
        raise NotImplementedError

    def close(self):
        """Idempotent: close the listener and every endpoint this rail opened."""
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
