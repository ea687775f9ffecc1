"""Rail-aligned hierarchical collectives (NEZHA_HIER_RAILS, nezha/topo/placement.py): who
drives which rail, the schedules' cross-host bytes per channel (allreduce, broadcast,
allgather, reduce_scatter), exact results over loop+shm (even and uneven host layouts), and a
rail lost mid-collective with alignment on."""
import os

import numpy as np
import pytest

from nezha._core import engine as _eng
from nezha.algorithms import slices
from nezha.config import Config
from nezha.planner import ALGO_HIER, Planner
from nezha.topo import placement
from nezha.transports import fault
from nezha.types import DType
from tests import test_loop_faults as lf
from tests.spawn import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "workers", "hier_rails_worker.py")
LAYOUTS = [(2, 2), (2, 3), (3, 2), (3, 3)]  # (ranks per host, rails)


# ---- who drives which rail ---------------------------------------------------------------

def test_modular_owners():
    """Local rank i drives rail i mod R; with more rails than ranks also i + L, i + 2L."""
    assert placement.modular(2, 2) == [[0], [1]]
    assert placement.modular(4, 2) == [[0, 2], [1, 3]]
    assert placement.modular(3, 2) == [[0, 2], [1]]
    assert placement.modular(2, 3) == [[0], [1], [0]]
    assert placement.modular(3, 7) == [[0], [1], [2], [0], [1], [2], [0]]
    assert placement.modular(5, 1) == [[0, 1, 2, 3, 4]]


def test_nearest_owners_and_their_fallback():
    assert placement.from_nearest([[1], [0]], 2, 2) == [[1], [0]]
    assert placement.from_nearest([[0, 1], [2]], 2, 3) == [[0], [0], [1]]
    assert placement.from_nearest([[0], [0]], 2, 2) is None    # rail 1 would idle
    assert placement.from_nearest([[0], []], 2, 2) is None     # local rank 1 near none
    assert placement.from_nearest(None, 2, 2) is None
    # agreed only when every host's rank at a position reports the same rails
    hosts = [[0, 1], [2, 3]]
    assert placement.agreed_near([[1], [0], [1], [0]], hosts, 2) == [[1], [0]]
    assert placement.agreed_near([[1], [0], [0], [0]], hosts, 2) is None
    assert placement.agreed_near([[1], [], [1], []], hosts, 2) is None
    assert placement.agreed_near([[5], [0], [5], [0]], hosts, 2) is None  # no such rail


