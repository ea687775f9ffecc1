"""bfloat16 buffers for the tests. numpy has no bfloat16: a buffer of bfloat16 bits is an
ml_dtypes array on the storage (0.05 s to import) or a torch tensor on it through DLPack, as
torch users pass it (torch costs ~3 s of CPU to import in every rank, a third of an 8-rank
world's time on 2 cores). use_torch picks torch; ml_dtypes is the default, torch without it."""
import numpy as np

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def available(use_torch=False):
    """Whether bfloat16 buffers can be made (use_torch: through torch)."""
    if use_torch or ml_dtypes is None:
        return _torch() is not None
    return True


def view(storage, use_torch=False):
    """A bfloat16 buffer on storage's memory (2-byte elements), no copy."""
    if use_torch or ml_dtypes is None:
        torch = _torch()
        return torch.from_numpy(storage.view(np.int16)).view(torch.bfloat16)
    return storage.view(ml_dtypes.bfloat16)


def bits(buf):
    """The uint16 storage behind a buffer made by view."""
    if isinstance(buf, np.ndarray):
        return buf.view(np.uint16)
    import torch
    return buf.view(torch.int16).numpy().view(np.uint16)
