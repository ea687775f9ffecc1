"""The library's named spares (buffers.Spares.get, buffers.zeroed): zero-filled when made,
from 2 MiB up in huge pages (a private mapping, 2 MiB-aligned, advised MADV_HUGEPAGE: the
first touch, often inside the first run, faults per 2 MiB instead of per 4 KiB, issue 15),
reused, only growing, and writable and kept alive through their views."""
import gc
import os

import numpy as np
import pytest

from nezha.buffers import HUGE, Spares, zeroed


def _vma_flags(addr):
    """The smaps fields of the mapping holding addr (this process), or None."""
    with open("/proc/self/smaps") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            if lo <= addr < hi:
                out = {}
                for ln in lines[i + 1:]:
                    if "-" in ln.split()[0] and not ln.split()[0].endswith(":"):
                        break
                    k, _, v = ln.partition(":")
                    out[k] = v.strip()
                return out
    return None


@pytest.mark.parametrize("nbytes", [4096, HUGE - 1, HUGE, 3 * HUGE // 2 + 5, 16 << 20])
def test_zeroed_is_zero_writable_and_aligned(nbytes):
    a = zeroed(nbytes)
    assert a.dtype == np.uint8 and a.nbytes == nbytes and a.flags.writeable
    assert not a.any()
    if nbytes >= HUGE:
        assert a.ctypes.data % HUGE == 0
    a[:] = 7
    a[-1] = 9
    assert int(a.sum()) == 7 * (nbytes - 1) + 9


def test_a_view_keeps_the_mapping():
    v = zeroed(3 << 20)[1 << 20:]   # the mapping's only holder: a view of a view
    gc.collect()
    v[:] = 5
    assert int(v[-1]) == 5 and not zeroed(3 << 20).any()


@pytest.mark.skipif(not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled")
                    or "[never]" in open("/sys/kernel/mm/transparent_hugepage/enabled").read(),
                    reason="no transparent huge pages here")
def test_a_spare_of_3_mib_is_advised_huge():
    """numpy advises huge pages from 4 MiB only: a 3 MiB spare got none before."""
    a = Spares(0).get("snap", 3 << 20)
    vma = _vma_flags(a.ctypes.data)
    assert vma is not None and vma.get("THPeligible") == "1", vma


def test_get_reuses_grows_and_keeps_zeros():
    """One buffer per name: a smaller get is the same memory, a larger one a new zeroed
    buffer (cache keys hold the address), names apart; broadcast's zeros stay zero."""
    sp = Spares(0)
    z = sp.get("zeros", 3 << 20)
    s = sp.get("snap", 3 << 20)
    s[:] = 1
    assert sp.get("snap", 1 << 20).ctypes.data == s.ctypes.data
    assert sp.get("snap", 2 << 20).all()   # reused as it is: only made zero
    big = sp.get("snap", 5 << 20)
    assert big.ctypes.data != s.ctypes.data and not big.any()
    assert sp.get("snap", 4 << 20).ctypes.data == big.ctypes.data
    assert sp.get("zeros", 3 << 20).ctypes.data == z.ctypes.data and not z.any()
    assert not sp.get("zeros", 64 << 10).any() and sp.lent_bytes() == 0
