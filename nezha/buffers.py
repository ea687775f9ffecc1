"""Turn user buffers into flat numpy views (no copies) and check them before anything moves.

Accepted: numpy arrays, anything with the buffer protocol (bytearray, memoryview,
array.array) and CPU DLPack objects such as torch tensors (bfloat16 included).
"""
import mmap
import threading

import numpy as np

from nezha.types import DType, dtype_from_numpy


def as_array(buf, name, writable):
    """(flat numpy view sharing buf's memory, DType); TypeError/ValueError if unusable."""
    if buf is None:
        raise TypeError(f"nezha: {name} is None")
    dt = None
    if isinstance(buf, np.ndarray):
        arr = buf
    elif hasattr(buf, "__dlpack__") and not isinstance(buf, (bytes, bytearray, memoryview)):
        arr, dt = _from_dlpack(buf, name)
    else:
        try:
            mv = memoryview(buf)
        except TypeError:
            raise TypeError(f"nezha: {name} of type {type(buf).__name__} is not a buffer "
                            "(numpy array, bytearray, memoryview, array.array or a CPU "
                            "DLPack tensor)") from None
        if not mv.c_contiguous:
            raise ValueError(f"nezha: {name} is not contiguous; pass a contiguous copy")
        arr = np.asarray(mv)
        if mv.readonly and writable:
            raise ValueError(f"nezha: {name} is read-only but the operation writes into it")
    if not arr.flags.c_contiguous:
        raise ValueError(f"nezha: {name} is not contiguous (strides {arr.strides}); pass "
                         "np.ascontiguousarray(...) or a contiguous slice")
    if writable and not arr.flags.writeable:
        raise ValueError(f"nezha: {name} is read-only but the operation writes into it")
    if dt is None:
        dt = _FAST.get(arr.dtype)  # the common case, one dict lookup
    if dt is None and arr.dtype.kind == "V" and arr.dtype.name == "bfloat16":
        # ml_dtypes' numpy bfloat16: its uint16 bits, as for torch's (memoryview refuses 'E')
        arr, dt = arr.view(np.uint16), DType.BFLOAT16
    if dt is None:
        try:
            dt = dtype_from_numpy(arr.dtype)
        except TypeError as exc:
            raise TypeError(f"nezha: {name}: {exc}".replace("nezha: nezha: ", "nezha: ")) from None
    return arr.reshape(-1), dt


def _from_dlpack(obj, name):
    dev = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (1, 0)
    if int(dev[0]) != 1:  # kDLCPU
        raise ValueError(f"nezha: {name} lives on device {dev}; nezha moves CPU memory only")
    is_neg = getattr(obj, "is_neg", None)  # torch: a lazily negated view (DLPack loses it)
    if is_neg is not None and is_neg():
        raise ValueError(f"nezha: {name} is a negative view (its memory holds -x); pass "
                         "t.resolve_neg()")
    if str(getattr(obj, "dtype", "")) == "torch.bfloat16":
        # numpy has no bfloat16: look at the same memory as uint16 (no copy).
        import torch
        return np.from_dlpack(obj.view(torch.uint16)), DType.BFLOAT16
    try:
        return np.from_dlpack(obj), None
    except (RuntimeError, TypeError, BufferError) as exc:
        raise TypeError(f"nezha: {name}: cannot use this DLPack object: {exc}") from None


HUGE = 2 << 20  # a transparent huge page (x86-64; arm64 with 4 KiB base pages)


def zeroed(nbytes, huge=True):
    """A zero-filled uint8 buffer of nbytes. From HUGE up its own private mapping,
    HUGE-aligned and advised MADV_HUGEPAGE (THP's `madvise` mode): its first touch, often
    inside a run, takes a fault per 2 MiB, not per 4 KiB. numpy advises only from 4 MiB,
    and its unaligned ends still fault 4 KiB at a time (16 MiB: 7 of 8 huge). The kernel
    gives the pages zeroed: no memset. Unmapped when the array is dropped. huge=False:
    advised MADV_NOHUGEPAGE instead, for a buffer touched at start, outside any run (a
    VM's 2 MiB pages can cost 10x as much to fault after idle: session 26)."""
    if nbytes < HUGE or not hasattr(mmap, "MADV_HUGEPAGE"):
        return np.zeros(nbytes, np.uint8)
    size = -(-nbytes // HUGE) * HUGE   # whole huge pages (the last one is faulted whole)
    m = mmap.mmap(-1, size + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    whole = np.frombuffer(m, np.uint8)   # holds m: unmapped with the last view
    off = -whole.ctypes.data % HUGE
    try:
        m.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE, off, size)
    except OSError:
        pass  # no THP in this kernel: 4 KiB pages, zero all the same
    return whole[off:off + nbytes]


class Spares:
    """The library's own buffers, one owner, keyed by name.

    get(name, nbytes): the one buffer of that name, shared by every call that names it
      (reduce's sink, broadcast's zeros, the failover snapshot taken at run start). Made
      zero-filled, reused (no page faults), it only grows: cached schedules point into it
      and plan cache keys hold its address. huge=False: on 4 KiB pages (zeroed).
    lend(name, nbytes) / give_back(name, buf): a buffer of that name for one holder alone
      until it gives it back (the failover snapshots taken when calls are posted, several
      queued at once), the smallest free one that fits, else a new one while all lent
      buffers together (free or not) stay within `cap` bytes (free ones are dropped to make
      room), else None (nothing dropped). Any thread may lend and give back."""

    def __init__(self, cap):
        self.cap = int(cap)
        self._named = {}
        self._free = {}       # name -> [buffers given back]
        self._lent = 0        # bytes of every lendable buffer, free or lent
        self._lock = threading.Lock()

    def get(self, name, nbytes, huge=True):
        buf = self._named.get(name)
        if buf is None or buf.nbytes < nbytes:
            buf = self._named[name] = zeroed(max(nbytes, 4096), huge)
        return buf[:nbytes]

    def is_zeros(self, buf):
        """buf is the start of the named "zeros" buffer (a lazy broadcast's input on a rank
        other than its root, Communicator._broadcast): nothing ever writes it, so a lazy
        collective keeps it as its input as it is, with no copy of its own."""
        z = self._named.get("zeros")
        return (z is not None and buf is not None and buf.nbytes <= z.nbytes
                and address(buf) == address(z))

    def lend(self, name, nbytes):
        """A uint8 buffer of at least nbytes, this caller's until give_back; or None."""
        with self._lock:
            free = self._free.setdefault(name, [])
            fits = [(b.nbytes, i) for i, b in enumerate(free) if b.nbytes >= nbytes]
            if fits:
                return free.pop(min(fits)[1])
            size = max(nbytes, 4096)
            idle = sum(b.nbytes for bufs in self._free.values() for b in bufs)
            if self._lent - idle + size > self.cap:
                return None  # not even with every free one dropped
            for bufs in self._free.values():
                while bufs and self._lent + size > self.cap:
                    self._lent -= bufs.pop(0).nbytes  # the oldest first
            self._lent += size
        return np.empty(size, np.uint8)

    def give_back(self, name, buf):
        with self._lock:
            self._free.setdefault(name, []).append(buf)

    def lent_bytes(self):
        """Bytes of the lendable buffers (free or lent): never more than cap."""
        return self._lent


from nezha._core.engine import address  # noqa: E402,F401  (re-exported: first byte of a buffer)

_FAST = {np.dtype(t): DType[t.upper()] for t in (
    "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
    "float32", "float64")}
