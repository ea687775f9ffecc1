"""nezha sim: max-min solver, Ethereal's Theorem 1, fabrics' error paths, nezha's schedules."""
import math

import numpy as np
import pytest

from nezha.sim import fabric as F
from nezha.sim import nezha_sched as N
from nezha.sim import network as NW
from nezha.sim import textbook as TB
from nezha.sim.maxmin import maxmin
from nezha.sim.routing import Routing, ethereal_assign
from nezha.sim.workload import NET, Workload


def _mm(flows, cap, flow_cap=None):
    """maxmin over flows given as lists of links (weight 1)."""
    ef = np.repeat(np.arange(len(flows)), [len(f) for f in flows])
    el = np.concatenate([np.asarray(f) for f in flows])
    return maxmin(len(flows), ef, el, np.ones(len(el)), np.asarray(cap, float), flow_cap)


# ---- max-min against hand-computed cases -----------------------------------------------

def test_maxmin_one_link_shared_equally():
    assert np.allclose(_mm([[0], [0], [0]], [9.0]), [3, 3, 3])


def test_maxmin_classic_parking_lot():
    # links 0 and 1 of capacity 1; flow 0 crosses both, flows 1 and 2 one each:
    # every flow gets 1/2
    assert np.allclose(_mm([[0, 1], [0], [1]], [1.0, 1.0]), [0.5, 0.5, 0.5])


def test_maxmin_bottleneck_frees_capacity_elsewhere():
    # link 0 (cap 1) holds flows 0, 1; link 1 (cap 10) holds flows 1, 2:
    # flows 0, 1 get 1/2 at link 0, flow 2 takes the rest of link 1: 9.5
    assert np.allclose(_mm([[0], [0, 1], [1]], [1.0, 10.0]), [0.5, 0.5, 9.5])


def test_maxmin_flow_cap_and_failed_link():
    r = _mm([[0], [0], [1]], [4.0, 0.0], flow_cap=np.array([1.0, np.inf, np.inf]))
    assert np.allclose(r, [1.0, 3.0, 0.0])


def test_maxmin_weights_spray():
    # one flow sprayed half/half over links 0, 1 (cap 1 each) and one flow on link 0:
    # flow b gets x, flow a y: 0.5y + x <= 1, 0.5y <= 1; max-min gives x = y = 2/3
    ef, el, w = np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([0.5, 0.5, 1.0])
    assert np.allclose(maxmin(2, ef, el, w, np.array([1.0, 1.0])), [2 / 3, 2 / 3])


def test_maxmin_matches_progressive_filling_on_random_cases():
    rng = np.random.default_rng(7)
    for _ in range(100):
        nf, nl = int(rng.integers(1, 25)), int(rng.integers(1, 10))
        flows = [rng.choice(nl, int(rng.integers(1, min(nl, 3) + 1)), replace=False)
                 for _ in range(nf)]
        cap = rng.uniform(1, 10, nl)
        got = _mm(flows, cap)
        # textbook progressive filling, one level at a time
        x, frozen, rem = np.zeros(nf), np.zeros(nf, bool), cap.copy()
        while not frozen.all():
            load = np.zeros(nl)
            for f, ls in enumerate(flows):
                if not frozen[f]:
                    load[ls] += 1
            share = np.where(load > 0, rem / np.maximum(load, 1), np.inf)
            d = min(share[ls].min() for f, ls in enumerate(flows) if not frozen[f])
            x[~frozen] += d
            rem -= d * load
            for f, ls in enumerate(flows):
                if (rem[ls] <= 1e-9 * cap[ls]).any():
                    frozen[f] = True
        assert np.allclose(got, x, rtol=1e-9)
        # and it is feasible
        use = np.zeros(nl)
        for f, ls in enumerate(flows):
            use[ls] += got[f]
        assert (use <= cap * (1 + 1e-9)).all()


# ---- Theorem 1 -----------------------------------------------------------------------------

