"""Planner.split's rounding (session 29, docs/results/session29/allgather-small): a split's
pieces are whole multiples of a unit small enough for the shares (planner.split_unit) and
each unit left over goes where the split finishes first (planner.split_counts). On 400 +
100 the old rule (256-element units, every unit left over to the last rail) gave the 100
a quarter of an 8 or 16 KiB-a-rank allgather instead of a fifth: its piece took as long as
the whole payload on the 400 (cycle 516 us against 407 with a fifth, in the lab)."""
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nezha.config import Config
from nezha.planner import PIECE_UNITS, ROUND, Planner, split_counts, split_unit
from tests.spawn import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "workers", "rounding_worker.py")


def _makespan(counts, shares):
    return max(c / s for c, s in zip(counts, shares) if c) if any(counts) else 0.0


@settings(max_examples=400, deadline=None)
@given(count=st.integers(0, 1 << 22),
       shares=st.lists(st.floats(0.01, 1.0), min_size=1, max_size=4))
def test_split_counts_cover_the_payload_in_whole_units(count, shares):
    got = split_counts(count, shares)
    assert len(got) == len(shares) and sum(got) == count and min(got) >= 0
    unit = split_unit(count, len(shares))
    assert sum(1 for c in got if c % unit) <= 1  # the tail under one unit, on one rail
    # no rail more than a unit per rail (plus the tail) over its ideal count
    total = sum(shares)
    for c, s in zip(got, shares):
        assert c <= count * s / total + len(shares) * unit + count % unit


@settings(max_examples=300, deadline=None)
@given(count=st.integers(1, 1 << 20), a=st.floats(0.05, 1.0), b=st.floats(0.05, 1.0))
def test_two_rails_get_the_least_makespan_of_any_whole_unit_split(count, a, b):
    """Brute force over every split in whole units (the tail under a unit on either rail):
    split_counts' makespan is the least."""
    unit = split_unit(count, 2)
    units, rest = divmod(count, unit)
    best = min(_makespan((k * unit + t0, count - k * unit - t0), (a, b))
               for k in range(units + 1) for t0 in ((0, rest) if rest else (0,))
               if count - k * unit - t0 >= 0)
    assert _makespan(split_counts(count, [a, b]), (a, b)) == pytest.approx(best)


def test_the_unit_is_round_where_the_payload_is_large():
    assert split_unit(ROUND * PIECE_UNITS * 2, 2) == ROUND
    assert split_unit(ROUND * PIECE_UNITS * 2 - 1, 2) == ROUND // 2
    assert split_unit(100, 2) == 1
    assert split_counts(1 << 20, [0.5, 0.5]) == [1 << 19, 1 << 19]


@pytest.mark.parametrize("kb", [2, 4, 8, 16, 32])
def test_400_plus_100_gives_the_slow_rail_its_fifth(kb):
    """4 ranks, 400 + 100 (prior 4:1), allgather of kb KiB a rank over both rails: the
    100's piece within 1/PIECE_UNITS of a fifth, never more than a fifth plus one unit.
    Old code at 8 and 16 KiB: a quarter (512 of 2048, 1024 of 4096 elements)."""
    p = Planner(2, Config.load({"MIN_RAIL_PIECE": "1k"}, environ={}), ["rail0", "rail1"],
                ranks=4, nominal=[400.0, 100.0])
    count = (kb << 10) // 4
    slices, _ = p.split("allgather", count, 4, 4)
    per = {c: n for c, _, n in slices}
    assert sorted(per) == [0, 1] and sum(per.values()) == count
    assert abs(per[1] / count - 0.2) <= 1 / PIECE_UNITS
    assert per[1] <= 0.2 * count + split_unit(count, 2)
    # every rank (the same agreed prior) cuts the same pieces
    q = Planner(2, Config.load({"MIN_RAIL_PIECE": "1k"}, environ={}), ["rail0", "rail1"],
                ranks=4, nominal=[400.0, 100.0])
    assert q.split("allgather", count, 4, 4)[0] == slices


def _boundary_counts():
    """Element counts a block around every unit change for two rails, and the lab's sizes."""
    out = set()
    for u in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        c = u * PIECE_UNITS * 2
        out |= {c - 1, c, c + 1}
    out |= {256, 512, 1024, 2048, 4096, 1000, 4099}
    return sorted(x for x in out if 0 < x <= 1 << 14)


