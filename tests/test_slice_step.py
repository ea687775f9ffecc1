"""A second rail's slice priced by a start-up measure (nezha/topo/steplatency.py, Planner.
slice_step) instead of costmodel.SLICE_STEP: the measure agreed on every rank, every rank
the same plans, NEZHA_SLICE_STEP's model / number, and exact results around the switch
points it moves. No timings are asserted."""
import json
import os

import pytest

from nezha import costmodel
from nezha.config import Config
from nezha.planner import ALGO_NAMES, TREE_SLICE, layout_planner
from nezha.sim import benchloop as BL
from nezha.topo import steplatency
from tests import test_rate_probe as rp
from tests.spawn import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKER = rp.WORKER.replace(
    '"nominal": [v.hex() for v in c.planner.model.nominal]}',
    '"alpha": c.planner.layout.rail_alpha.hex(), "slice": c.planner.slice_step.hex(), '
    '"slice_why": c.planner.slice_why, "piece": c.planner.describe_piece(), '
    '"table": c.planner.switch_table()}')
assert WORKER != rp.WORKER

# the lab's 4 x 1 on 400 + 400 at session 31's start-up (docs/results/session31/slice-cost)
LAB_HOP = {"small_ns": 35728, "sizes": [4096, 16384, 65536], "ns": [165644, 622573, 2589854]}
LAB_ALPHA = 17.86e-6
LAB_SLICE = 0.148


def run_ranks(n, extra, rails="2"):
    return rp.run_ranks(n, dict({"NEZHA_LOOP_RAILS": rails, "NEZHA_PROBE": "auto"}, **extra),
                        WORKER)


def test_every_rank_agrees_on_the_measured_second_slice():
    """4 ranks on 4 hosts, two loop rails: the 8 B allreduce whole and split over both rails
    is timed on every rank, the slowest rank's medians agreed (int64 MAX), so every rank
    holds the same integers, the same float and the same switch points."""
    res = run_ranks(4, {})
    for r in res:
        st = r["probe"]["step"]
        assert st["measured"] and "slice" in st, st
        sl = st["slice"]
        assert sl["one_ns"] > 0 and sl["two_ns"] > 0
        assert sl["steps"] == steplatency.slice_steps(sl["one_ns"], sl["two_ns"])
        assert float.fromhex(r["slice"]) == sl["steps"]
        assert r["slice_why"] == "measured at start-up"
        assert f"a slice {sl['steps']:g} steps per step, measured at start-up" in r["piece"]
    for key in ("slice", "alpha", "table"):
        assert len({json.dumps(r[key]) for r in res}) == 1, [r[key] for r in res]
    assert len({json.dumps(r["probe"]["step"]) for r in res}) == 1


@pytest.mark.parametrize("setting, want, why", [("model", costmodel.SLICE_STEP, "constant"),
                                                ("0.3", 0.3, "NEZHA_SLICE_STEP")])
def test_slice_step_model_or_a_number_is_not_measured(setting, want, why):
    res = run_ranks(3, {"NEZHA_SLICE_STEP": setting})
    for r in res:
        st = r["probe"]["step"]
        assert st["measured"] and "slice" not in st, st
        assert float.fromhex(r["slice"]) == want and r["slice_why"] == why


def test_one_rail_measures_no_second_slice():
    res = run_ranks(3, {}, rails="1")
    for r in res:
        assert r["probe"]["step"]["measured"] and "slice" not in r["probe"]["step"]
        assert float.fromhex(r["slice"]) == costmodel.SLICE_STEP and r["slice_why"] == "constant"


def test_slice_steps_is_the_split_calls_excess_in_whole_calls():
    assert steplatency.slice_steps(43740, 50215) == 0.148
    assert steplatency.slice_steps(40000, 40000) == 0.0
    assert steplatency.slice_steps(40000, 36000) == 0.0  # never a free slice
    assert steplatency.slice_steps(0, 36000) == 0.0


def _lab(mbps, steps=None):
    p = layout_planner(Config.load({}, environ={}), [0, 1, 2, 3], mbps, failover=True)
    p.set_rail_rates(mbps, ring_payload=True)
    p.set_step_latency(LAB_ALPHA, "test")
    p.set_hop_samples(LAB_HOP)
    if steps is not None:
        p.set_slice_step(steps)
    return p


def test_the_measured_slice_prices_every_split_plan():
    """_slice_cost (hence flat_times and the rails) charges the measured steps per step, not
    SLICE_STEP; None puts the constant back. 400 + 400 at the lab's start-up: 2 KiB allreduce
    on rab over both rails measured (0.148), on one with the constant (0.75)."""
    const, meas = _lab([252.7, 252.7]), _lab([252.7, 252.7], LAB_SLICE)
    for p, s in ((const, costmodel.SLICE_STEP), (meas, LAB_SLICE)):
        assert p.piece_model
        assert p._slice_cost("allreduce", "rab") == pytest.approx(
            s * LAB_ALPHA * p.layout.steps("allreduce", "rab"))
        bare = p.layout.time("allreduce", "ring", 64 << 10, 2, rate=2 * p.rail_rates[0])
        assert p.flat_times("allreduce", 64 << 10)["ring"] == pytest.approx(
            bare + s * LAB_ALPHA * 6)
    # 3 KiB: rd whole with the constant, rab over both rails with the measure
    assert [(ALGO_NAMES[p.allreduce(768, 4).algo], len(p.allreduce(768, 4).chans))
            for p in (const, meas)] == [("rd", 1), ("rab", 2)]
    assert "a slice 0.148 steps per step, measured at start-up" in meas.describe_piece()
    meas.set_slice_step(None)
    assert meas.slice_step == costmodel.SLICE_STEP and meas.slice_why == "constant"
    assert ALGO_NAMES[meas.allreduce(768, 4).algo] == "rd"


