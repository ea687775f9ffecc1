"""nezha: multi-rail collective communication for Python jobs."""
from nezha._version import __version__
from nezha.types import (AVG, BAND, BOR, BXOR, MAX, MIN, PROD, SUM, DType, ReduceOp)
from nezha.errors import (AuthenticationError, CollectiveMismatch, InternalError,
                          InvalidUsageError, NezhaError, NezhaTimeout, PeerError,
                          PeerUnreachable, RailSystemError)

__all__ = ["__version__", "Communicator", "Request", "ReduceOp", "DType", "SUM", "PROD", "MIN",
           "MAX", "AVG", "BAND", "BOR", "BXOR", "NezhaError", "InvalidUsageError",
           "RailSystemError", "PeerError", "CollectiveMismatch", "AuthenticationError",
           "NezhaTimeout", "PeerUnreachable", "InternalError", "get_include"]


def get_include():
    """Folder holding nezha's C headers (nezha/*.h under it), for other extensions, like
    numpy.get_include(); None if this install has none. An installed package carries them
    in nezha/include (setup.py copies them there); a source tree has them in include/."""
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.path.join(here, "include"), os.path.join(os.path.dirname(here), "include")):
        if os.path.isfile(os.path.join(d, "nezha", "nezha_types.h")):
            return d
    return None


def __getattr__(name):
    # Lazy so that `import nezha` (e.g. for `nezha lab`) does not need the compiled core.
    if name in ("Communicator", "Request"):
        from nezha import communicator
        return getattr(communicator, name)
    raise AttributeError(name)
