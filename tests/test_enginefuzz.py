"""The engine-level fuzzer (tests/enginefuzz.py) in a process of its own: every mutated
stream ends in OK or an engine error within the deadline, the guards around rank 0's result
stay intact, and unmutated streams give the exact result. TEST_ENGINEFUZZ_CASES sets the
count (the long run: `python -m tests.enginefuzz --cases 100000`); TEST_FUZZ_ASAN=build/asan
(`make asan`) runs it on the sanitizer build."""
import json
import os
import subprocess
import sys

from tests.enginefuzz import MUTATIONS
from tests.test_fuzz import asan_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = int(os.environ.get("TEST_ENGINEFUZZ_CASES", "1000"))
SEED = int(os.environ.get("TEST_FUZZ_SEED", "18"))


def _harness(*args):
    """tests/enginefuzz.py in a process of its own (on the sanitizer build if asked for):
    (its exit code, its JSON summary). A crash there fails the test, not the whole run."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.update(asan_env())
    # by path, not -m: the current directory would come before the ASan build's package
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "enginefuzz.py"),
                        "--seed", str(SEED), *args], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    assert lines, (p.returncode, p.stdout[-2000:], p.stderr[-4000:])
    doc = json.loads(lines[-1])
    if os.environ.get("TEST_FUZZ_ASAN"):
        assert doc["engine"].startswith(asan_env()["TEST_FUZZ_ASAN_BUILD"]), doc["engine"]
    return p.returncode, doc


def test_mutated_streams_end_cleanly_and_clean_ones_exactly():
    rc, doc = _harness("--cases", str(CASES))
    print("ENGINEFUZZ " + json.dumps(doc))
    assert rc == 0 and doc["failed"] == 0, doc["failures"]
    assert doc["cases"] == CASES
    assert set(doc["outcomes"]) == set(MUTATIONS)  # every kind of mutation ran
    assert set(doc["outcomes"]["none"]) == {"ERR_OK"}
    # the header is checked: some header mutations were refused as a mismatch
    assert doc["outcomes"]["flip-hdr"].get("ERR_MISMATCH", 0) > 0
    assert doc["outcomes"]["stall"].get("ERR_TIMEOUT", 0) > 0
    assert doc["outcomes"]["cut"].get("ERR_CLOSED", 0) > 0


def test_the_guard_check_catches_a_write_past_the_result():
    """The harness can fail: a schedule that writes 4 elements past rank 0's result (both
    ranks built for count + 4, enginefuzz.OVERFLOW) is reported as 'guard' whenever its
    stream gets through. Its own process: it writes past buffers on purpose (into slack)."""
    rc, doc = _harness("--overflow", "--cases", "40")
    assert rc == 1, (rc, doc)  # failures found; a sanitizer report would exit 86 or 87
    none = doc["outcomes"].get("none", {})
    assert none == {"guard": none.get("guard", 0)} and none["guard"], doc["outcomes"]
    assert doc["failed"] and all(outcome == "guard" for _, _, outcome in doc["failures"])
