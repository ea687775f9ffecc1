"""The host area's factory and its errors: one shared segment for a communicator whose ranks
all share one host, where large allreduces reduce straight out of each other's slots
(include/nezha/nezha_hostcoll.h says what runs there and why).

Set-up, collective over the bootstrap like the shm rings (transports/shm.py): every rank
says what it wants and rank 0's settings are taken by all (a rank with other settings would
take the rings where the others take the area); rank 0 creates the segment (mode 0600,
O_EXCL, its uid, pid and a random tag in the name, HMAC(job secret, name) in the header);
after a round the others open and check it; after another, rank 0 unlinks the name, so a
close or a SIGKILL leaves nothing behind (and `shm.sweep` removes a name whose creator died
in between). If any rank failed, every rank goes on without the area (logged).
"""
import hashlib
import hmac
import os

from nezha import log
from nezha._core import engine as _eng
from nezha.diagnose import _describe, _diff
from nezha.errors import CollectiveMismatch, InvalidUsageError, NezhaTimeout, PeerError
from nezha.transports.shm import SHM_DIR
from nezha.types import DType, ReduceOp

RAIL = "shm"  # what messages name as the rail: the host's shared memory


def setup(boot, peers, want, min_bytes, chunk, spin):
    """The HostColl of this rank, or None (not every rank wants it, or it failed)."""
    asks = boot.allgather((bool(want), float(min_bytes), int(chunk)))
    if not all(a[0] for a in asks):
        return None
    _, min_bytes, chunk = asks[0]
    chunk = max(4096, int(chunk) // 4096 * 4096)
    n, me = boot.size, boot.rank
    base = f"nezha-{os.geteuid()}-{peers[0]['pid']}-{peers[0]['shm_tag']}-host"
    nonce = hmac.new(boot.secret, b"nezha-host:" + base.encode(), hashlib.sha256).digest()
    area, err = None, None
    if me == 0:
        try:
            area = _eng.HostArea.map("/" + base, 0, n, chunk, nonce)
        except OSError as exc:
            err = str(exc)
    errs = [e for e in boot.allgather(err) if e]
    if not errs and me != 0:
        try:
            area = _eng.HostArea.map("/" + base, me, n, chunk, nonce)
        except OSError as exc:
            err = str(exc)
    errs = errs or [e for e in boot.allgather(err) if e]
    if me == 0:
        try:
            os.unlink(f"{SHM_DIR}/{base}")
        except OSError:
            pass
    if errs:
        if area is not None:
            area.close()
        log.warn("INIT", f"host area unusable, allreduces on this host take the shm rings: "
                 f"{errs[0]}")
        return None
    area.watch([p["pid"] for p in peers])
    area.set_spin(spin)
    log.info("INIT", f"host area: {n} ranks, {chunk >> 10} KiB slots, allreduces from "
             f"{int(min_bytes)} bytes")
    return HostColl(area, me, min_bytes)


class HostColl:
    """Runs allreduces in the host area and turns its error codes into nezha's errors."""

    def __init__(self, area, rank, min_bytes):
        self.area, self.rank, self.min_bytes = area, rank, min_bytes

    @property
    def calls(self):
        return self.area.calls

    def takes(self, nbytes):
        """Does an allreduce of nbytes run here? (The same answer on every rank that calls
        it with the same arguments: rank 0's threshold is everyone's.)"""
        return nbytes >= self.min_bytes

    def allreduce(self, a, out, dt, op, seq, size, timeout, coll=1):
        rc = self.area.allreduce(a.ctypes.data, out.ctypes.data, a.size, a.itemsize, int(dt),
                                 int(op), float(size) if op == ReduceOp.AVG else 0.0, coll,
                                 seq, timeout)
        if rc:
            raise self.error(rc, "allreduce", seq, a.size, dt, op, timeout, coll)

    def error(self, rc, name, seq, count, dt, op, timeout, coll=1):
        """The exception for the area's error code rc."""
        e = self.area.error()
        if e["closed"]:
            return PeerError(f"nezha: {name} #{seq}: the communicator was closed", rail=RAIL)
        peer = e["peer"]
        where = f"{name} #{seq} on rank {self.rank} (host area, rail {RAIL})"
        if rc == _eng.HC_EMISMATCH:  # worded as the engine's (diagnose.py)
            exp = dict(seq=seq, coll=coll, count=count, dtype=int(dt), op=int(op), root=-1,
                       algo=0, plan=0, magic=0)
            got = dict(exp, seq=e["seq"], coll=e["coll"], count=e["count"], dtype=e["dtype"],
                       op=e["op"])
            return CollectiveMismatch(
                f"nezha: rank {self.rank}: collective mismatch with rank {peer} in the host "
                f"area (rail {RAIL}): this rank called {_describe(exp)}, rank {peer} called "
                f"{_describe(got)} ({_diff(exp, got)})")
        if rc == _eng.HC_EABORT:
            code, who, on = e["abort_code"], e["abort_rank"], e["abort_peer"]
            if code == _eng.HC_EDEAD:
                return PeerError(f"nezha: {where}: rank {on} died (seen by rank {who})",
                                 peer=on, rail=RAIL)
            if code == _eng.HC_EMISMATCH:
                return CollectiveMismatch(f"nezha: {where}: rank {who} called another "
                                          f"collective than rank {on}")
            if code == _eng.HC_ETIMEOUT:
                return NezhaTimeout(
                    f"nezha: {where} did not finish within {timeout:g} s: rank {who} heard "
                    f"nothing from rank {on}; that rank may be stuck, dead, or in a different "
                    "collective (NEZHA_TIMEOUT sets the limit)")
            return PeerError(f"nezha: {where}: rank {who} failed and left the collective",
                             peer=who, rail=RAIL)
        if rc == _eng.HC_EDEAD:
            return PeerError(f"nezha: {where}: rank {peer} died", peer=peer, rail=RAIL)
        if rc == _eng.HC_EOP:  # refused before anything was published: this call's own
            op, dt = int(op), int(dt)
            opn = ReduceOp(op).name if 0 <= op < len(ReduceOp) else f"op {op}"
            dtn = DType(dt).name.lower() if 0 <= dt < len(DType) else f"dtype {dt}"
            return InvalidUsageError(f"nezha: {where}: {opn} is not defined for {dtn} "
                                     "(the host area's kernels refused it)")
        if rc == _eng.HC_ETIMEOUT:
            below = (f", e.g. an allreduce below NEZHA_SHM_COLL = {int(self.min_bytes)} bytes "
                     "on the shm rings" if self.min_bytes > 0 else "")
            return NezhaTimeout(
                f"nezha: {where} did not finish within {timeout:g} s: nothing from rank "
                f"{peer}; that rank may be stuck, dead, or in a different collective{below} "
                "(NEZHA_TIMEOUT sets the limit)")
        return PeerError(f"nezha: {where}: error {rc}", rail=RAIL)

    def abort(self, exc=None):
        """This rank failed (exc): every rank waiting in the area stops at once."""
        self.area.abort(_eng.HC_EMISMATCH if isinstance(exc, CollectiveMismatch)
                        else _eng.HC_EABORT, self.rank)

    def close(self):
        self.area.close()
