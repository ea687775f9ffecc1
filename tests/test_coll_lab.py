"""The collective suite across lab hosts (one rank per network namespace) on two rails."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.lab
@pytest.mark.parametrize("np_", [4, 3])
def test_world_across_lab_hosts(lab, np_):
    env = dict(os.environ, PYTHONPATH=ROOT, NEZHA_SOCKET_IFNAME="rail0,rail1",
               NEZHA_TEST_FULL="0", NEZHA_MIN_RAIL_PIECE="4k", NEZHA_TIMEOUT="60")
    # every rank starts pytest: without the hypothesis plugin (unused there) ~1 s less each
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "--color=no", "-p", "no:cacheprovider",
           "-p", "no:hypothesispytest", "--no-header",
           os.path.join(ROOT, "tests", "test_coll_world.py")]
    before = lab.counters()
    res = lab.run(cmd, np=np_, env=env, timeout=900, capture=True)
    out = (res.stdout or "") + (res.stderr or "")
    assert res.returncode == 0, "\n".join(out.splitlines()[-60:])
    assert out.count(" passed") >= np_, out[-3000:]
    after = lab.counters()
    # the data really crossed both rails of every host that took part
    for h in range(np_):
        for r in range(2):
            assert after[(h, r)][0] - before[(h, r)][0] > 100_000, (h, r, before, after)


@pytest.mark.lab
def test_world_on_three_unequal_rails(lab_factory):
    lab3 = lab_factory(hosts=3, rails=3, rates="400mbit,200mbit,100mbit")
    env = dict(os.environ, PYTHONPATH=ROOT, NEZHA_SOCKET_IFNAME="rail0,rail1,rail2",
               NEZHA_TEST_FULL="0", NEZHA_MIN_RAIL_PIECE="4k", NEZHA_TIMEOUT="60")
    # every rank starts pytest: without the hypothesis plugin (unused there) ~1 s less each
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "--color=no", "-p", "no:cacheprovider",
           "-p", "no:hypothesispytest", "--no-header",
           os.path.join(ROOT, "tests", "test_coll_world.py")]
    res = lab3.run(cmd, np=3, env=env, timeout=900, capture=True)
    out = (res.stdout or "") + (res.stderr or "")
    assert res.returncode == 0, "\n".join(out.splitlines()[-60:])
    assert out.count(" passed") >= 3, out[-3000:]
