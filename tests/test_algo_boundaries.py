"""Each flat allreduce algorithm (rd, rab, ring) exact at its boundary sizes, for 1 to 8
ranks over shm and tcp, striped over several channels; and every rank picks the same
algorithm with NEZHA_ALGO=auto (tests/workers/algo_worker.py runs one rank)."""
import json
import os

import pytest

from nezha.config import Config
from nezha.costmodel import bucket_of
from nezha.planner import (ALGO_CHAIN, ALGO_HIER, ALGO_RAB, ALGO_RD, ALGO_RING, ALGO_TREE,
                           Planner, layout_planner)
from tests.spawn import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "workers", "algo_worker.py")

# ranks, environment: shm (one host), tcp only, several channels with small pieces (every
# medium allreduce striped: each slice runs the algorithm on its own), fake hosts
CONFIGS = [
    (1, {}),
    (2, {"NEZHA_RAILS": "tcp"}),
    (3, {"NEZHA_SOCKET_NCONNS": "2", "NEZHA_MIN_RAIL_PIECE": "1k"}),
    (4, {"NEZHA_RAILS": "tcp", "NEZHA_SOCKET_NCONNS": "2", "NEZHA_MIN_RAIL_PIECE": "1k"}),
    (5, {}),
    (6, {"NEZHA_TEST_HOSTS": "0,1,2,3,4,5", "NEZHA_SOCKET_NCONNS": "2",
         "NEZHA_MIN_RAIL_PIECE": "1k"}),
    (7, {"NEZHA_RAILS": "tcp"}),
    (8, {"NEZHA_SOCKET_NCONNS": "3", "NEZHA_MIN_RAIL_PIECE": "1k"}),
]


def _switch_counts(n, esize=4):
    """Element counts just below and above the allreduce switch points for n ranks."""
    cfg = Config.load({}, environ={})
    out = []
    # one rank per host and all on one host; nominal rails and 400 Mbit/s ones
    for hosts, nominal in ((list(range(n)), None), ([0] * n, None),
                           (list(range(n)), [400.0, 400.0])):
        p = Planner(2, cfg, ranks=n, nominal=nominal)
        p.set_hosts(hosts)
        for nbytes in p.switch_points("allreduce", hi=1 << 20).values():
            c = nbytes // esize
            out += [max(c - 1, 0), c, c + 1]
    return out


def _counts(n):
    base = [0, 1, 2, 3, 5, 7, 13, 31, n - 1, n, n + 1, 2 * n - 1, 4 * n + 3, 257, 1021, 4099]
    return sorted(set(c for c in base + _switch_counts(n) if 0 <= c <= 1 << 18))


def _run(n, extra, counts, picks, timeout=120):
    env = dict(NEZHA_TIMEOUT="60", NEZHA_PROBE="off", ALGO_TEST_COUNTS=json.dumps(counts),
               ALGO_TEST_PICK=json.dumps(picks), **extra)
    results = []
    for code, res, out in spawn(n, None, env=env, timeout=timeout, worker=WORKER,
                                unset=("NEZHA_ALGO",)):
        assert code == 0 and res, out[-3000:]
        results.append(res)
    return results


@pytest.mark.parametrize("n,extra", CONFIGS,
                         ids=[f"np{c[0]}" + "".join(f"-{k[6:].lower()}{v}" for k, v in c[1].items())
                              for c in CONFIGS])
def test_allreduce_algorithms_exact_at_boundaries(n, extra):
    picks = [0, 4, 1 << 10, 8 << 10, 64 << 10, 256 << 10, 1 << 20, 16 << 20]
    picks += [b + d for b in _switch_counts(n, 1) for d in (0,)]
    res = _run(n, extra, _counts(n), picks)
    for r in res:
        assert not r["failures"], r["failures"][:5]
        if "NEZHA_MIN_RAIL_PIECE" in extra:  # slices over channels, each run by rab alone
            assert "rab" in r["striped"] and "ring" in r["striped"], r["striped"]
    # every rank picks the same algorithm for every size and collective
    assert all(r["picks"] == res[0]["picks"] for r in res), [r["picks"] for r in res]


def test_rab_failover_reruns_exact(tmp_path):
    """NEZHA_ALGO=rab through rail faults (tests/test_loop_faults.py's worker and fault
    table): a failed slice is voted on and re-run, the results stay exact."""
    from nezha.transports import fault
    from tests.test_loop_faults import _run as run_faults, fault_cycle

    def inject(table, ranks):
        for k in range(2):
            rank = 1 + k
            fault_cycle(table, ranks, lambda: table.cut(
                k % 2, [rank], [p for p in range(4) if p != rank], fault.RESET))

    results, out = run_faults(tmp_path, "all", "loop", inject, env_extra={"NEZHA_ALGO": "rab"})
    assert all(results), out
    for r in results:
        assert r["error"] is None and r["wrong"] == 0 and r["done"] > 8, (r, out)
    assert sum(e["event"] == "down" for e in results[0]["events"]) >= 1, out


