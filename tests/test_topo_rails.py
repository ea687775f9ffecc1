"""Rail formation from per-rank NIC reports (nezha/topo/rails.py form()): a pure function."""
import os
import sys

import pytest

from nezha.rails.tcp.ifaces import Interface
from nezha.topo import rails


def nic(name, address=None, prefix=24, kind="ethernet", up=True, speed=None, control=(),
        default_route=False):
    subnet = None
    if address:
        import ipaddress
        subnet = str(ipaddress.IPv4Network(f"{address}/{prefix}", strict=False))
    return {"name": name, "address": address, "prefixlen": prefix if address else None,
            "subnet": subnet, "up": up, "speed_mbps": speed, "kind": kind,
            "default_route": default_route, "control": list(control)}


def lab_host(i, nrails=3, mgmt=True, skip=()):
    """A lab host as nezha/lab builds it: rail<r> 10.(10+r).0.(i+1)/24, mgmt 10.9.0.(i+1)/24
    holding MASTER_ADDR (host 0's mgmt address), lo."""
    out = [nic("lo", "127.0.0.1", 8, kind="loopback")]
    if mgmt:
        out.append(nic("mgmt", f"10.9.0.{i + 1}", kind="virtual", control=["10.9.0.1"]))
    out += [nic(f"rail{r}", f"10.{10 + r}.0.{i + 1}", kind="virtual")
            for r in range(nrails) if r not in skip]
    return out


def test_lab_three_rails_and_mgmt():
    f = rails.form([lab_host(i) for i in range(4)])
    assert [r.name for r in f.rails] == ["rail0", "rail1", "rail2"]
    assert [r.subnet for r in f.rails] == ["10.10.0.0/24", "10.11.0.0/24", "10.12.0.0/24"]
    assert f.for_rank(3) == ["rail0", "rail1", "rail2"]
    for reasons in f.reasons:
        assert reasons["mgmt"].startswith("left out: management network")
        assert "10.9.0.1" in reasons["mgmt"]
        assert reasons["lo"] == "left out: loopback"
        assert reasons["rail1"].startswith("rail 1")


def test_host_missing_one_rail_leaves_it_out_everywhere():
    reports = [lab_host(i, skip=(1,) if i == 2 else ()) for i in range(4)]
    f = rails.form(reports, names=["h0", "h1", "h2", "h3"])
    assert [r.name for r in f.rails] == ["rail0", "rail2"]
    assert any("10.11.0.0/24 is missing on rank 2 (h2)" in n for n in f.notes)
    for r in (0, 1, 3):
        assert "missing" in f.reasons[r]["rail1"]


def test_mismatched_subnets():
    # Host 1's second NIC is in 10.21.0.0/24 instead of 10.11.0.0/24; a /16 is another subnet.
    a = [nic("eth0", "10.10.0.1"), nic("eth1", "10.11.0.1"), nic("eth2", "10.12.0.1")]
    b = [nic("eth0", "10.10.0.2"), nic("eth1", "10.21.0.2"), nic("eth2", "10.12.0.2", 16)]
    f = rails.form([a, b])
    assert [(r.name, r.subnet) for r in f.rails] == [("eth0", "10.10.0.0/24")]
    assert len([n for n in f.notes if "missing" in n]) == 4
    assert "missing" in f.reasons[1]["eth2"]


def test_bridges_down_and_second_nic_on_a_subnet():
    a = [nic("docker0", "172.17.0.1", 16, kind="bridge"), nic("eth0", "10.0.0.1"),
         nic("eth1", "10.0.0.11"), nic("ib0", "10.1.0.1", kind="infiniband", speed=100000),
         nic("eth9", None), nic("eth5", "10.5.0.1", up=False)]
    b = [nic("docker0", "172.17.0.1", 16, kind="bridge"), nic("eth0", "10.0.0.2"),
         nic("ib0", "10.1.0.2", kind="infiniband", speed=200000)]
    f = rails.form([a, b])
    assert [r.name for r in f.rails] == ["eth0", "ib0"]
    assert f.rails[1].speed_mbps == 100000 and f.rails[1].kind == "infiniband"
    assert f.rails[0].speed_mbps is None   # unknown on one side: unknown
    assert "bridge" in f.reasons[0]["docker0"]
    assert "same subnet 10.0.0.0/24 as eth0" in f.reasons[0]["eth1"]
    assert "down" in f.reasons[0]["eth9"] and "down" in f.reasons[0]["eth5"]


