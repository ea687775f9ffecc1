"""Exceptions, classed by who is at fault (NCCL's system / internal / usage split)."""


class NezhaError(RuntimeError):
    """Base of every error nezha raises at run time."""


class InvalidUsageError(NezhaError, ValueError):
    """The user's configuration or arguments are wrong (bad interface name, ...)."""


class RailSystemError(NezhaError):
    """A network or hardware failure on one rail (carries the rail's name)."""

    def __init__(self, msg, rail=None, peer=None):
        super().__init__(msg)
        self.rail = rail
        self.peer = peer


class PeerError(NezhaError):
    """A peer died, closed its connection or stopped answering."""

    def __init__(self, msg, peer=None, rail=None):
        super().__init__(msg)
        self.peer = peer
        self.rail = rail


class CollectiveMismatch(NezhaError):
    """Ranks called different collectives, or the same one with different arguments."""


class AuthenticationError(NezhaError):
    """A connection did not prove knowledge of the job secret."""


class NezhaTimeout(NezhaError, TimeoutError):
    """A blocking step passed its deadline (NEZHA_TIMEOUT or the timeout argument)."""


class PeerUnreachable(RailSystemError, NezhaTimeout):
    """A peer not heard on any rail for the peer-lost wait: stopped (SIGSTOP), hung, or cut
    off on every rail; nothing tells these apart. The last rail to it failed (a
    RailSystemError) and it did not answer in time (a NezhaTimeout): either except catches it."""


class InternalError(NezhaError):
    """nezha misused itself: a bug, please report it."""
