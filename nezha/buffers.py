"""Turn user buffers into flat numpy views (no copies) and check them before anything moves.

Accepted: numpy arrays, anything with the buffer protocol (bytearray, memoryview,
array.array) and CPU DLPack objects such as torch tensors (bfloat16 included).
"""
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
        dt = DType.BFLOAT16  # ml_dtypes' numpy bfloat16
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


from nezha._core.engine import address  # noqa: E402,F401  (re-exported: first byte of a buffer)

_FAST = {np.dtype(t): DType[t.upper()] for t in (
    "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
    "float32", "float64")}
