"""Start-up rate probe (nezha/topo/rateprobe.py): when it runs, and that every rank gets the
same seeds. No timings are asserted."""
import json
import os
import subprocess
import sys

import pytest

from nezha.topo import rails, rateprobe

from tests.spawn import ROOT, free_port

WORKER = """
import numpy as np, nezha
from tests._result import report
c = nezha.Communicator()
x = np.full(1 << 18, c.rank + 1, np.float32)
c.allreduce(x)
assert (x == sum(range(1, c.size + 1))).all()
report({"probe": c.stats()["probe"],
        "nominal": [v.hex() for v in c.planner.model.nominal]})
c.close()
"""


def run_ranks(n, env, worker=WORKER, host_of=None):
    """n ranks on loop rails, rank r on host host_of[r] (default: each on its own)."""
    port = free_port()
    procs = []
    for r in range(n):
        e = {k: v for k, v in os.environ.items() if not k.startswith("NEZHA_")}
        e.update(PYTHONPATH=ROOT, RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(port), NEZHA_RAILS="loop", NEZHA_JOB_SECRET="00" * 16,
                 NEZHA_HOST_ID=f"h{host_of[r] if host_of else r}", NEZHA_TIMEOUT="30", NEZHA_RAIL_TIMEOUT="2",
                 **env)  # RAIL_TIMEOUT: no rail declared failed on a busy CI machine
        for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"):
            e.pop(k, None)
        procs.append(subprocess.Popen([sys.executable, "-c", worker], env=e, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    out = []
    try:
        for p in procs:
            text, _ = p.communicate(timeout=60)
            assert p.returncode == 0, text[-3000:]
            out.append(next(json.loads(ln[7:]) for ln in text.splitlines()
                            if ln.startswith("RESULT ")))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def test_decide():
    virt = [("rail0", None, False), ("rail1", None, False)]
    known = [("eth0", 400, False), ("eth1", 100, False)]
    loop = [("loop0", None, True), ("loop1", None, True)]
    assert rateprobe.decide("auto", virt, 4) == (True, "no trusted nominal speed on rail0, rail1")
    assert rateprobe.decide("auto", [("eth0", 400, False), ("eth1", None, False)], 4)[0]
    go, why = rateprobe.decide("auto", known, 4)
    assert not go and "nominal speeds known" in why
    assert not rateprobe.decide("auto", loop, 4)[0]
    assert rateprobe.decide("on", loop, 4) == (True, "NEZHA_PROBE=on")
    assert rateprobe.decide("on", known, 4)[0]
    assert rateprobe.decide("off", virt, 4) == (False, "NEZHA_PROBE=off")
    assert not rateprobe.decide("auto", virt, 4, split="equal")[0]
    assert not rateprobe.decide("on", virt[:1], 4)[0]     # one rail: nothing to split
    assert not rateprobe.decide("on", virt, 1)[0]         # one rank: nothing to exchange


def test_virtual_nic_speed_is_not_trusted():
    # veth reports 10000 Mb/s whatever tbf shapes it to: the rail's speed is unknown, so
    # auto probes; a physical NIC's speed stays the rail's nominal speed (no probe).
    def host(i, kind, speed):
        return [{"name": f"rail{r}", "address": f"10.{10 + r}.0.{i + 1}", "prefixlen": 24,
                 "subnet": f"10.{10 + r}.0.0/24", "up": True, "speed_mbps": speed,
                 "kind": kind, "default_route": False, "control": []} for r in range(2)]
    f = rails.form([host(i, "virtual", 10000) for i in range(3)])
    assert [r.speed_mbps for r in f.rails] == [None, None]
    f = rails.form([host(i, "ethernet", 25000) for i in range(3)])
    assert [r.speed_mbps for r in f.rails] == [25000, 25000]


def test_agreement_and_rates():
    # the agreed vector is [max ns per channel] + [-min ns per channel]
    assert rateprobe.agreed_times([10, 40, -9, -38], 2) == [10, 40]
    assert rateprobe.agreed_times([10, 40, -9, 0], 2) is None   # a rank did not time rail 1
    # round 2: the slowest channel 2.5x round 1, the others in proportion (a multiple of n)
    t1 = [10_000_000, 40_000_000]
    cnt2 = rateprobe.round2_counts(t1, 1000, 4)
    assert cnt2 == [10000, 2500]
    assert rateprobe.round2_counts([1, 1000], 1000, 4) == [2500 * 8, 2500]   # capped
    # 9000 more elements of 4 B in 30 ms more: 9.6 Mbit/s; the fixed parts drop out
    mbps = rateprobe.rates_from_rounds(t1, [40_000_000, 70_000_000], 1000, cnt2, 4)
    assert mbps == pytest.approx([9000 * 4 * 8 / 30e-3 * 1e-6, 1500 * 4 * 8 / 30e-3 * 1e-6])
    assert rateprobe.rates_from_rounds(t1, [9_000_000, 70_000_000], 1000, cnt2, 4) is None


def test_probe_on_every_rank_gets_the_same_seeds():
    res = run_ranks(3, {"NEZHA_PROBE": "on", "NEZHA_LOOP_RAILS": "2"})
    for r in res:
        assert r["probe"]["probed"] and r["probe"]["why"] == "NEZHA_PROBE=on"
        assert set(r["probe"]["mbps"]) == {"loop0", "loop1"}
    # bit-identical seeds from the agreed (int64 MAX) times, whatever each rank timed
    assert len({tuple(r["nominal"]) for r in res}) == 1
    assert len({json.dumps(r["probe"]["agreed_ns"]) for r in res}) == 1
    assert float.fromhex(res[0]["nominal"][0]) > 0


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_no_probe(mode):
    # auto on loopback rails (one device) and off: no probe, the prior stays equal
    res = run_ranks(2, {"NEZHA_PROBE": mode})
    for r in res:
        assert not r["probe"]["probed"]
        assert ("loopback" if mode == "auto" else "NEZHA_PROBE=off") in r["probe"]["why"]
        assert [float.fromhex(v) for v in r["nominal"]] == [1.0, 1.0]


LAB_WORKER = WORKER.replace('"nominal": [v.hex() for v in c.planner.model.nominal]}',
                            '"nominal": [v.hex() for v in c.planner.model.nominal], '
                            '"rails": c.rails}')
assert LAB_WORKER != WORKER


@pytest.mark.lab
def test_lab_veth_rails_are_probed(lab_factory):
    # veth's nominal speed is not trusted: auto probes, and every rank seeds the same split
    lab2 = lab_factory(hosts=2, rails=2, rates="400mbit,100mbit")
    env = dict(PYTHONPATH=ROOT, NEZHA_TIMEOUT="60", NEZHA_RAIL_TIMEOUT="2",
               NEZHA_DEBUG="INFO", NEZHA_DEBUG_SUBSYS="TOPO")
    res = lab2.run([sys.executable, "-c", LAB_WORKER], np=2, env=env, timeout=300,
                   capture=True, env_rendezvous=True)
    out = (res.stdout or "") + (res.stderr or "")
    assert res.returncode == 0, out[-3000:]
    got = [json.loads(ln.split("RESULT ", 1)[1]) for ln in out.splitlines() if "RESULT " in ln]
    assert len(got) == 2, out[-3000:]
    for r in got:
        assert r["rails"] == ["rail0", "rail1"]
        assert r["probe"]["probed"], r["probe"]
        assert r["probe"]["why"] == "no trusted nominal speed on rail0, rail1"
    assert got[0]["nominal"] == got[1]["nominal"]
    assert "rate probe (" in out


def test_rates_within_the_probes_noise_count_as_equal():
    from nezha.topo.rateprobe import snap_equal
    assert snap_equal([400.0, 380.0]) == [390.0, 390.0]
    assert snap_equal([400.0, 100.0]) == [400.0, 100.0]
    assert snap_equal([400.0, 399.0, 300.0]) == [400.0, 399.0, 300.0]
    assert snap_equal([]) == []