def test_default_route_is_management_unless_it_is_the_only_network():
    a = [nic("eth0", "192.168.1.5", default_route=True), nic("ib0", "10.1.0.1")]
    b = [nic("eth0", "192.168.1.6", default_route=True), nic("ib0", "10.1.0.2")]
    f = rails.form([a, b])
    assert [r.name for r in f.rails] == ["ib0"]
    assert "default route" in f.reasons[0]["eth0"]
    # Only one network: it carries the data too (a laptop, a cloud VM).
    f = rails.form([a[:1], b[:1]])
    assert [r.name for r in f.rails] == ["eth0"]


def test_different_names_on_hosts_give_numbered_rails():
    a = [nic("enp1s0", "10.10.0.1"), nic("enp2s0", "10.11.0.1")]
    b = [nic("eth0", "10.10.0.2"), nic("eth1", "10.11.0.2")]
    f = rails.form([a, b])
    assert [r.name for r in f.rails] == ["rail0", "rail1"]
    assert f.for_rank(1) == ["eth0", "eth1"]


def test_loopback_only_when_one_host_has_nothing_else():
    lo = [nic("lo", "127.0.0.1", 8, kind="loopback")]
    f = rails.form([lo, lo], hosts=["h", "h"])
    assert [r.name for r in f.rails] == ["lo"]
    f = rails.form([lo, lo], hosts=["h", "g"])
    assert f.rails == []
    f = rails.form([lo + [nic("eth0", "10.0.0.1")]] * 2, hosts=["h", "h"])
    assert [r.name for r in f.rails] == ["eth0"] and f.reasons[0]["lo"] == "left out: loopback"


class _Boot:
    """Rank 0 of two; the peer reports `peer`."""
    rank = 0

    def __init__(self, peer):
        self.peer = peer

    def allgather(self, obj):
        # the peer names the same interfaces as this rank when a spec is given
        return [obj, dict(obj, nics=self.peer, host="h1", hostname="h1")]


def test_select_overrides_and_forms(monkeypatch):
    here = [Interface("lo", "127.0.0.1", "255.0.0.0", 8, True, True),
            Interface("eth0", "10.0.0.1", "255.255.255.0", 24, True, speed_mbps=25000),
            Interface("eth1", "10.1.0.1", "255.255.255.0", 24, True, speed_mbps=100000)]
    monkeypatch.setattr(rails, "list_interfaces", lambda: here)
    monkeypatch.setattr(rails, "kind_of", lambda i: "loopback" if i.is_loopback else "ethernet")
    monkeypatch.setattr(rails, "control_addresses", lambda environ=None: [])
    boot = _Boot([nic("eth0", "10.0.0.2", speed=10000), nic("eth1", "10.9.9.2", speed=100000)])
    assert [i.name for i in rails.select(boot, None)] == ["eth0"]   # eth1: another subnet there
    assert [i.name for i in rails.select(boot, "eth")] == ["eth0", "eth1"]   # the override
    # The speed every rank will use for the prior: the slowest end of the rail.
    assert [i.speed_mbps for i in rails.select(boot, None)] == [10000]
    assert [i.speed_mbps for i in rails.select(boot, "eth")] == [10000, 100000]
    boot = _Boot([nic("eth7", "10.7.0.2")])
    with pytest.raises(rails.InvalidUsageError, match="no network reaches every host"):
        rails.select(boot, None)


def test_select_logs_the_rail_one_host_lacks(monkeypatch, capsys):
    """The job-wide decision reaches the log on the path a job takes (select(), not only
    form()'s notes): the peer has no NIC in eth1's subnet, so eth1 is left out here too."""
    from nezha import log
    from nezha.config import Config
    here = [Interface("eth0", "10.0.0.1", "255.255.255.0", 24, True),
            Interface("eth1", "10.1.0.1", "255.255.255.0", 24, True)]
    monkeypatch.setattr(rails, "list_interfaces", lambda: here)
    monkeypatch.setattr(rails, "kind_of", lambda i: "ethernet")
    monkeypatch.setattr(rails, "control_addresses", lambda environ=None: [])
    log.configure(Config._read(environ={"NEZHA_DEBUG": "INFO", "NEZHA_DEBUG_SUBSYS": "TOPO"}))
    try:
        got = rails.select(_Boot([nic("eth0", "10.0.0.2")]), None)
    finally:
        err = capsys.readouterr().err
        log.configure()
    assert [i.name for i in got] == ["eth0"]
    assert "subnet 10.1.0.0/24 is missing on rank 1 (h1): left out on every host" in err, err
    assert "eth1: left out: subnet 10.1.0.0/24 is missing" in err, err


