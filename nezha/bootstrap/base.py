"""What every bootstrap gives the communicator."""
import os
import secrets
import socket
import stat

from nezha.errors import InvalidUsageError


def job_secret_from_env():
    """The job secret the launcher gave: NEZHA_JOB_SECRET, else the file NEZHA_JOB_SECRET_FILE
    (only its owner may read it), as bytes; None when neither is set."""
    text, where = os.environ.get("NEZHA_JOB_SECRET"), "NEZHA_JOB_SECRET"
    path = os.environ.get("NEZHA_JOB_SECRET_FILE")
    if not text and path:
        text, where = _read_secret_file(path), f"NEZHA_JOB_SECRET_FILE {path}"
    if not text:
        return None
    try:
        return bytes.fromhex(text.strip())
    except ValueError:
        raise InvalidUsageError(f"{where} must be hex digits (e.g. from "
                                "`python -c 'import secrets; print(secrets.token_hex(32))'`)") from None


def _read_secret_file(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise InvalidUsageError(f"NEZHA_JOB_SECRET_FILE {path}: cannot open it "
                                f"({e.strerror})") from None
    with os.fdopen(fd) as f:
        st = os.fstat(f.fileno())
        # checked on the open file, so it cannot be swapped between check and read
        if st.st_mode & 0o077 or st.st_uid != os.getuid():
            raise InvalidUsageError(
                f"NEZHA_JOB_SECRET_FILE {path}: mode {stat.filemode(st.st_mode)}, owner uid "
                f"{st.st_uid}: refused, others could read the secret (chmod 600 it, as the "
                "user who runs the job)")
        return f.read()


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
