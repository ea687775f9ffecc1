"""Typing stub for nezha._core.reduce (the C reduction kernels)."""
from typing_extensions import Buffer

def reduce(dst: Buffer, src: Buffer, dtype: int, op: int) -> None:
    """In place dst = dst OP src, elementwise; dst and src are the same buffer or disjoint."""

def reduce3(out: Buffer, a: Buffer, b: Buffer, dtype: int, op: int) -> None:
    """out = a OP b, elementwise; out may be a or b exactly, but must not partially overlap them."""

def avg_finish(buf: Buffer, dtype: int, divisor: float) -> None:
    """In place buf /= divisor, elementwise, for floating dtypes (ValueError for integers)."""