def test_nominal_speeds_seed_the_first_split():
    # 400 and 100 Mbit/s rails: the first large allreduce is split 4:1, not evenly; with
    # NEZHA_SPLIT=equal, or a speed unknown somewhere, it stays even.
    from nezha.config import Config
    from nezha.costmodel import bucket_of
    from nezha.planner import Planner

    class R:
        def __init__(self, speed):
            self.speed = speed

        def properties(self):
            return type("P", (), {"speed_mbps": self.speed})()

    nominal = rails.nominal_rates([R(400), R(100)], nconns=2)
    assert nominal == [400.0, 400.0, 100.0, 100.0]
    assert rails.nominal_rates([R(400), R(None)], 1) is None
    key = bucket_of("allreduce", 16 << 20)
    p = Planner(2, Config.load({}, environ={}), ["a", "b"], 4, nominal=[400.0, 100.0])
    assert p.model.shares(key, [True, True]) == pytest.approx([0.8, 0.2])
    p = Planner(2, Config.load({"SPLIT": "equal"}, environ={}), ["a", "b"], 4,
                nominal=[400.0, 100.0])
    assert p.model.shares(key, [True, True]) == pytest.approx([0.5, 0.5])


def test_control_addresses():
    env = {"MASTER_ADDR": "10.9.0.1",
           "PMIX_SERVER_URI41": "prterun-nzh0-1@0.0;tcp4://10.9.0.1:40123",
           "PMIX_SERVER_URI3": "x;tcp4://10.9.0.7:1"}
    assert rails.control_addresses(env) == ["10.9.0.1", "10.9.0.7"]


WORKER = """
import numpy as np, nezha
c = nezha.Communicator()
x = np.full(1 << 20, c.rank + 1, np.float32)
c.allreduce(x)
assert (x == sum(range(1, c.size + 1))).all()
print("RAILS", c.rank, ",".join(r.name for r in c._mesh.rails), flush=True)
c.close()
"""


@pytest.mark.lab
@pytest.mark.parametrize("launcher", ["env", "mpi"])
def test_lab_forms_rails_without_ifname(lab_factory, launcher):
    # 3 rails plus the mgmt network, no interface named: rail0..rail2, mgmt left out (it holds
    # MASTER_ADDR with the env launcher, the PMIx server's address under mpirun).
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lab3 = lab_factory(hosts=3, rails=3, rates="400mbit")
    env = dict(PYTHONPATH=root, NEZHA_SOCKET_IFNAME="", NEZHA_DEBUG="INFO",
               NEZHA_DEBUG_SUBSYS="TOPO", NEZHA_TIMEOUT="60")
    before = lab3.counters()
    res = lab3.run([sys.executable, "-c", WORKER], np=3, env=env, timeout=300, capture=True,
                   env_rendezvous=launcher == "env")
    out = (res.stdout or "") + (res.stderr or "")
    assert res.returncode == 0, out[-3000:]
    assert sorted(ln.split()[-1] for ln in out.splitlines() if "RAILS" in ln) == \
        ["rail0,rail1,rail2"] * 3, out[-3000:]
    assert "mgmt: left out: management network" in out
    after = lab3.counters()
    for h in range(3):
        for r in range(3):
            assert after[(h, r)][0] - before[(h, r)][0] > 500_000, (h, r)


def test_info_says_why_each_interface_is_taken_or_left_out():
    import json
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEZHA_", "MASTER_"))}
    out = subprocess.run([sys.executable, "-m", "nezha", "info", "--json"], capture_output=True,
                         text=True, env=dict(env, PYTHONPATH=root), timeout=60)
    d = json.loads(out.stdout)
    reasons = d["rail_formation"]["reasons"]
    assert set(reasons) == {i["name"] for i in d["interfaces"]}
    assert reasons["lo"].startswith("left out") or d["rails"]["selected"] == ["lo"]
    assert d["rails"]["selected"] == [r["name"] for r in d["rail_formation"]["rails"]]
