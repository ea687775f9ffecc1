"""Tests of the lab itself (nezha.lab): build/teardown, faults, rates, coexistence, launchers.

Never asserts timings: only configuration, reachability, exit statuses and byte counters.
Needs `-p tests.lab_fixture` (or conftest's pytest_plugins) for the `lab` fixtures.
"""
import contextlib
import json
import os
import selectors
import subprocess
import sys
import time

import pytest

from nezha.errors import InvalidUsageError
from nezha.lab import Lab, LabSpec, cli, launch, netns, shaping, state_path, teardown

PORT = 7000
MB4 = 4 << 20

# Drains every connection on the given addresses; exits when its stdin closes.
SERVER = r"""
import socket, sys, threading
def drain(c):
    c.settimeout(30)
    try:
        while c.recv(1 << 20):
            pass
    except OSError:
        pass
    c.close()
def serve(addr, port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(16)
    while True:
        c, _ = s.accept()
        threading.Thread(target=drain, args=(c,), daemon=True).start()
for a in sys.argv[2:]:
    threading.Thread(target=serve, args=(a, int(sys.argv[1])), daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
"""

# Connects to each address (optionally sends n bytes and waits until the peer has them all).
CLIENT = r"""
import json, socket, sys
port, timeout, n = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
res = {}
for a in sys.argv[4:]:
    try:
        c = socket.create_connection((a, port), timeout=timeout)
        if n:
            c.settimeout(60); c.sendall(b"\0" * n); c.shutdown(socket.SHUT_WR); c.recv(1)
        c.close(); res[a] = True
    except OSError:
        res[a] = False
print(json.dumps(res))
"""


