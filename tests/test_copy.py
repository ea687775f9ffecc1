"""The shared-memory copy (include/nezha/nezha_copy.h, nezha._core.reduce.copy): byte-exact
at every distance between destination and source modulo a page (1-63 bytes take its own
vector loop instead of memcpy, whose `rep movsb` is slow there on AMD cores), at lengths
around its thresholds and tails, and it writes nothing outside the destination."""
import numpy as np
import pytest

from nezha._core.reduce import copy

PAGE = 4096
LENGTHS = [0, 1, 63, 2047, 2048, 2049, 2048 + 63, 4096 + 37, 70001]


def _pages(n):
    """A page-aligned byte array of n bytes (numpy's own data sits at no fixed offset)."""
    raw = np.empty(n + PAGE, np.uint8)
    off = (-raw.ctypes.data) % PAGE
    return raw[off:off + n]


@pytest.mark.parametrize("length", LENGTHS)
def test_exact_at_every_distance(length):
    rng = np.random.default_rng(length)
    src = _pages(length + PAGE)
    src[:] = rng.integers(0, 256, src.size, dtype=np.uint8)
    dst = _pages(length + 3 * PAGE)
    for soff in (0, 16, 4000):
        for dist in range(PAGE):  # dst - src modulo a page
            doff = PAGE + soff + dist
            dst[:] = 0xA5
            copy(dst[doff:doff + length], src[soff:soff + length])
            assert np.array_equal(dst[doff:doff + length], src[soff:soff + length]), \
                (length, soff, dist)
            assert (dst[:doff] == 0xA5).all() and (dst[doff + length:] == 0xA5).all(), \
                (length, soff, dist)


def test_refuses_overlap_and_a_length_mismatch():
    a = np.zeros(8192, np.uint8)
    with pytest.raises(ValueError, match="overlap"):
        copy(a[16:4112], a[:4096])
    with pytest.raises(ValueError, match="size mismatch"):
        copy(a[:10], a[100:111])
