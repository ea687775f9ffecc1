"""NEZHA_PROGRESS_SCHED (executor._progress_sched): fifo puts the progress thread, which runs
non-blocking collectives such as DDP's buckets, in SCHED_FIFO at priority 1 without spin
(issue 14: with 4 ranks on 2 cores an ordinary one waited for a core whenever data arrived
and the buckets posted during backward ran at half the rails' rate); refused (no
CAP_SYS_NICE, no RLIMIT_RTPRIO), a warning and the default policy. Sums exact either way.
Two loop rails (failover on, as in the lab), no root needed for "refused"."""
import os

import pytest

from tests.spawn import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "workers", "progress_sched_worker.py")
ENV = dict(NEZHA_RAILS="loop", NEZHA_LOOP_RAILS="2", NEZHA_RAIL_TIMEOUT="5",
           NEZHA_PROBE="off", NEZHA_TIMEOUT="60", OMP_NUM_THREADS="1",
           NEZHA_PROGRESS_SCHED="fifo")


def _run(scenario, sched="fifo"):
    env = dict(ENV, NEZHA_PROGRESS_SCHED=sched)
    if sched is None:
        del env["NEZHA_PROGRESS_SCHED"]
    results = spawn(2, scenario, env=env, timeout=120, worker=WORKER,
                    unset=("NEZHA_ALGO", "NEZHA_PROGRESS_SCHED") if sched is None
                    else ("NEZHA_ALGO",))
    for code, res, out in results:
        assert code == 0 and res is not None, out[-3000:]
        assert res["bad"] == [], (res, out[-3000:])
    return results


def _may_be_real_time():
    try:
        import resource
        if resource.getrlimit(resource.RLIMIT_RTPRIO)[0] >= 1:
            return True
    except (ImportError, ValueError, OSError):
        pass
    return os.geteuid() == 0


@pytest.mark.skipif(not _may_be_real_time(), reason="needs root, CAP_SYS_NICE or ulimit -r >= 1")
def test_fifo_makes_the_progress_thread_real_time():
    """The progress thread is SCHED_FIFO priority 1, the caller's thread untouched; three
    iallreduces through it and a blocking allreduce after them are exact."""
    _run("fifo")


def test_refused_warns_and_keeps_the_default_policy():
    """sched_setscheduler refused: each rank warns once, naming the variable and what it
    needs, and the collectives run exact on an ordinary progress thread."""
    for _, _, out in _run("refused"):
        assert out.count("NEZHA_PROGRESS_SCHED=fifo: not allowed") == 1, out[-3000:]


@pytest.mark.skipif(not _may_be_real_time(), reason="needs root, CAP_SYS_NICE or ulimit -r >= 1")
def test_auto_is_fifo_where_allowed():
    """auto: where the process may have SCHED_FIFO the progress thread gets it, as fifo."""
    _run("auto", sched="auto")


def test_auto_refused_is_silent_and_keeps_the_default_policy():
    """auto where SCHED_FIFO is refused: no warning (the user asked for nothing), the
    default policy, exact sums."""
    for _, _, out in _run("auto-refused", sched="auto"):
        assert "NEZHA_PROGRESS_SCHED" not in out, out[-3000:]


@pytest.mark.skipif(not _may_be_real_time(), reason="needs root, CAP_SYS_NICE or ulimit -r >= 1")
def test_auto_is_the_default():
    """No setting: auto (session 25's DDP rounds, docs/torch.md), so the progress thread is
    SCHED_FIFO 1 and the health thread 2 where the process may have it."""
    _run("auto", sched=None)


def test_other_keeps_the_default_policy():
    """other: the progress and health threads keep the system's default policy."""
    _run("other", sched="other")
