"""torch tensors as nezha buffers (no copies where contiguous), and torch ReduceOps as nezha ops."""
import torch
import torch.distributed as dist

from nezha.types import ReduceOp

_R = dist.ReduceOp.RedOpType
_OPS = {_R.SUM: ReduceOp.SUM, _R.AVG: ReduceOp.AVG, _R.PRODUCT: ReduceOp.PROD,
        _R.MIN: ReduceOp.MIN, _R.MAX: ReduceOp.MAX, _R.BAND: ReduceOp.BAND,
        _R.BOR: ReduceOp.BOR, _R.BXOR: ReduceOp.BXOR}
# bool tensors travel as uint8 0/1: SUM and MAX are "or", PRODUCT and MIN are "and"
_BOOL_OPS = {ReduceOp.SUM: ReduceOp.BOR, ReduceOp.MAX: ReduceOp.BOR, ReduceOp.BOR: ReduceOp.BOR,
             ReduceOp.PROD: ReduceOp.BAND, ReduceOp.MIN: ReduceOp.BAND,
             ReduceOp.BAND: ReduceOp.BAND, ReduceOp.BXOR: ReduceOp.BXOR}
_NUMPY_OK = {torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32, torch.uint32,
             torch.int64, torch.uint64, torch.float16, torch.float32, torch.float64}


def check_device(t, what="tensor"):
    """Raise a ValueError naming the device when t is not a CPU tensor."""
    dev = t.device
    if dev.type != "cpu":
        raise ValueError(
            f"nezha: {what} is on device {dev}, but the nezha backend moves CPU memory only. "
            "Move it with .cpu() first, or give each device its own backend: "
            "dist.init_process_group('cpu:nezha,cuda:nccl') (or cuda:gloo)")


def as_buffer(t, what="tensor"):
    """A view of t's memory nezha accepts (numpy array, or the tensor itself for bfloat16,
    which nezha reads through DLPack as uint16 storage); no copy. t must be contiguous."""
    t = t.detach()
    if t.dtype in _NUMPY_OK:
        return t.numpy()
    if t.dtype == torch.bfloat16:
        return t  # nezha has bfloat16 (DType.BFLOAT16): summed as bfloat16, not converted
    if t.dtype == torch.bool:
        return t.view(torch.uint8).numpy()
    raise TypeError(f"nezha: {what} has dtype {t.dtype}, which nezha does not reduce or move; "
                    "supported: bool, int8..int64, uint8..uint64, float16, bfloat16, float32, "
                    "float64 (complex tensors arrive as real views through torch.distributed)")


class Staged:
    """A tensor as a nezha buffer: the tensor's own memory when contiguous, else a contiguous
    copy that finish() writes back."""

    __slots__ = ("tensor", "tmp", "buf")

    def __init__(self, t, what="tensor", read=True):
        check_device(t, what)
        self.tensor = t
        if t.is_contiguous():
            self.tmp = None
            self.buf = as_buffer(t, what)
        else:
            self.tmp = t.contiguous() if read else torch.empty(t.shape, dtype=t.dtype)
            self.buf = as_buffer(self.tmp, what)

    def finish(self):
        """Copy the result back into a non-contiguous tensor."""
        if self.tmp is not None:
            self.tensor.copy_(self.tmp)


def nezha_op(red, dtype):
    """(nezha ReduceOp, premul factor or None) for a torch ReduceOp (or RedOpType) on dtype."""
    kind = getattr(red, "op", red)
    factor = None
    if kind == _R.PREMUL_SUM:
        try:
            factor = red.factor
        except (AttributeError, RuntimeError):
            factor = None
        if factor is None:
            raise ValueError("nezha: ReduceOp.PREMUL_SUM without a readable factor is not "
                             "supported; scale the tensor yourself and use ReduceOp.SUM")
        kind = _R.SUM
    try:
        op = _OPS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"nezha: reduce op {red} is not supported by the nezha backend "
                         "(SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM are)") from None
    if dtype == torch.bool:
        if op not in _BOOL_OPS:
            raise ValueError(f"nezha: {op.name} is not defined for bool tensors")
        op = _BOOL_OPS[op]
    elif op == ReduceOp.AVG and not (dtype.is_floating_point):
        raise ValueError(f"nezha: ReduceOp.AVG is defined for floating tensors only, not "
                         f"{dtype}; use SUM and divide")
    elif op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dtype.is_floating_point:
        raise ValueError(f"nezha: {op.name} is defined for integer and bool tensors only, "
                         f"not {dtype}")
    return op, factor


def one(tensors, what):
    """The single tensor of a one-tensor list (torch passes lists; one tensor per process)."""
    if len(tensors) != 1:
        raise ValueError(f"nezha: {what} takes exactly one tensor per process, got "
                         f"{len(tensors)}")
    return tensors[0]