@pytest.mark.parametrize("prior", [[4, 1], [1, 1]], ids=["400+100", "equal"])
def test_split_collectives_exact_at_the_unit_boundaries(prior):
    """4 ranks over tcp, two channels, every allgather / reduce_scatter / allreduce split
    over both (NEZHA_MIN_RAIL_PIECE=1k), rd, ring and (allgather) direct forced: exact against numpy at every count
    where the unit changes, and every rank cuts the same pieces."""
    counts = _boundary_counts()
    env = dict(NEZHA_TIMEOUT="60", NEZHA_PROBE="off", NEZHA_RAILS="tcp",
               NEZHA_SOCKET_NCONNS="2", NEZHA_MIN_RAIL_PIECE="1k",
               NEZHA_SMALL_MSG_THRESHOLD="1g",  # the fixed rule: rd unless ring is forced
               SPLIT_TEST_COUNTS=json.dumps(counts), SPLIT_TEST_PRIOR=json.dumps(prior))
    res = []
    for code, r, out in spawn(4, None, env=env, timeout=240, worker=WORKER,
                              unset=("NEZHA_ALGO",)):
        assert code == 0 and r, out[-3000:]
        res.append(r)
    for r in res:
        assert not r["failures"], r["failures"][:5]
        assert r["plans"] == res[0]["plans"]
    split = [p for p in res[0]["plans"] if len(p[3]) == 2]
    assert len(split) >= len(counts)  # both channels in most plans
    assert {p[2] for p in res[0]["plans"]} == {"rd", "ring", "direct"}
    for algo, count, ran, slices, shares in split:
        assert ran == algo
        # the pieces are split_counts' of the shares the model held for the call
        assert [s[2] for s in slices] == split_counts(count, shares)
        if prior == [4, 1]:
            assert shares[1] < shares[0]


# ---- the small broadcast's striped tree cuts as split does (session 30, issue 17) ----------

def _lab_tree_planner():
    """The 4 x 1 lab on 400 + 100 as session 29's job saw it (tests/test_planner.py
    _lab_400_100): the prior splits 80/20, a measured step, so the model stripes the tree."""
    from nezha.planner import layout_planner
    p = layout_planner(Config.load({}, environ={}), [0, 1, 2, 3], [259.0, 64.0], failover=True)
    p.set_rail_rates([259.0, 64.0], ring_payload=True)
    p.set_step_latency(23.7e-6, "test")
    return p


@pytest.mark.parametrize("count", [2, 3, 5, 7, 97, 1000, 1021, 1024, 2048, 4095, 4096, 4097,
                                   8191, 8192, 8209, 16383])
def test_a_striped_tree_is_cut_by_split_counts(count):
    """Planner._tree_slices over both rails: the pieces split_counts gives for the prior's
    shares (contiguous, covering the count, none empty), the same on every rank. The old
    int(count x share), the rest to the last rail, cut 4096 B as 3276/820 (the 100 over
    its fifth): this fails on it at every count here where the two differ."""
    ranks = [_lab_tree_planner() for _ in range(4)]
    got = [p._tree_slices(count, 2) for p in ranks]
    assert all(g == got[0] for g in got)
    p = ranks[0]
    shares = p.model.prior_shares([True, True])
    assert shares[0] == pytest.approx(0.8, abs=0.01)
    want = [c for c in split_counts(count, shares) if c]
    assert [n for _, _, n in got[0]] == want
    off = 0
    for c, o, n in got[0]:
        assert o == off and n > 0
        off += n
    assert off == count
    if len(got[0]) == 2:
        assert [c for c, _, _ in got[0]] == [0, 1]


def test_the_lab_4_kib_tree_gives_the_100_its_fifth():
    """The plan the lab runs at 4 KiB (both rails by the model): 3296/800 bytes, not the
    old 3276/820; 1024 float32 likewise in whole units."""
    p = _lab_tree_planner()
    assert p.broadcast(4096, 1).slices == [(0, 0, 3296), (1, 3296, 800)]
    assert p.broadcast(1024, 4).slices == [(0, 0, 824), (1, 824, 200)]
    assert p.broadcast(0, 1).slices[0][2] == 0 and p.broadcast(1, 1).slices[0][2] == 1
