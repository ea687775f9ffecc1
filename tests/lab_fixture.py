"""pytest plugin: `lab` (one 4-host, 2-rail, 400mbit lab per session) and `lab_factory`.

Load it with `pytest_plugins = ["tests.lab_fixture"]` or `pytest -p tests.lab_fixture`.
Labs are torn down when the session ends, also after failures, Ctrl-C or SIGTERM; labs left
by a killed session (their owner pid is gone) are swept at the next session's start.
"""
import atexit
import itertools
import os
import signal

import pytest

from nezha.lab import Lab, LabSpec, available, lab_info, list_labs, teardown

_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"
OWNER = "pytest"  # tag in the state file: only labs with it are ever swept as stale
_made = []  # names of labs this process built, for the last-resort cleanup
_serial = itertools.count(10)  # suffix of lab_factory names ('a', 'b', ...)


def _b36(n):
    """n in base 36 (short, valid in lab names)."""
    s = ""
    while True:
        n, d = divmod(n, 36)
        s = _B36[d] + s
        if not n:
            return s


def session_lab_name():
    """This session's lab name: 't' + pid in base 36, fixed width so that no session's name is
    a prefix-extension of another's (lab_factory appends to it)."""
    return f"t{_b36(os.getpid()).rjust(5, '0')}"


def _cleanup_all():
    """Tear down every lab this process built (atexit / SIGTERM)."""
    while _made:
        name = _made.pop()
        try:
            teardown(name)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def _sigterm(signum, frame):
    """Turn SIGTERM into KeyboardInterrupt so pytest runs its teardowns."""
    raise KeyboardInterrupt(f"signal {signum}")


def _skip_reason():
    """Why labs cannot be built here, or None."""
    ok, why = available()
    return None if ok else why


def _sweep_stale():
    """Remove labs built by this fixture whose pytest process died without tearing them down."""
    for name in list_labs():
        info = lab_info(name)
        if info.get("owner") == OWNER and not os.path.exists(f"/proc/{info.get('pid')}"):
            try:
                teardown(name)
            except Exception:  # noqa: BLE001 - a stale lab must not block this session
                pass


@pytest.fixture(scope="session")
def _lab_env():
    """Checks once per session that labs can be built (else skips) and installs cleanup hooks."""
    why = _skip_reason()
    if why:
        pytest.skip(f"lab tests skipped: {why}")
    _sweep_stale()
    atexit.register(_cleanup_all)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _sigterm)
    yield session_lab_name()
    _cleanup_all()


@pytest.fixture(scope="session")
def lab(_lab_env):
    """A running 4-host, 2-rail, 400mbit lab shared by the session (tests that break it call
    lab.reset() in a finally)."""
    name = _lab_env
    _made.append(name)
    lab = Lab(LabSpec(hosts=4, rails=2, rates="400mbit", name=name))
    try:
        lab.up(replace=True, owner=OWNER)
        yield lab
    finally:
        teardown(name)  # also when up() failed half-way
        if name in _made:
            _made.remove(name)


@pytest.fixture
def lab_factory(_lab_env):
    """make(**LabSpec fields) -> a running Lab with a unique name, torn down after the test."""
    names = []

    def make(**kw):
        """Build and return one more lab."""
        name = kw.pop("name", None) or f"{_lab_env}{_b36(next(_serial))}"
        names.append(name)
        _made.append(name)
        return Lab(LabSpec(name=name, **kw)).up(replace=True, owner=OWNER)

    try:
        yield make
    finally:
        for name in names:
            teardown(name)
            if name in _made:
                _made.remove(name)