# ---- the choice itself, without a network ---------------------------------------------

SIZES = [0, 1, 4, 1000, 4096, 8 << 10, 9000, 10_000, 64 << 10, 100_000, 200_000, 500_000,
         (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 16 << 20, 64 << 20]


@pytest.mark.parametrize("mbps", [None, [400.0, 400.0], [400.0, 100.0]],
                         ids=["nominal", "400+400", "400+100"])
@pytest.mark.parametrize("failover", [False, True])
@pytest.mark.parametrize("nconns", [1, 2])
def test_lab_shape_large_allreduce_stays_ring(mbps, failover, nconns):
    """4 ranks, one per host, 2 rails: allreduces of 1 MiB and more are the ring (the
    throughput results depend on it); below, whatever the model says, rd first."""
    cfg = Config.load({"SOCKET_NCONNS": str(nconns)}, environ={})
    p = layout_planner(cfg, [0, 1, 2, 3], mbps, 2, nconns, failover)
    for size in (1 << 20, (1 << 20) + 1, 3 << 20, 16 << 20, 64 << 20, 1 << 30):
        assert p.algorithm("allreduce", size) == ALGO_RING, size
        assert p.algorithm("broadcast", size) == ALGO_CHAIN, size
        assert p.algorithm("allgather", size) == ALGO_RING, size
    assert p.algorithm("allreduce", 4) == ALGO_RD
    assert p.algorithm("broadcast", 4) == ALGO_TREE


def test_two_hosts_of_four_large_is_hier():
    cfg = Config.load({}, environ={})
    p = layout_planner(cfg, [0] * 4 + [1] * 4, None, 2, 1, True)
    for size in (1 << 20, 64 << 20):
        assert p.algorithm("allreduce", size) == ALGO_HIER


def test_choice_uses_only_what_every_rank_shares():
    """Two ranks whose learned rates and live rails differ pick the same algorithm at
    every size (the plan hash would catch it, as a mismatch error)."""
    cfg = Config.load({"SOCKET_NCONNS": "2"}, environ={})
    a = layout_planner(cfg, [0, 1, 2, 3, 4], [400.0, 100.0], 2, 2, True)
    b = layout_planner(cfg, [0, 1, 2, 3, 4], [400.0, 100.0], 2, 2, True)
    for size in SIZES:  # b has learned something a has not, and lost a rail
        key = bucket_of("allreduce", size)
        b.model.record(key, [size // 4] * 4, [1000, 5000, 2000, 9000])
        b.model.apply(b.model.sync_keys(), b.model.sync_vector(b.model.sync_keys()) * 5, 5)
    b.alive[0] = False
    for coll in ("allreduce", "broadcast", "allgather", "reduce_scatter", "reduce"):
        assert [a.algorithm(coll, s) for s in SIZES] == [b.algorithm(coll, s) for s in SIZES]
        assert a.switch_points(coll) == b.switch_points(coll)


def test_switch_points_bracket_the_choice():
    cfg = Config.load({}, environ={})
    p = layout_planner(cfg, [0, 1, 2, 3], [400.0, 400.0], 2, 1, True)
    pts = p.switch_points("allreduce")
    assert list(pts) == ["rd->rab", "rab->ring"], pts
    for name, at in pts.items():
        before, after = (Planner.IDS[x] for x in name.split("#")[0].split("->"))
        assert p.algorithm("allreduce", at - 1) == before
        assert p.algorithm("allreduce", at) == after
    times = p.flat_times("allreduce", pts["rd->rab"] + 100)
    assert min(times, key=times.get) == "rab", times


def test_fixed_threshold_and_forced_algorithms():
    """NEZHA_SMALL_MSG_THRESHOLD set: the old fixed rule (never rab); NEZHA_ALGO forces."""
    cfg = Config.load({"SMALL_MSG_THRESHOLD": "32k"}, environ={})
    p = layout_planner(cfg, [0, 1, 2, 3], None, 2)
    assert [p.algorithm("allreduce", s) for s in (4, (32 << 10) - 1, 32 << 10, 8 << 20)] == \
        [ALGO_RD, ALGO_RD, ALGO_RING, ALGO_RING]
    assert p.algorithm("broadcast", 1000) == ALGO_TREE
    assert p.algorithm("broadcast", 32 << 10) == ALGO_CHAIN
    for algo, want in (("rab", ALGO_RAB), ("rd", ALGO_RD), ("ring", ALGO_RING)):
        p = layout_planner(Config.load({"ALGO": algo}, environ={}), [0, 1, 2, 3], None, 2)
        assert {p.algorithm("allreduce", s) for s in SIZES} == {want}
        assert p.allreduce(1000, 4).algo == want