def test_rab_keeps_one_rail_within_the_first_sample_where_the_slice_is_measured():
    """ONE_RAIL_IN_FIRST_STEP: rab's link bytes over the whole call (3/2 of the payload at 4 ranks)
    within the first measured sample (4 KiB) keep it on one rail: 2 KiB (3 KiB on the link)
    yes, 3 KiB (4.5) no; only where the slice is measured (the constant's choices stay)."""
    meas, const = _lab([252.7, 252.7], LAB_SLICE), _lab([252.7, 252.7])
    assert meas.layout.rab_link_bytes(2048) == 3072
    assert meas._one_rail_in_first_step("allreduce", "rab", 2048)
    assert meas._rails_used(2048, "allreduce", "rab") == 1
    assert not meas._one_rail_in_first_step("allreduce", "rab", 3072)
    assert meas._rails_used(3072, "allreduce", "rab") == 2
    assert not const._one_rail_in_first_step("allreduce", "rab", 2048)


def test_the_trees_slice_is_the_measure_per_round():
    """Measured, a tree's extra slice costs the measure per round of the tree (2 at 4 ranks);
    not measured, TREE_SLICE as before."""
    assert _lab([252.7, 63.0])._tree_slice() == TREE_SLICE
    p = _lab([252.7, 63.0], LAB_SLICE)
    assert p._tree_slice() == pytest.approx(2 * LAB_SLICE)
    assert "tree (0.296 a slice)" in p.describe_piece()


def test_the_sim_replays_the_measured_slice():
    from nezha.sim import nezha_sched as N
    pl = N.make_planner(4, [0, 1, 2, 3], 2, None, 1, {})
    step = {"measured": True, "small_us": 36.0, "alpha_us": 18.0, "hop": LAB_HOP,
            "slice": {"one_ns": 43740, "two_ns": 50215, "steps": 0.148}}
    BL.seed_step_latency(pl, {"stats": {"probe": {"step": step}}})
    assert pl.slice_step == 0.148
    pl2 = N.make_planner(4, [0, 1, 2, 3], 2, None, 1, {})
    BL.seed_step_latency(pl2, {"stats": {"probe": {"step": dict(step, slice=None)}}})
    assert pl2.slice_step == costmodel.SLICE_STEP  # runs before session 31: the constant


def test_info_shows_the_second_slice():
    from tests.test_info import run_info
    out = run_info().stdout
    assert "a second rail's slice: the constant here; in a job on two hosts or more with " \
           "two rails measured at start-up" in out
    assert "a second rail's slice: 0.4 steps per step (NEZHA_SLICE_STEP)" in \
        run_info(NEZHA_SLICE_STEP="0.4").stdout
    assert "INVALID: NEZHA_SLICE_STEP='cheap'" in run_info(NEZHA_SLICE_STEP="cheap").stdout


SLICE_WORKER = os.path.join(ROOT, "tests", "workers", "slice_worker.py")


@pytest.mark.parametrize("mbps", [[252.7, 252.7], [252.7, 63.0]])
def test_exact_around_the_switch_points_the_measured_slice_moves(mbps):
    """4 processes on loop rails, the planner as the lab's 4 x 1 at a measured slice of
    0.148 steps: where the allreduce's algorithm or rails change between 512 B and 16 KiB
    (bisected to the element) and one element either side, int32/float32/float64, and where
    the broadcast tree's rails change, every root: exact against numpy, every rank the same
    plans, the slices covering the payload once."""
    env = {"NEZHA_RAILS": "loop", "NEZHA_TIMEOUT": "60", "NEZHA_PROBE": "off",
           "TEST_SLICE_MBPS": json.dumps(mbps), "TEST_SLICE_ALPHA": repr(LAB_ALPHA),
           "TEST_SLICE_HOP": json.dumps(LAB_HOP), "TEST_SLICE_STEPS": repr(LAB_SLICE)}
    res = spawn(4, None, env=env, timeout=600, worker=SLICE_WORKER)
    for rc, r, out in res:
        assert rc == 0 and r is not None, out[-3000:]
        assert r["model"] and r["wrong"] == [], r["wrong"][:10]
    plans = [r["plans"] for _, r, _ in res]
    assert all(pl == plans[0] for pl in plans), "ranks planned differently"
    assert res[0][1]["points"]["allreduce"], "no switch point between 512 B and 16 KiB"
    rails = set()
    for coll, nbytes, _, algo, slices in plans[0]:
        assert [o for _, o, _ in slices] == [sum(c for _, _, c in slices[:i])
                                             for i in range(len(slices))]
        assert all(c > 0 for _, _, c in slices)
        rails.add((coll, algo, len({ch for ch, _, _ in slices})))
    assert ("allreduce", "rab", 2) in rails, rails  # the measured slice's split ran
