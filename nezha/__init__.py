"""nezha: multi-rail collective communication for Python jobs."""
from nezha._version import __version__
from nezha.types import (AVG, BAND, BOR, BXOR, MAX, MIN, PROD, SUM, DType, ReduceOp)
from nezha.errors import (AuthenticationError, CollectiveMismatch, InternalError,
                          InvalidUsageError, NezhaError, NezhaTimeout, PeerError,
                          RailSystemError)

__all__ = ["__version__", "Communicator", "Request", "ReduceOp", "DType", "SUM", "PROD", "MIN",
           "MAX", "AVG", "BAND", "BOR", "BXOR", "NezhaError", "InvalidUsageError",
           "RailSystemError", "PeerError", "CollectiveMismatch", "AuthenticationError",
           "NezhaTimeout", "InternalError", "get_include"]


def get_include():
    """Folder holding nezha's C headers (include/nezha/*.h), for other extensions."""
    import os
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "include")


def __getattr__(name):
    # Lazy so that `import nezha` (e.g. for `nezha lab`) does not need the compiled core.
    if name in ("Communicator", "Request"):
        from nezha import communicator
        return getattr(communicator, name)
    raise AttributeError(name)