@contextlib.contextmanager
def server(lab, host, addrs):
    """A drain server in `host` listening on addrs:PORT for the duration of the block."""
    p = lab.popen(host, [sys.executable, "-c", SERVER, str(PORT), *addrs],
                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        assert sel.select(15) and p.stdout.readline().strip() == "ready", "server did not start"
        sel.close()
        yield p
    finally:
        p.stdin.close()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def reach(lab, addrs, src=0, timeout=2.0, nbytes=0):
    """{addr: connected?} for TCP connects from host `src` (sending nbytes to each if given)."""
    cp = lab.exec(src, [sys.executable, "-c", CLIENT, str(PORT), str(timeout), str(nbytes), *addrs],
                  timeout=120)
    return json.loads(cp.stdout)


def root_snapshot():
    """Links, nft tables and namespaces of the root namespace."""
    links = sorted(d["ifname"] for d in netns.ip_json("link", "show"))
    tables = netns.run([netns.tool("nft"), "list", "tables"]).stdout
    return links, tables, netns.netns_list()


def tbf_stats(lab, host, dev):
    """The `tc -s -j` entry of dev's root tbf in `host`."""
    for q in netns.tc_json("-s", "qdisc", "show", "dev", dev, ns=lab.host_ns(host)):
        if q.get("kind") == "tbf":
            return q
    raise AssertionError(f"no tbf on {dev}")


# ---- no lab needed ----------------------------------------------------------------------------
def test_burst_formula():
    # burst = max(rate x 500 us, GSO + GSO/16 + 2 MTU)
    assert shaping.burst_bytes(400e6) == 65536 + 4096 + 18000
    assert shaping.burst_bytes(3.2e9) == 200000
    assert shaping.burst_bytes(50e6, mtu=1500, gso=16384) == 16384 + 1024 + 3000
    assert shaping.tbf_args(400e6)[:3] == ["tbf", "rate", "400000000bit"]


def test_parse_rates():
    assert shaping.parse_rate("400mbit") == 400_000_000
    assert shaping.parse_rate("1.6Gbit") == 1_600_000_000
    assert shaping.parse_rates("400mbit,100mbit", 2) == [400_000_000, 100_000_000]
    assert shaping.parse_rates("400mbit", 3) == [400_000_000] * 3
    for bad in ("400mbps", "fast", ""):
        with pytest.raises(ValueError):
            shaping.parse_rates(bad, 1)
    with pytest.raises(ValueError):
        shaping.parse_rates("1m,2m,3m", 2)


def test_not_root_is_one_clear_error(monkeypatch, capsys):
    monkeypatch.setattr(netns, "_caps", lambda: 0)
    assert cli.main(["up", "--name", "zzroot"]) == 1
    err = capsys.readouterr().err
    assert "needs root" in err and "CAP_NET_ADMIN" in err
    assert not os.path.exists(state_path("zzroot"))


def test_placement_is_by_block(monkeypatch):
    assert launch.placement(4, 2) == [(0, 0, 2), (0, 1, 2), (1, 0, 2), (1, 1, 2)]
    assert launch.placement(3, 2) == [(0, 0, 2), (0, 1, 2), (1, 0, 1)]  # last host only partly used
    assert launch.placement(3, 1) == [(0, 0, 1), (1, 0, 1), (2, 0, 1)]  # the old one rank per host
    assert [launch.host_of(r, 3) for r in range(7)] == [0, 0, 0, 1, 1, 1, 2]
    # The mpirun wrapper is told L; the shell arithmetic itself is checked by test_ranks_per_host.
    lab = Lab(LabSpec(hosts=2, rails=1, ranks_per_host=3, name="zzplace"))
    assert lab.slots == 6 and lab.host_of(5) == 1
    monkeypatch.setattr(launch, "find_mpirun", lambda: "/x/mpirun")
    argv = launch.mpirun_argv(lab, ["true"], 6)
    assert argv[-5:-2] == ["/bin/sh", "-c", "L=3; " + launch._RANK_WRAPPER] and argv[-1] == "true"


def test_ranks_per_host_spec_and_cli(monkeypatch):
    assert LabSpec(name="zzspec").ranks_per_host == 1  # every existing call is unchanged
    old = LabSpec(name="zzspec").to_json()
    del old["ranks_per_host"]  # a state file written before ranks_per_host existed
    assert LabSpec(**old).ranks_per_host == 1
    with pytest.raises(InvalidUsageError):
        LabSpec(name="zzspec", ranks_per_host=0)
    lab = Lab(hosts=3, ranks_per_host=2, name="zzspec")
    with pytest.raises(netns.LabError, match="7.*6 ranks at most"):
        launch._check_np(lab, 7)
    assert launch._check_np(lab, None) == 6 and launch._check_np(lab, 5) == 5
    built = []
    monkeypatch.setattr(Lab, "up", lambda self, **kw: built.append(self.spec) or self)
    assert cli.main(["up", "--name", "zzspec", "--hosts", "2", "--ranks-per-host", "2"]) == 0
    assert (built[0].hosts, built[0].ranks_per_host) == (2, 2)


# ---- lab tests --------------------------------------------------------------------------------
@pytest.mark.lab
def test_up_down_leaves_nothing(lab_factory):
    before = root_snapshot()
    lab = lab_factory(hosts=3, rails=2, rates="400mbit,100mbit")
    assert set(lab.namespaces) <= set(netns.netns_list())
    assert os.path.exists(state_path(lab.name))
    st = lab.status()
    assert [ln["rate_bps"] for ln in st["links"] if ln["host"] == 2] == [400_000_000, 100_000_000]
    assert all(ln["state"] == "UP" and ln["carrier"] for ln in st["links"])
    # Same interface names on every host; addresses per LAB.md.
    assert {d["ifname"] for d in netns.ip_json("link", "show", ns=lab.host_ns(2))} == {"lo", "rail0", "rail1", "mgmt"}
    assert lab.addr(2, 1) == "10.11.0.3" and lab.mgmt_addr(2) == "10.9.0.3"
    sw = {d["ifname"]: d for d in netns.ip_json("link", "show", ns=lab.switch_ns)}
    assert sw["h2r1"]["master"] == "br1" and sw["br0"]["mtu"] == 9000
    lab.down()
    assert not any(n.startswith(lab.name) for n in netns.netns_list())
    assert not os.path.exists(state_path(lab.name))
    assert root_snapshot() == before


@pytest.mark.lab
def test_down_after_crash_sweeps_by_prefix(lab_factory):
    lab = lab_factory(hosts=2, rails=1)
    p = lab.popen(1, ["sleep", "60"])
    for _ in range(500):  # wait until it has entered the namespace
        if p.pid in netns.netns_pids([lab.host_ns(1)])[lab.host_ns(1)]:
            break
        time.sleep(0.01)
    os.unlink(state_path(lab.name))  # as if the creator died and /run lost the state
    gone = teardown(lab.name)
    assert sorted(gone) == sorted(lab.namespaces)
    assert p.wait(5) != 0  # the process inside was killed
    assert not any(n.startswith(lab.name) for n in netns.netns_list())


@pytest.mark.lab
@pytest.mark.parametrize("mode", ["down", "blackhole", "deaf"])
def test_fail_and_heal(lab, mode):
    r0, r1 = lab.addr(1, 0), lab.addr(1, 1)
    with server(lab, 1, [r0, r1]):
        try:
            assert reach(lab, [r0, r1]) == {r0: True, r1: True}
            lab.fail(1, 1, mode)
            link = next(ln for ln in lab.status()["links"] if (ln["host"], ln["rail"]) == (1, 1))
            if mode == "down":
                assert not link["carrier"] and not link["port_up"]  # host sees NO-CARRIER
            elif mode == "blackhole":
                assert link["carrier"] and link["blackholed"]  # looks fine, drops everything
            else:
                assert link["carrier"] and link["deaf"]  # looks fine, hears nothing
            assert reach(lab, [r0, r1]) == {r0: True, r1: False}
            lab.heal(1, 1)
            assert reach(lab, [r0, r1], timeout=5) == {r0: True, r1: True}
        finally:
            lab.reset()
    assert not any(ln["blackholed"] or ln["deaf"] or not ln["carrier"]
                   for ln in lab.status()["links"])


@pytest.mark.lab
def test_rate_change(lab):
    r0, r1 = lab.addr(1, 0), lab.addr(1, 1)
    try:
        lab.rate(1, "50mbit")
        st = lab.status()
        for ln in st["links"]:
            want = 50_000_000 if ln["rail"] == 1 else 400_000_000
            assert ln["rate_bps"] == want and ln["switch_rate_bps"] == want, ln
        q = tbf_stats(lab, 0, "rail1")
        assert q["options"]["rate"] * 8 == 50_000_000
        assert abs(q["options"]["burst"] - shaping.burst_bytes(50e6)) < 0.01 * shaping.burst_bytes(50e6)
        with server(lab, 1, [r0, r1]):
            c0, q0 = lab.counters(), tbf_stats(lab, 0, "rail1")
            assert reach(lab, [r0, r1], nbytes=MB4, timeout=5) == {r0: True, r1: True}
            c1, q1 = lab.counters(), tbf_stats(lab, 0, "rail1")
        for rail in (0, 1):
            assert c1[(0, rail)][0] - c0[(0, rail)][0] >= MB4  # host0 sent it on that rail
            assert c1[(1, rail)][1] - c0[(1, rail)][1] >= MB4  # host1 received it there
        assert q1["bytes"] - q0["bytes"] >= MB4
        assert q1["overlimits"] > q0["overlimits"]  # the 50mbit shaper held packets back
    finally:
        lab.reset()
    assert all(ln["rate_bps"] == 400_000_000 for ln in lab.status()["links"])


@pytest.mark.lab
def test_two_labs_coexist(lab, lab_factory):
    other = lab_factory(hosts=2, rails=1, rates="100mbit")
    assert not set(other.namespaces) & set(lab.namespaces)
    a = lab.addr(1, 0)
    assert other.addr(1, 0) == a  # same addresses, separate networks
    with server(lab, 1, [a]), server(other, 1, [a]):
        assert reach(lab, [a], nbytes=1 << 20) == {a: True}
        assert reach(other, [a], nbytes=1 << 20) == {a: True}
    other.down()
    assert set(lab.namespaces) <= set(netns.netns_list())
    with server(lab, 1, [a]):
        assert reach(lab, [a]) == {a: True}


RANK_INFO = r"""
import json, os, sys
r = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", -1)))
info = {k: os.environ.get(k) for k in ("NEZHA_SOCKET_IFNAME", "NEZHA_LAB_HOST", "RANK", "WORLD_SIZE",
        "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PATH")}
info.update(rank=r, netns=os.stat("/proc/self/ns/net").st_ino, ifs=sorted(os.listdir("/sys/class/net")))
if os.environ.get("USE_MPI"):
    from mpi4py import MPI
    info["sum"] = MPI.COMM_WORLD.allreduce(r)
print("INFO " + json.dumps(info), flush=True)
sys.exit(int(os.environ.get("EXIT_CODE", 0)) if str(r) == os.environ.get("EXIT_RANK") else 0)
"""


def infos(text):
    """The INFO records of a run's output, by rank."""
    out = {}
    for line in text.splitlines():
        if "INFO " in line:
            d = json.loads(line.split("INFO ", 1)[1])
            out[d["rank"]] = (line.split("INFO ", 1)[0], d)
    return out


@pytest.mark.lab
@pytest.mark.mpi
def test_run_mpi(lab):
    pytest.importorskip("mpi4py")
    res = lab.run([sys.executable, "-c", RANK_INFO], env={"USE_MPI": "1"}, capture=True, timeout=120)
    assert res.returncode == 0, res.stderr
    got = infos(res.stdout)
    assert sorted(got) == [0, 1, 2, 3]
    for i, (_, d) in got.items():
        assert d["netns"] == os.stat(f"/run/netns/{lab.host_ns(i)}").st_ino  # rank i runs in host i
        assert d["ifs"] == ["lo", "mgmt", "rail0", "rail1"]  # /sys shows the host's own NICs
        assert d["NEZHA_SOCKET_IFNAME"] == "rail0,rail1" and d["sum"] == 6
        assert os.path.dirname(sys.executable) in d["PATH"].split(":")
    # Fewer ranks than hosts, a user-set interface list, and the job's exit status.
    res = lab.run([sys.executable, "-c", RANK_INFO], np=2, capture=True, timeout=120,
                  env={"EXIT_RANK": "1", "EXIT_CODE": "3", "NEZHA_SOCKET_IFNAME": "rail1"})
    assert res.returncode == 3
    got = infos(res.stdout)
    # (mpirun may kill rank 0 before it prints: only the failing rank's output is certain.)
    assert 1 in got and all(d["NEZHA_SOCKET_IFNAME"] == "rail1" for _, d in got.values())


@pytest.mark.lab
def test_run_timeout_kills_job(lab):
    res = lab.run(["sleep", "60"], capture=True, timeout=1.5)
    assert res.timed_out and res.returncode == 124
    left = [p for ps in netns.netns_pids(lab.namespaces).values() for p in ps]
    assert left == []


@pytest.mark.lab
def test_run_env_rendezvous(lab):
    res = lab.run([sys.executable, "-c", RANK_INFO], env_rendezvous=True, capture=True, timeout=60,
                  master_port=29555)
    assert res.returncode == 0, res.stderr
    got = infos(res.stdout)
    assert sorted(got) == [0, 1, 2, 3]
    for i, (prefix, d) in got.items():
        assert prefix == f"[{i}] "
        assert (d["RANK"], d["WORLD_SIZE"], d["LOCAL_RANK"]) == (str(i), "4", "0")
        assert (d["MASTER_ADDR"], d["MASTER_PORT"]) == (lab.mgmt_addr(0), "29555")
        assert d["netns"] == os.stat(f"/run/netns/{lab.host_ns(i)}").st_ino
    # One rank fails: the others are killed and its status is the job's.
    res = lab.run(["sh", "-c", 'if [ "$RANK" = 1 ]; then echo bye; exit 5; fi; exec sleep 60'],
                  env_rendezvous=True, np=3, capture=True, timeout=60)
    assert res.returncode == 5 and not res.timed_out
    assert "[1] bye" in res.stdout
    assert [p for ps in netns.netns_pids(lab.namespaces).values() for p in ps] == []


@pytest.mark.lab
def test_cli_status_and_run(lab, capsys):
    assert cli.main(["status", "--name", lab.name]) == 0
    out = capsys.readouterr().out
    assert "rail1" in out and "400Mbit" in out and lab.host_ns(3) in out
    assert cli.main(["run", "--name", lab.name, "--env-rendezvous", "--np", "2", "--",
                     "sh", "-c", "exit 7"]) == 7
    assert cli.main(["fail", "--name", lab.name, "9", "0"]) == 1  # no host 9: an error, no traceback


@pytest.mark.lab
@pytest.mark.mpi
def test_ranks_per_host(lab_factory, capfd):
    """2 hosts x 2 ranks per host: ranks 0,1 in host 0, ranks 2,3 in host 1, by both launchers."""
    pytest.importorskip("mpi4py")
    lab = lab_factory(hosts=2, rails=1, ranks_per_host=2)
    ns = [os.stat(f"/run/netns/{lab.host_ns(h)}").st_ino for h in range(2)]
    assert ns[0] != ns[1]
    assert cli.main(["status", "--name", lab.name]) == 0
    assert "2 ranks per host" in capfd.readouterr().out
    script = [sys.executable, "-c", RANK_INFO]
    for mode in (["-x", "USE_MPI=1"], ["--env-rendezvous", "--master-port", "29557"]):
        assert cli.main(["run", "--name", lab.name, "--timeout", "120", *mode, "--", *script]) == 0, mode
        got = infos(capfd.readouterr().out)
        assert sorted(got) == [0, 1, 2, 3], mode  # np defaults to hosts x ranks_per_host
        for r, (_, d) in got.items():
            assert d["netns"] == ns[r // 2], (mode, r)  # ranks 0,1 share host 0; 2,3 host 1
            assert (d["LOCAL_RANK"], d["LOCAL_WORLD_SIZE"], d["NEZHA_LAB_HOST"]) == (str(r % 2), "2", str(r // 2))
            assert d["ifs"] == ["lo", "mgmt", "rail0"]
        if "USE_MPI=1" in mode:
            assert all(d["sum"] == 6 for _, d in got.values())  # MPI works between the 4 ranks
        else:
            assert all(d["WORLD_SIZE"] == "4" for _, d in got.values())
    # Fewer ranks: block placement leaves host 1 with one rank.
    res = lab.run(script, np=3, env_rendezvous=True, capture=True, timeout=60, master_port=29558)
    assert res.returncode == 0, res.stderr
    got = infos(res.stdout)
    assert [(d["netns"], d["LOCAL_RANK"], d["LOCAL_WORLD_SIZE"]) for _, (_, d) in sorted(got.items())] == [
        (ns[0], "0", "2"), (ns[0], "1", "2"), (ns[1], "0", "1")]
    # More ranks than the lab has places for: one clear error, nothing started.
    assert cli.main(["run", "--name", lab.name, "--np", "5", "--", "true"]) == 1
    assert "4 ranks at most" in capfd.readouterr().err
