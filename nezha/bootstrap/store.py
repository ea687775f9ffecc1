"""Bootstrap over a torch.distributed Store (TCPStore, FileStore, PrefixStore, ...).

The store torch already holds (under torchrun: the TCPStore on MASTER_ADDR:MASTER_PORT)
carries nezha's endpoint exchange, so no second rendezvous port is needed. Each allgather
is one round: every rank sets "nezha/ag/<round>/<rank>" (JSON, never pickles), waits for
the other ranks' keys and reads them.
"""
import json
import secrets
import socket
from datetime import timedelta

from nezha.bootstrap.base import Bootstrap, job_secret_from_env
from nezha.errors import InvalidUsageError, NezhaTimeout


class StoreBootstrap(Bootstrap):
    """rank and size as torch gave them; allgather through set/wait/get on the store.

    store: a torch.distributed.Store shared by exactly the ranks of this group (give each
    group its own PrefixStore). timeout: seconds a round may wait for the other ranks.
    """

    kind = "store"

    def __init__(self, store, rank, size, timeout=30.0, secret=None):
        if not 0 <= rank < size:
            raise InvalidUsageError(f"nezha: rank {rank} is outside 0..size-1={size - 1}")
        self.store, self.rank, self.size = store, int(rank), int(size)
        self.timeout, self.round = float(timeout), 0
        if secret is None:
            secret = job_secret_from_env()
        if secret is None:
            # No secret from the launcher: rank 0 makes one and shares it through the store.
            # The store is then the trust anchor: whoever can read it (for a TCPStore, anyone
            # who reaches MASTER_ADDR:MASTER_PORT) learns the secret. Give NEZHA_JOB_SECRET
            # (or NEZHA_JOB_SECRET_FILE) to every rank to keep that out of the store.
            from nezha.bootstrap.env import _warn_derived_secret
            _warn_derived_secret("is shared through the torch store, which anyone who reaches "
                                 "MASTER_ADDR:MASTER_PORT can read")
            if self.rank == 0:
                self.store.set("nezha/secret", secrets.token_hex(32))
            secret = bytes.fromhex(self._get("nezha/secret").decode())
        self.secret = secret
        hosts = self.allgather(socket.gethostname())
        self.local_rank = sum(1 for h in hosts[:self.rank] if h == hosts[self.rank])

    def _get(self, key):
        try:
            self.store.wait([key], timedelta(seconds=self.timeout))
        except RuntimeError as exc:  # torch reports a store timeout as a RuntimeError (DistStoreError)
            if "timeout" in str(exc).lower() or "timed out" in str(exc).lower():
                raise NezhaTimeout(f"nezha: bootstrap: rank {self.rank} waited {self.timeout} s "
                                   f"for store key {key!r}; a rank did not start or failed "
                                   "before joining (see its output)") from None
            raise
        return self.store.get(key)

    def allgather(self, obj):
        """Every rank's obj, in rank order."""
        self.round += 1
        if self.size == 1:
            return [obj]
        prefix = f"nezha/ag/{self.round}/"
        self.store.set(prefix + str(self.rank), json.dumps(obj))
        out = []
        for r in range(self.size):
            out.append(obj if r == self.rank else json.loads(self._get(prefix + str(r))))
        return out

    def close(self):
        """Drop the reference to the store (torch owns it)."""
        self.store = None