def _uplink_loads(fab, hs, hd, nbytes, scheme, seed=0):
    """Bytes on every leaf->spine uplink for transfers hs -> hd of the given sizes."""
    n = len(hs)
    if scheme == "ethereal":
        t, ch, share = ethereal_assign(fab, hs, hd, nbytes, np.zeros(n, np.int64), seed)
    elif scheme == "spray":
        npaths = fab.npaths(hs, hd)
        t = np.arange(n).repeat(npaths)
        ch = np.arange(len(t)) - np.repeat(np.cumsum(npaths) - npaths, npaths)
        share = 1.0 / npaths[t]
    else:
        wl = Workload(int(max(hs.max(), hd.max())) + 1, np.full(n, NET), nbytes, hs, hd,
                      np.zeros(n), np.zeros(n, bool), ([], [], []))
        rt = Routing(wl, fab, np.arange(fab.hosts), "ecmp", seed=seed,
                     flow_key=np.arange(n))
        t, ch, share = np.arange(n), rt.flow_choice[:n], np.ones(n)
    links = fab.links_of(hs[t], hd[t], 0, ch)
    load = np.zeros(fab.nlinks)
    for h in range(links.shape[1]):
        ok = links[:, h] >= 0
        np.add.at(load, links[ok, h], (nbytes[t] * share)[ok])
    return load[fab.lup.ravel()].reshape(fab.leaves, fab.spines), t, share