def _planner(mode, H, L, R, alive=None, near=None):
    cfg = Config.load({"HIER_RAILS": mode, "ALGO": "hier", "SOCKET_NCONNS": "1"})
    p = Planner(R, cfg, ranks=H * L)
    p.set_hosts([r // L for r in range(H * L)])
    p.set_hier_rails(mode, near)
    if alive is not None:
        p.alive = list(alive)
    return p


@pytest.mark.parametrize("L,R,aligned", [(2, 2, True), (4, 2, True), (3, 3, True),
                                         (2, 4, True), (3, 2, False), (2, 3, False)])
def test_auto_aligns_only_balanced_layouts(L, R, aligned):
    # nearest NICs shaped like the modular rule: local rank i is near rail i mod L's rails
    near = [[k for k in range(R) if i in placement.modular(L, R)[k]] for i in range(L)]
    p = _planner("auto", 2, L, R, near=near)
    got = [p.rail_owners(c) for c in range(R)]
    assert (got != [None] * R) == aligned, got
    # no NIC nearer to one local rank than another: auto stripes allreduce and broadcast
    # (aligning buys nothing), aligns allgather and reduce_scatter where balanced (their
    # striped cross-host phase measured 4x slower)
    p = _planner("auto", 2, L, R)
    assert [p.rail_owners(c) for c in range(R)] == [None] * R
    assert "no local rank has nearer NICs" in p.describe_rails()
    for coll in ("allgather", "reduce_scatter"):
        got = [p.rail_owners(c, coll) for c in range(R)]
        assert (got != [None] * R) == aligned, (coll, got)
    a = p.blocks("allgather", 100_003, 8, ALGO_HIER)
    r = p.allreduce(100_003, 8)
    assert a.hash != _planner("striped", 2, L, R).blocks("allgather", 100_003, 8, ALGO_HIER).hash \
        or not aligned
    assert r.hash == _planner("striped", 2, L, R).allreduce(100_003, 8).hash
    assert all(o is None for o in (_planner("striped", 2, L, R).rail_owners(c)
                                   for c in range(R)))
    forced = [_planner("aligned", 2, L, R).rail_owners(c) for c in range(R)]
    assert forced == [[i % min(L, R) == c % min(L, R) for i in range(L)] for c in range(R)]


def test_owners_follow_the_live_rails():
    """A dead rail's ranks drive the survivors: with one rail left every position drives it."""
    assert _planner("aligned", 2, 2, 2, alive=[True, False]).rail_owners(0) is None
    p = _planner("aligned", 2, 3, 3, alive=[True, False, True])
    assert [p.rail_owners(c) for c in (0, 2)] == [[True, False, True], [False, True, False]]
    assert p.rail_owners(1) is None  # dead: never planned; a repair builds it striped
    # nearest NICs win over the modular rule
    p = _planner("aligned", 2, 2, 2, near=[[1], [0]])
    assert [p.rail_owners(c) for c in (0, 1)] == [[False, True], [True, False]]
    assert "local rank 0 -> rail1; local rank 1 -> rail0" in p.describe_rails()
    assert "nearest NICs" in p.describe_rails()


def _plan(p, coll, count, root=0):
    if coll == "allreduce":
        return p.allreduce(count, 8)
    if coll == "broadcast":
        return p.broadcast(count, 8, root=root)
    return p.blocks(coll, count, 8, p.algorithm(coll, count * 8 * p.ranks))


@pytest.mark.parametrize("coll", ["allreduce", "broadcast", "allgather", "reduce_scatter"])
def test_plan_hash_tells_aligned_from_striped(coll):
    """Ranks that disagree on the placement fail the plan-hash check instead of hanging."""
    a = _plan(_planner("aligned", 2, 2, 2), coll, 100_003)
    s = _plan(_planner("striped", 2, 2, 2), coll, 100_003)
    assert a.algo == s.algo == ALGO_HIER and a.slices == s.slices and a.hash != s.hash
    n = _plan(_planner("aligned", 2, 2, 2, near=[[1], [0]]), coll, 100_003)
    assert n.hash != a.hash


# ---- the schedules: cross-host payload bytes per channel ---------------------------------

COLL_IDS = {"allreduce": _eng.COLL_ALLREDUCE, "broadcast": _eng.COLL_BROADCAST,
            "allgather": _eng.COLL_ALLGATHER, "reduce_scatter": _eng.COLL_REDUCE_SCATTER}


def _cross_payload(mode, H, L, R, count, coll, root=0):
    """{rank: [payload bytes sent to other hosts on channel c]} of every rank's schedule
    for the plan the planner makes (headers, the first send on each endpoint, left out);
    count: elements of the buffer, or of every block (allgather, reduce_scatter)."""
    p = _planner(mode, H, L, R)
    n = H * L
    plan = _plan(p, coll, count, root)
    assert plan.algo == ALGO_HIER and len(plan.slices) == R, plan
    out = {}
    for r in range(n):
        s = _eng.Schedule(r, n, R, COLL_IDS[coll], 1, int(DType.INT64), 0, count, root,
                          plan.algo, plan.hash)
        a, o = np.zeros(n * count + 1, np.int64), np.zeros(n * count + 1, np.int64)
        for chan, off, cnt in plan.slices:
            own = p.rail_owners(chan)
            if coll == "allreduce":
                slices.allreduce(s, plan.algo, chan, o.ctypes.data + off * 8,
                                 a.ctypes.data + off * 8, cnt, 8, p.hier_groups(r), 1 << 16, own)
            elif coll == "broadcast":
                slices.broadcast(s, plan.algo, chan, root, o.ctypes.data + off * 8, 0, cnt,
                                 p.hier_hosts(), own)
            elif coll == "allgather":
                slices.allgather(s, plan.algo, chan, o.ctypes.data, a.ctypes.data, count, off,
                                 cnt, p.hier_hosts(), own)
            else:
                slices.reduce_scatter(s, plan.algo, chan, o.ctypes.data, a.ctypes.data, count,
                                      off, cnt, 8, n, p.hier_hosts(), own)
        per, seen = [0] * (R + 1), set()
        for kind, ep, nb, _, _, ch in s.ops_list():
            if kind == 0:
                if ep in seen:  # per[R]: within the host, every channel
                    per[ch if (ep % n) // L != r // L else R] += nb
                seen.add(ep)
        out[r] = per
        del a, o
    return out


@pytest.mark.parametrize("H", [2, 3])
@pytest.mark.parametrize("L,R", LAYOUTS)
@pytest.mark.parametrize("coll", ["allreduce", "broadcast", "allgather", "reduce_scatter"])
def test_schedule_puts_cross_host_bytes_on_the_owners_rails(coll, L, R, H):
    """Aligned: local rank i sends to other hosts only on the rails it owns (i mod R, ...),
    and on every one of them; each host's rails carry the bytes of the striped layout (the
    cross-host phase is the same size, only who sends it changes) up to rounding: blocks
    cut at other element boundaries leave a ring's own block a few elements larger or
    smaller (allreduce, broadcast; allgather and reduce_scatter carry every block's parts,
    exactly the striped bytes)."""
    count = 100_003
    root = L + 1 if coll == "broadcast" else 0  # host 1: its chain crosses to host 2 too
    al = _cross_payload("aligned", H, L, R, count, coll, root)
    st = _cross_payload("striped", H, L, R, count, coll, root)
    owners = placement.modular(L, R)
    sends = {h for h in range(H)} if coll != "broadcast" else {h for h in range(H)
                                                               if (h - 1) % H < H - 1}
    for r in range(H * L):
        i, h = r % L, r // L
        for c in range(R):
            if i not in owners[c] or h not in sends:
                assert al[r][c] == 0, (r, c, al[r])
            else:
                assert al[r][c] > 0, (r, c, al[r])
    for h in range(H):
        for c in range(R):
            a = sum(al[r][c] for r in range(h * L, h * L + L))
            b = sum(st[r][c] for r in range(h * L, h * L + L))
            assert abs(a - b) <= b // 1000, (h, c, a, b)
            if coll in ("allgather", "reduce_scatter"):
                assert a == b, (h, c, a, b)
    if coll in ("allgather", "reduce_scatter"):  # within the host: the striped bytes, summed
        for h in range(H):
            a = sum(al[r][R] for r in range(h * L, h * L + L))
            b = sum(st[r][R] for r in range(h * L, h * L + L))
            extra = (L - 1) * count * 8 if coll == "reduce_scatter" else 0
            assert b <= a <= b + extra, (h, a, b)
    # striped: every local rank of a sending host uses every rail
    assert all(st[r][c] > 0 for r in range(H * L) if r // L in sends for c in range(R))


# ---- exact results and bytes over loop + shm --------------------------------------------

def _run_job(L, R, mode, H=2, per_host=None):
    """per_host: ranks on each host (block placement), else H hosts of L each."""
    per_host = per_host or [L] * H
    host = [h for h, k in enumerate(per_host) for _ in range(k)]
    n = len(host)
    env = {"NEZHA_RAILS": "loop,shm", "NEZHA_LOOP_RAILS": str(R), "NEZHA_ALGO": "hier",
           "NEZHA_HIER_RAILS": mode, "NEZHA_TIMEOUT": "30", "NEZHA_SPLIT": "equal"}
    res = spawn(n, None, env, {r: {"NEZHA_HOST_ID": f"h{host[r]}",
                                   "LOCAL_RANK": str(r - host.index(host[r])),
                                   "LOCAL_WORLD_SIZE": str(per_host[host[r]])}
                               for r in range(n)}, timeout=180, worker=WORKER)
    for rc, doc, out in res:
        assert rc == 0 and doc is not None and doc["error"] is None, out[-3000:]
    return [doc for _, doc, _ in res]


def _assert_on_owners_rails(docs, L, R):
    """Each rank's bytes to other hosts go out on the rails it owns, over allreduce and
    broadcast (cross) and over allgather and reduce_scatter (cross_blocks). The few bytes
    allowed elsewhere: the cost model's sync, a flat 8-byte-per-value allreduce on the
    fastest channel (NEZHA_SPLIT=equal still syncs)."""
    owners = placement.modular(L, R)
    for d in docs:
        assert d["wrong"] == [] and all(d["hier"]), d
        i = d["local"]
        assert "aligned" in d["rails"], d["rails"]
        for key in ("cross", "cross_blocks"):
            for c in range(R):
                if i in owners[c]:
                    assert d[key][c] > 100_000, (key, d)
                else:
                    assert d[key][c] <= 64 * (d["syncs"] + 1), (key, d)


@pytest.mark.parametrize("L,R", LAYOUTS)
def test_aligned_collectives_exact_and_on_their_rails(L, R):
    """allreduce, broadcast (every root position), allgather, reduce_scatter on sizes 0, 1,
    2, 7, 1009, 100003 (int64 and float32; the last two int32 too), 2 hosts, against numpy;
    each rank's bytes to the other host go out on the rails it owns."""
    _assert_on_owners_rails(_run_job(L, R, "aligned"), L, R)


def test_aligned_three_hosts_odd_total():
    """3 hosts of 3 ranks (9) on 2 rails, aligned forced: local ranks 0 and 2 share rail 0
    (each block cut in two parts), 1 drives rail 1; every result exact, bytes on the
    owners' rails."""
    _assert_on_owners_rails(_run_job(3, 2, "aligned", H=3), 3, 2)


@pytest.mark.parametrize("per_host", [(1, 2, 3), (1, 2, 2)])
def test_uneven_hosts_stay_flat_and_exact(per_host):
    """Hosts holding different numbers of ranks (6 and 5 ranks, the odd total too): no
    hierarchical plan even with NEZHA_ALGO=hier and NEZHA_HIER_RAILS=aligned (the layout
    has no grid), every collective flat and exact."""
    docs = _run_job(0, 2, "aligned", per_host=list(per_host))
    for d in docs:
        assert d["wrong"] == [] and not any(d["hier"]), d
        assert "no hierarchical layout" in d["rails"], d["rails"]
        assert all(o is None for o in d["owners"]), d


def test_striped_drives_every_rail_from_every_rank():
    """The contrast: NEZHA_HIER_RAILS=striped, each local rank sends on every rail."""
    for d in _run_job(2, 3, "striped"):
        assert d["wrong"] == [] and "every local rank drives every rail" in d["rails"], d
        assert all(x > 100_000 for x in d["cross"] + d["cross_blocks"]), d


# ---- a rail lost mid-collective with alignment on ---------------------------------------

@pytest.mark.parametrize("rails,hosts,kind", [(2, "0,0,1,1", "allreduce"),
                                              (3, "0,0,0,1,1,1", "all")])
def test_aligned_rail_loss_reruns_exact(tmp_path, monkeypatch, rails, hosts, kind):
    """Rank 1 (local rank 1, owner of rail 1) loses rail 1 to every peer, then rank 2 loses
    rail 0, mid-collective: the unfinished slices re-run on the live rails (aligned over
    them), every result exact, the rails re-admitted. kind allreduce: every collective an
    aligned hierarchical allreduce of 300007 int64 (so the failures land in one); all:
    allreduce, broadcast, allgather, reduce_scatter in turn."""
    n = len(hosts.split(","))
    monkeypatch.setitem(lf.TRANSPORTS, f"hier-aligned-{n}",
                        {"NEZHA_RAILS": "loop,shm", "hosts": hosts})
    env = {"NEZHA_ALGO": "hier", "NEZHA_HIER_RAILS": "aligned", "NEZHA_LOOP_RAILS": str(rails)}
    table, stop, procs = lf._start(tmp_path, kind, f"hier-aligned-{n}", n=n, env_extra=env)
    try:
        lf._ready(tmp_path, procs)
        ranks = lf.Ranks(tmp_path, procs)
        for rail, rank in ((1, 1), (0, 2)):
            lf.fault_cycle(table, ranks, lambda: table.cut(
                rail, [rank], [p for p in range(n) if p != rank], fault.RESET))
    finally:
        table.heal()
        results, out = lf._finish(stop, procs)
    assert all(results), out
    for r in results:
        assert r["error"] is None and r["wrong"] == 0 and r["done"] > 8, (r, out)
    events = results[0]["events"]
    assert sum(e["event"] == "down" for e in events) >= 2, events
    if kind == "allreduce":  # re-ran inside an aligned allreduce (not only a model sync)
        assert any(e["event"] == "down" and e["collective"] == "allreduce"
                   and "rerun_done_s" in e for e in events), events
    assert sum(e["event"] == "up" for e in events) >= 2, events
    assert all(results[0]["alive"].values()), results[0]["alive"]


def test_nearest_rails_from_a_real_servers_topology():
    """coral-lassen (tests/fixtures/hwloc): GPUs 0, 1 sit by mlx5_0/1 (hsi0, hsi1) on NUMA
    node 0, GPUs 2, 3 by mlx5_2/3 (hsi2, hsi3) on node 8. With rails hsi0 and hsi2, local
    ranks 0, 1 own rail 0 and 2, 3 rail 1 (not the modular 0, 2 / 1, 3); a rank without a
    GPU goes by the NUMA nodes of its CPUs, and one free to run anywhere is near none."""
    from nezha.topo import bind, probe
    topo = probe.load(os.path.join(ROOT, "tests", "fixtures", "hwloc", "coral-lassen.xml"))
    rails = ["hsi0", "hsi2"]
    near = [bind.nearest_rails(topo, i, rails) for i in range(4)]
    assert near == [[0], [0], [1], [1]]
    node8 = next(n.cpus for n in topo.numa_nodes if n.index == 8)
    everywhere = [c for n in topo.numa_nodes for c in n.cpus]
    assert bind.nearest_rails(topo, 4, rails, node8) == [1]
    assert bind.nearest_rails(topo, 4, rails, everywhere) == []
    p = _planner("auto", 2, 4, 2, near=placement.agreed_near(near + near, [[0, 1, 2, 3],
                                                                          [4, 5, 6, 7]], 2))
    assert [p.rail_owners(c) for c in (0, 1)] == [[True, True, False, False],
                                                  [False, False, True, True]]
