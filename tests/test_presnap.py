"""The buffers the library owns (nezha.buffers.Spares): the pool the failover snapshots
taken at post time are lent from."""


def test_the_pool_lends_within_its_cap():
    """Spares.lend: the smallest free buffer that fits (buffers of the same size are equal
    arrays: found by identity), new ones while all stay within the cap (free ones dropped
    to make room), else None; the named buffers (Spares.get) apart."""
    from nezha.buffers import Spares
    sp = Spares(4 << 20)
    a, b = sp.lend("snap", 1 << 20), sp.lend("snap", 2 << 20)
    c = sp.lend("snap", 1 << 20)
    assert all(x is not None for x in (a, b, c)) and sp.lent_bytes() == 4 << 20
    assert sp.lend("snap", 4096) is None  # the cap reached, nothing free to drop
    for x in (b, c, a):
        sp.give_back("snap", x)
    assert sp.lend("snap", 512 << 10) is c  # the first of the smallest that fit
    assert sp.lend("snap", 1 << 20) is a
    assert sp.lend("snap", 3 << 20) is None  # no room even without b (free, too small)
    assert sp.lend("snap", 2 << 20) is b
    sp.give_back("snap", b)
    sp.give_back("snap", a)
    d = sp.lend("snap", 3 << 20)  # b and a dropped for it: 1 (c) + 3 MiB
    assert d is not None and d.nbytes == 3 << 20 and sp.lent_bytes() == 4 << 20
    assert sp.get("sink", 8 << 20).nbytes == 8 << 20 and sp.lent_bytes() == 4 << 20
