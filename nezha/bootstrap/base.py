"""What every bootstrap gives the communicator."""
import os
import secrets
import socket

from nezha.errors import InvalidUsageError


def job_secret_from_env():
    """NEZHA_JOB_SECRET as bytes, or None when unset."""
    text = os.environ.get("NEZHA_JOB_SECRET")
    if not text:
        return None
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise InvalidUsageError("NEZHA_JOB_SECRET must be hex digits (e.g. from "
                                "`python -c 'import secrets; print(secrets.token_hex(32))'`)") from None


class Bootstrap:
    """rank, size, local_rank, the job secret, and allgather of small JSON-able objects."""

    rank = 0
    size = 1
    local_rank = 0
    secret = b""
    kind = "none"

    def allgather(self, obj):
        """Every rank's obj, in rank order."""
        raise NotImplementedError

    def close(self):
        """Release what the bootstrap holds."""

    @property
    def hostname(self):
        """This host's name (for messages)."""
        return socket.gethostname()


class SingleBootstrap(Bootstrap):
    """One process, no launcher."""

    kind = "single"

    def __init__(self):
        self.secret = job_secret_from_env() or secrets.token_bytes(32)

    def allgather(self, obj):
        """[obj]."""
        return [obj]