@pytest.mark.parametrize("seed", range(40))
def test_theorem1_ethereal_equals_spraying_and_ecmp_never_below(seed):
    rng = np.random.default_rng(seed)
    L, s, hpl = (int(rng.integers(2, 7)), int(rng.integers(1, 9)), int(rng.integers(1, 5)))
    fab = F.LeafSpine(L, s, hpl)
    H = fab.hosts
    # a demand set: per source host a random number of equal-size flows to random
    # destinations (sizes equal within a host's step, as Ethereal requires)
    nflows = int(rng.integers(1, 12 * H))
    hs = rng.integers(0, H, nflows)
    hd = rng.integers(0, H, nflows)
    f = rng.choice([1.0, 3.0, 1 << 20], H)[hs]
    eth, t, share = _uplink_loads(fab, hs, hd, f, "ethereal", seed)
    spr, _, _ = _uplink_loads(fab, hs, hd, f, "spray")
    ecmp, _, _ = _uplink_loads(fab, hs, hd, f, "ecmp", seed)
    # exactly n*f/s on every uplink, summed over each leaf's hosts and destinations
    assert np.allclose(eth, spr, rtol=1e-12, atol=1e-9)
    expect = np.zeros((L, s))
    far = fab.group_of(hs) != fab.group_of(hd)
    np.add.at(expect, fab.group_of(hs[far]), (f[far] / s)[:, None])
    assert np.allclose(eth, expect)
    # extra flows: r(s/g - 1) per (host, destination leaf)
    key = hs * L + fab.group_of(hd)
    extra = len(t) - nflows
    want = 0
    for k in np.unique(key[far]):
        n = int((key[far] == k).sum())
        r = n % s
        want += r * (s // math.gcd(r, s) - 1) if r else 0
    assert extra == want
    # ECMP's most loaded uplink is never below spraying's
    assert ecmp.max() >= spr.max() * (1 - 1e-12)


# ---- fabrics: bad input --------------------------------------------------------------------

@pytest.mark.parametrize("build,param", [
    (lambda: F.MultiRail(4, 0), "rails="),
    (lambda: F.MultiRail(0, 2), "hosts="),
    (lambda: F.LeafSpine(4, 0, 2), "spines="),
    (lambda: F.LeafSpine(0, 4, 2), "leaves="),
    (lambda: F.LeafSpine(2, 2, 2, rate_gbps=0), "rate_gbps="),
    (lambda: F.FatTree(5), "k="),
    (lambda: F.MultiRail(4, 2, rate_gbps=[1.0]), "rate_gbps="),
    (lambda: F.build("torus", hosts=4), "fabric="),
])
def test_impossible_fabric_names_the_parameter(build, param):
    with pytest.raises(F.FabricError, match=param):
        build()


def test_too_many_ranks_names_the_parameter():
    fab = F.LeafSpine(2, 2, 2)
    with pytest.raises(F.FabricError, match="ranks=5"):
        fab.place(5)
    assert list(fab.place(8, 2)) == [0, 0, 1, 1, 2, 2, 3, 3]
    with pytest.raises(F.FabricError, match="ranks=9"):
        fab.place(9, 2)


def test_plan_needs_more_rails_than_the_fabric_has():
    fab = F.LeafSpine(2, 2, 2)
    host_of = fab.place(4)
    pl = N.make_planner(4, host_of, 2, rail_rates=[1e9, 1e9])
    wl, _ = N.workload("allreduce", 16 << 20, pl)
    with pytest.raises(F.FabricError, match="rails=1"):
        NW.simulate(wl, fab, host_of, scheme="ecmp")


def test_failure_that_disconnects_names_the_link():
    fab = F.LeafSpine(2, 1, 1)
    wl = TB.ring(2, 1e6)
    link = fab.find_link("leaf0->spine0")
    with pytest.raises(F.FabricError, match="leaf0->spine0"):
        NW.simulate(wl, fab, fab.place(2), "ecmp", failures=[NW.Failure(1e-6, link, 1e-5)],
                    flow_key=np.arange(wl.ntasks))


# ---- paths ----------------------------------------------------------------------------------

@pytest.mark.parametrize("fab", [F.LeafSpine(3, 4, 2), F.FatTree(4), F.FatTree(4, 3)])
def test_every_path_is_a_chain_from_source_to_destination(fab):
    names = fab.link_names()
    H = fab.hosts
    a, b = np.meshgrid(np.arange(H), np.arange(H), indexing="ij")
    a, b = a.ravel(), b.ravel()
    npaths = fab.npaths(a, b)
    for src, dst, k in zip(a, b, npaths):
        seen = set()
        for c in range(k):
            lk = fab.links_of(src, dst, 0, c)
            hops = [names[x] for x in lk if x >= 0]
            if src == dst:
                assert hops == [f"host{src}:shm"]
                continue
            assert hops[0].startswith(f"host{src}->") and hops[-1].endswith(f"->host{dst}")
            for u, v in zip(hops, hops[1:]):
                assert u.split("->")[1] == v.split("->")[0], hops
            seen.add(tuple(hops))
        assert len(seen) == (k if src != dst else 0)


# ---- the simulator ------------------------------------------------------------------------

def test_ring_on_one_rail_matches_alpha_beta():
    fab = F.MultiRail(4, 1, rate_gbps=8.0, latency=0.0)
    host_of = fab.place(4)
    wl = TB.ring(4, 8e6)
    r = NW.simulate(wl, fab, host_of, "rail", alpha=1e-4, tol=1e-6)
    B = 8.0 * 1e9 / 8
    assert r.time == pytest.approx(6 * (1e-4 + 2e6 / B), rel=1e-6)


def test_nezha_ring_is_split_over_two_rails_by_rate():
    # 400 + 100: the planner's split follows the rates, both rails finish together
    fab = F.MultiRail(4, 2, rate_gbps=[0.4, 0.1], latency=0.0)
    host_of = fab.place(4)
    rates = [0.4e9 / 8, 0.1e9 / 8]
    pl = N.make_planner(4, host_of, 2, rail_rates=rates)
    wl, plan = N.workload("allreduce", 64 << 20, pl)
    assert sorted(c for c, _, _ in plan.slices) == [0, 1]
    r = NW.simulate(wl, fab, host_of, "rail", tol=1e-6)
    ideal = 2 * 3 / 4 * (64 << 20) / sum(rates)
    assert r.time == pytest.approx(ideal, rel=0.02)
    one = N.make_planner(4, host_of, 1)
    wl1, _ = N.workload("allreduce", 64 << 20, one)
    r1 = NW.simulate(wl1, F.MultiRail(4, 1, rate_gbps=0.4, latency=0.0), host_of, "rail",
                     tol=1e-6)
    assert r1.time / r.time == pytest.approx(1.25, rel=0.02)


def test_nezha_hierarchical_allreduce_runs_and_uses_shm():
    fab = F.MultiRail(2, 1, rate_gbps=1.0, latency=1e-5)
    host_of = fab.place(4, ranks_per_host=2)
    pl = N.make_planner(4, host_of, 1, overrides={"ALGO": "hier"})
    wl, plan = N.workload("allreduce", 4 << 20, pl)
    assert plan.algo == 6  # ALGO_HIER
    r = NW.simulate(wl, fab, host_of, "rail", tol=1e-6)
    assert r.link_bytes[fab.shm].sum() > 0
    # each host's NIC carries 2(H-1)/H of the payload once (H = 2): 4 MiB
    assert r.link_bytes[fab.up[0]].sum() == pytest.approx(2 * (4 << 20), rel=1e-6)


@pytest.mark.parametrize("coll", ["broadcast", "allgather", "reduce_scatter", "alltoall",
                                  "reduce"])
def test_nezha_collectives_simulate(coll):
    fab = F.MultiRail(5, 2, rate_gbps=1.0, latency=1e-5)
    host_of = fab.place(5)
    pl = N.make_planner(5, host_of, 2, rail_rates=[1.25e8, 1.25e8])
    for nb in (1 << 10, 1 << 22):
        wl, _ = N.workload(coll, nb, pl)
        r = NW.simulate(wl, fab, host_of, "rail")
        assert r.time > 0 and np.isfinite(r.t_end).all()


@pytest.mark.parametrize("coll", ["allgather", "reduce_scatter"])
def test_hier_rails_aligned_and_striped_simulate(coll, capsys):
    """`nezha sim run --hier-rails`: 2 hosts x 4 ranks on 2 rails, hierarchical; aligned
    builds a ring per block of another host within the host, so it posts more flows."""
    from nezha.sim import cli
    flows = {}
    for mode in ("aligned", "striped"):
        assert cli.main(["run", "--fabric", "multirail", "--hosts", "2", "--rails", "2",
                         "--rate", "0.4,0.4", "--ranks-per-host", "4", "--algo", "nezha",
                         "--coll", coll, "--nezha-algo", "hier", "--hier-rails", mode,
                         "--sizes", "1M"]) in (0, None)
        row = capsys.readouterr().out.strip().splitlines()[-1].split()
        assert row[0] == "nezha" and float(row[3]) > 0, row
        flows[mode] = int(row[5])
    assert flows["aligned"] > flows["striped"], flows


def test_ethereal_beats_ecmp_on_alltoall_and_failure_slows_down():
    fab = F.LeafSpine(4, 4, 4, rate_gbps=100, latency=0.5e-6)
    host_of = fab.place(16)
    wl = TB.build("alltoall", 16, 4e6)
    key = np.arange(wl.ntasks)
    t = {s: NW.simulate(wl, fab, host_of, s, flow_key=key).time
         for s in ("ecmp", "spray", "ethereal")}
    assert t["ethereal"] == pytest.approx(t["spray"], rel=0.02)
    assert t["ecmp"] > t["ethereal"]
    link = fab.find_link("leaf0->spine0")
    eth = NW.simulate(wl, fab, host_of, "ethereal", flow_key=key,
                      failures=[NW.Failure(1e-6, link, 100e-6)]).time
    # the hosts' NICs stay busy while the stalled pieces wait one RTO: no loss here
    assert eth >= t["ethereal"] * (1 - 1e-9)
    # ECMP's stalled flows wait for routing to converge (1 ms here)
    ecmp = NW.simulate(wl, fab, host_of, "ecmp", flow_key=key,
                       failures=[NW.Failure(1e-6, link, 1e-3)]).time
    assert ecmp > 1e-3
    assert not fab.failed  # the fabric is left as it was


@pytest.mark.parametrize("algo", TB.ALGOS)
def test_textbook_collectives_move_the_textbook_bytes(algo):
    n, S = 8, 8e6
    wl = TB.build(algo, n, S)
    per_rank = {"ring": 2 * (n - 1) / n * S, "halving_doubling": 2 * (n - 1) / n * S,
                "direct": 2 * (n - 1) / n * S, "alltoall": (n - 1) / n * S}
    if algo in per_rank:
        assert wl.total_bytes == pytest.approx(n * per_rank[algo])
    fab = F.LeafSpine(2, 2, 4)
    r = NW.simulate(wl, fab, fab.place(n), "ethereal", flow_key=np.arange(wl.ntasks))
    assert r.time > 0


# ---- failover: a rail cut, its detection and the re-run of unfinished slices ------------

def test_workload_knows_the_slice_of_every_task():
    pl = N.make_planner(4, np.arange(4), 2, [50e6, 50e6])
    pl.piece_bytes = 1 << 20
    wl, plan = N.workload("allreduce", 8 << 20, pl)
    assert len(plan.slices) == 8
    assert set(np.unique(wl.task_slice)) == set(range(8))
    # a slice's transfers all ride its channel
    net = wl.kind == NET
    chan_of = np.array([c for c, _, _ in plan.slices])
    assert (wl.chan[net] == chan_of[wl.task_slice[net]]).all()


def test_cut_without_reroute_stalls_or_returns_what_finished():
    fab = F.MultiRail(4, 1, 1.0, 0.0)
    wl = TB.ring(4, 1e6)
    cut = [NW.Failure(1e-4, fab.up[0, 1])]  # never rerouted
    with pytest.raises(RuntimeError):
        NW.simulate(wl, fab, np.arange(4), "rail", failures=cut)
    r = NW.simulate(wl, fab, np.arange(4), "rail", failures=cut, stall_ok=True)
    assert r.stalled and np.isnan(r.t_end).any() and (~np.isnan(r.t_end)).any()


def test_failover_extra_follows_detection_and_rerun():
    from nezha.sim import failover as FO
    kw = dict(timeout=0.06, vote=0.005, phase_silence=False, resend=False)
    # 1 MiB: one slice per rail; the cut rail's slice is re-run whole after the timeout
    r = FO.predict(4, [0.4, 0.4], 1 << 20, 1, 0, 0.0, **kw)
    assert r["slices"] == 2 and r["unfinished"] == 1
    assert math.isclose(r["detected_ms"], 60.0)
    assert math.isclose(r["took_ms"], 60.0 + 5.0 + r["rerun_ms"], rel_tol=1e-9)
    # silence as the engine sees it: after the spin, at the first heartbeat phase of the
    # cut host's ring neighbours and its own (3 phases: a quarter of a heartbeat on average)
    ph = FO.predict(4, [0.4, 0.4], 1 << 20, 1, 0, 0.0, **dict(kw, phase_silence=True))
    assert math.isclose(ph["detected_ms"], 60.0 + 0.2 + 10.0 / 4, rel_tol=1e-9)
    assert math.isclose(r["rerun_ms"], r["two_rail_ms"], rel_tol=1e-3)  # half on one rail
    # a later cut: detected later, the same re-run; a socket error: no timeout
    later = FO.predict(4, [0.4, 0.4], 1 << 20, 1, 0, 0.008, **kw)
    assert later["extra_ms"] > r["extra_ms"]
    err = FO.predict(4, [0.4, 0.4], 1 << 20, 1, 0, 0.0, detect="error", **kw)
    assert math.isclose(err["detected_ms"], err["live_done_ms"])
    # 64 MiB cut at the start: the surviving rail's own work hides the timeout, the cut
    # rail's 32 slices re-run: extra = the vote
    big = FO.predict(4, [0.4, 0.4], 64 << 20, 2, 1, 0.0, **kw)
    assert big["unfinished"] == 32 and math.isclose(big["extra_ms"], 5.0, abs_tol=0.5)
    # halfway: about half the slices are left, and the slice in flight is lost
    mid = FO.predict(4, [0.4, 0.4], 64 << 20, 2, 1, 0.55 * big["two_rail_ms"] / 1e3, **kw)
    assert 12 <= mid["unfinished"] <= 16 and mid["extra_ms"] > 5.0


def test_failover_reads_the_bench_cuts():
    import os
    from nezha.sim import failover as FO
    path = os.path.join(os.path.dirname(__file__), "..", "docs", "results",
                        "failover-1M-64M.json.gz")
    cuts = FO.bench_cuts(path)
    assert {(1 << 20, "down"), (64 << 20, "blackhole")} <= set(cuts)
    c = cuts[(1 << 20, "down")]
    assert len(c["cuts"]) == 10 and 0.010 < c["two_rail"] < 0.030
    at, host, rail, extra = c["cuts"][0]
    assert host in (1, 2, 3) and rail in (0, 1) and 0.02 < extra < 0.2


def test_failover_cut_stamps_old_and_new():
    from nezha.sim import failover as FO
    # old files: (stamp before lab.fail, heal); the cut is taken stamp_delay later
    old = {"raw": {"failures": [[10.0, 13.0], [20.0, 23.0]]}}
    assert FO.stamps(old) == [(10.0, 10.0), (20.0, 20.0)]
    assert FO.stamps(old, 0.004) == [(10.004, 10.0), (20.004, 20.0)]
    # new files: the pairs stay (cut, heal), the cut stamped after lab.fail; the call apart
    new = {"raw": {"failures": [[10.007, 13.0]], "fail_called": [10.0]}}
    assert FO.stamps(new, 0.004) == [(10.007, 10.0)]


def test_failover_stamp_delay_moves_the_bench_extra_by_itself(tmp_path):
    # a later cut leaves less work for the one-rail rate (twice as slow): the bench's
    # ideal drops by the delay, so its extra grows by it
    import gzip
    import json
    from nezha.sim import failover as FO
    rows = [[0.0, 1.0, 3]] * 3 + [[1.0, 3.0, 1]] * 3 + [[3.0, 4.6, 1]]   # 1 s two, 2 s one rail
    doc = [{"size": 64 << 20, "mode": "down", "raw": {"rows": rows, "failures": [[3.5, 9.0]]}}]
    path = tmp_path / "fo.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    (at, host, rail, ex), = FO.bench_cuts(path)[(64 << 20, "down")]["cuts"]
    (at2, _, _, ex2), = FO.bench_cuts(path, 0.01)[(64 << 20, "down")]["cuts"]
    assert (at, host, rail) == (0.5, 1, 0) and at2 == pytest.approx(0.51)
    assert ex == pytest.approx(1.6 - (0.5 + 0.5 * 2.0))
    assert ex2 - ex == pytest.approx(0.01)


def test_failover_errors_name_the_parameter():
    from nezha.sim import failover as FO
    with pytest.raises(F.FabricError, match="rails"):
        FO.predict(4, [0.4], 1 << 20, 1, 0, 0.0)
    with pytest.raises(F.FabricError, match="cut_rail"):
        FO.predict(4, [0.4, 0.4], 1 << 20, 1, 2, 0.0)


# ---- in-network aggregation -------------------------------------------------------------

def test_ina_is_one_pass_and_ring_pays_per_step():
    n, S, alpha = 16, 8e6, 5e-6
    fab = F.MultiRail(n, 1, 100.0, 1e-6, aggregator_gbps=float("inf"))
    host_of = np.r_[np.arange(n), fab.agg_host]
    B = 100e9 / 8
    ri = NW.simulate(TB.ina(n, S), fab, host_of, "rail", 1, alpha, tol=1e-4)
    assert math.isclose(ri.time, S / B + 2 * (0.5e-6 + alpha), rel_tol=1e-3)
    rr = NW.simulate(TB.ring(n, S), fab, host_of[:n], "rail", 1, alpha, tol=1e-4)
    assert math.isclose(rr.time, 2 * (n - 1) * (1e-6 + alpha) + 2 * (n - 1) / n * S / B,
                        rel_tol=2e-3)
    # every rank's link carries S each way, the aggregator n*S in
    assert math.isclose(ri.link_bytes[fab.up[0, 3]], S) and \
        math.isclose(ri.link_bytes[fab.agg[0]], n * S)
    # an aggregator slower than the ports bounds it: n*S over its rate
    slow = F.MultiRail(n, 1, 100.0, 1e-6, aggregator_gbps=400.0)
    rs = NW.simulate(TB.ina(n, S), slow, host_of, "rail", 1, alpha, tol=1e-4)
    assert rs.time >= n * S / (400e9 / 8)


def test_ina_and_failover_commands_run(capsys):
    from nezha.sim.cli import main
    assert main(["ina", "--nodes", "8,16", "--sizes", "64K"]) == 0
    assert "ring_over_ina" in capsys.readouterr().out
    assert main(["failover", "--sizes", "1M", "--at", "0,0.5"]) == 0
    assert "extra_ms" in capsys.readouterr().out


def test_ethereal_sweep_small():
    from nezha.sim import sweep
    _, rows = sweep.run(2, 2, 2, sizes=(1e6,), algos=("alltoall", "ring"), log=None)
    assert len(rows) == 2 * 2 * 3  # with and without the failure, two algos, three schemes
    piv = {(p["failed_link"], p["algo"]): p for p in sweep.pivot(rows)}
    assert math.isclose(piv["-", "alltoall"]["ethereal_us"], piv["-", "alltoall"]["spray_us"],
                        rel_tol=2e-2)
    # ECMP waits for routing convergence (100 ms) when its flows hit the failed link
    assert piv["leaf0->spine0", "alltoall"]["ecmp_us"] > 1e5


def test_ethereal_later_batches_split_over_the_good_paths():
    # halving-doubling on 4x4: every step's flow is cut into 4 pieces, one per spine.
    # After leaf0->spine0 fails, later steps go over the 3 others (each piece 1/3): no byte
    # crosses the dead link, no byte is lost, and Ethereal stays near ideal spraying
    fab = F.LeafSpine(4, 4, 4, 400.0, 0.5e-6)
    wl = TB.halving_doubling(16, 64e6)
    key = np.arange(wl.ntasks)
    dead = fab.find_link("leaf0->spine0")
    t = {}
    for scheme in ("spray", "ethereal"):
        r = NW.simulate(wl, fab, np.arange(16), scheme, 1, 0.0, [NW.Failure(0, dead, 1e-9)],
                        1e-3, 0, flow_key=key)
        assert r.link_bytes[dead] == 0
        assert math.isclose(r.link_bytes[fab.hup].sum(), wl.total_bytes, rel_tol=1e-9)
        t[scheme] = r.time
    assert t["ethereal"] <= 1.05 * t["spray"]
