"""A lazy collective (small, one channel, no closing vote when it goes well) that a failure
makes the ranks re-run must still apply its AVG division: Failover.agree ends such a run
itself when the re-run (or a resumed run) finishes, and nothing else does. Missing, the root
of a small AVG reduce got the sum (soak, 4 hosts x 2 ranks, a rail cut mid-reduce)."""
import types

from nezha import failover as fo
from nezha._core import engine as _eng
from nezha.planner import Plan


class _Sched:
    def __init__(self, name, done):
        self.name, self.done = name, done

    def ops_complete(self, a, b):
        return self.done


def _setup(votes, reruns):
    finished = []
    rerun_s = _Sched("rerun", True)
    c = types.SimpleNamespace(
        rank=0, size=4, _events=[], config={"RAIL_TIMEOUT": 0.06},
        _st=types.SimpleNamespace(ncoll=5, base=0),
        planner=types.SimpleNamespace(alive=[True, True],
                                      resplit=lambda slices, es: [(1, 0, 7)]))
    c._engine = types.SimpleNamespace(
        failed_mask=lambda: 0b1, failed_channels=lambda: [],
        finish=lambda s, done=None: finished.append((s.name, done)))
    c._schedule = lambda req, plan, src: (rerun_s, [(0, 1)])
    c._run = lambda req, s, failover, plan, lazy: reruns.append(s.name) or _eng.ERR_OK
    f = object.__new__(fo.Failover)
    f.c, f.cut, f.readmit_s, f.generation = c, set(), 1.0, 0
    f._vote = lambda req, me, mask, flags: (votes.pop(0), 0)
    f._mark_dead = lambda *a: None
    f._resume = lambda req, s, plan, lazy: _eng.ERR_OK
    return f, finished


def _req():
    return types.SimpleNamespace(name="reduce", seq=618, spec=(0,) * 10)


def test_a_lazy_collective_rerun_after_a_failure_applies_its_avg():
    """Every rank in collective 5 voted slice 0 unfinished: it is re-run on the live rail,
    and the re-run schedule's AVG is applied (the first schedule's finished slices: none)."""
    votes, reruns = [[(5, 1, 0)] * 4], []
    f, finished = _setup(votes, reruns)
    plan = Plan([(0, 0, 7)], 1, None, 4)
    f.agree(_req(), _Sched("first", False), plan, [(0, 1)], None, _eng.ERR_CHANFAIL, True)
    assert reruns == ["rerun"]
    assert ("rerun", None) in finished, finished  # the division of the re-run's result


def test_a_lazy_collective_resumed_after_a_vote_applies_its_avg():
    """A vote stopped the run with nothing failed anywhere and every rank still moving: the
    run resumes, finishes, and its AVG is applied."""
    votes, reruns = [[(5, 0, _eng.VOTE_RUNNING)] * 4], []
    f, finished = _setup(votes, reruns)
    f.c._engine.failed_mask = lambda: 0
    plan = Plan([(0, 0, 7)], 1, None, 4)
    f.agree(_req(), _Sched("first", False), plan, [(0, 1)], None, _eng.ERR_VOTE, True)
    assert finished and finished[-1] == ("first", None), finished
