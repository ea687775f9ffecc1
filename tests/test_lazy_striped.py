"""Small striped collectives are lazy (failover.lazy_ok; session 20, issue 17): no closing
vote when they go well. A rank left behind in one re-runs, with the ranks ahead, only the
slices some rank could not finish, and finishes its other slices where they are: their
bytes are in the live channels' streams, ahead of the next collective's. Until session 20
only one-slice collectives were lazy; these tests fail on that code."""
import types

import numpy as np

from nezha import failover as fo
from nezha._core import engine as _eng
from nezha.planner import Plan


def _failover(alive=(True, True)):
    f = object.__new__(fo.Failover)
    f.c = types.SimpleNamespace(planner=types.SimpleNamespace(alive=list(alive)))
    return f


def _req(coll=_eng.COLL_ALLREDUCE, count=8192, retarget=True):
    return types.SimpleNamespace(retarget=(lambda: None) if retarget else None,
                                 spec=(coll, 0, 0, count) + (None,) * 6)


def test_lazy_ok_takes_a_small_striped_plan_and_refuses_large_or_a_dead_rail():
    two = Plan([(0, 0, 4096), (1, 4096, 4096)], 1, None, 4)
    small = np.zeros(8192, np.float32)  # 32 KiB
    assert _failover().lazy_ok(_req(), two, small)
    assert _failover().lazy_ok(_req(_eng.COLL_ALLGATHER), two, small)
    big = np.zeros((fo.LAZY_MAX_BYTES >> 2) + 1, np.float32)
    assert not _failover().lazy_ok(_req(count=big.size), two, big)
    assert not _failover((True, False)).lazy_ok(_req(), two, small)  # a rail down: vote
    assert not _failover().lazy_ok(_req(retarget=False), two, small)  # a chain broadcast


class _Sched:
    """A schedule whose slices (op ranges (i, i + 1)) are finished as listed."""

    def __init__(self, done):
        self.done = list(done)

    def ops_complete(self, a, b):
        return self.done[a]


def _behind(table, rc, done, resumed_done):
    """This rank (collective 5) behind the others (in 6) in a lazy 2-slice collective."""
    calls = []
    c = types.SimpleNamespace(
        rank=0, size=4, _events=[], config={"RAIL_TIMEOUT": 0.06},
        _st=types.SimpleNamespace(ncoll=5, base=0),
        planner=types.SimpleNamespace(alive=[True, True]))
    s = _Sched(done)
    c._engine = types.SimpleNamespace(
        failed_mask=lambda: 0b10 if rc == _eng.ERR_CHANFAIL else 0, failed_channels=lambda: [],
        finish=lambda s, keep=None: calls.append(("finish", keep)))
    f = object.__new__(fo.Failover)
    f.c, f.cut, f.readmit_s, f.generation = c, set(), 1.0, 0
    votes = list(table)
    f._vote = lambda req, me, mask, flags: (calls.append(("vote", mask, flags)) or
                                            (votes.pop(0), 0))
    f._cut_channels = lambda chans, req: calls.append(("cut", chans))

    def resume(req, s_, plan, lazy):
        calls.append(("resume",))
        s.done = list(resumed_done)
        return _eng.ERR_CHANFAIL  # the cut slice's channel fails at once, the rest finished
    f._resume = resume
    f._repair = lambda req, plan, mask, build, src, during=None, cut=True: calls.append(
        ("repair", mask))
    req = types.SimpleNamespace(name="allreduce", seq=40, spec=(0,) * 6 + (None,) * 4)
    plan = Plan([(0, 0, 7), (1, 7, 7)], 1, None, 4)
    f.agree(req, s, plan, [(0, 1), (1, 2)], None, rc, True)
    return calls


def test_a_rank_behind_finishes_its_moving_slice_before_the_rerun():
    """Another rank behind could not finish slice 1 (its vote: 0b10); this rank's vote was
    called while its slice 0 still moved on a live channel. It cuts slice 1's channel,
    resumes slice 0 to its end, re-runs slice 1 with every rank, applies slice 0's AVG
    only, and votes no more. (Before: slice 1 re-run, slice 0 left unfinished, its bytes
    left in the live stream for the next collective to trip on.)"""
    table = [[(5, 0, _eng.VOTE_RUNNING), (6, 0, 0), (5, 0b10, 0), (6, 0, 0)]]
    calls = _behind(table, _eng.ERR_VOTE, [False, False], [True, False])
    assert calls == [("vote", 0, _eng.VOTE_RUNNING), ("cut", [1]), ("resume",),
                     ("repair", 0b10), ("finish", [True, False])], calls


def test_a_rank_behind_that_finished_the_rest_reruns_only_the_failed_slice():
    """Slice 1's channel failed here (CHANFAIL), slice 0 finished: slice 1 is re-run with
    the ranks ahead, slice 0's AVG applied (in either order), one vote in all."""
    table = [[(5, 0b10, 0), (6, 0, 0), (6, 0, 0), (6, 0, 0)]]
    calls = _behind(table, _eng.ERR_CHANFAIL, [True, False], [True, False])
    assert calls[0] == ("vote", 0b10, 0), calls
    assert sorted(calls[1:]) == [("finish", [True, False]), ("repair", 0b10)], calls
