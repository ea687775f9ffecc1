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


def test_mutated_streams_end_cleanly_and_clean_ones_exactly():
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.update(asan_env())
    # by path, not -m: the current directory would come before the ASan build's package
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "enginefuzz.py"),
                        "--cases", str(CASES), "--seed", str(SEED)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    assert lines, (p.returncode, p.stdout[-2000:], p.stderr[-4000:])
    doc = json.loads(lines[-1])
    print("ENGINEFUZZ " + json.dumps(doc))
    assert p.returncode == 0 and doc["failed"] == 0, doc["failures"]
    assert doc["cases"] == CASES
    if os.environ.get("TEST_FUZZ_ASAN"):
        assert doc["engine"].startswith(asan_env()["TEST_FUZZ_ASAN_BUILD"]), doc["engine"]
    assert set(doc["outcomes"]) == set(MUTATIONS)  # every kind of mutation ran
    assert set(doc["outcomes"]["none"]) == {"ERR_OK"}
    # the header is checked: some header mutations were refused as a mismatch
    assert doc["outcomes"]["flip-hdr"].get("ERR_MISMATCH", 0) > 0
    assert doc["outcomes"]["stall"].get("ERR_TIMEOUT", 0) > 0
    assert doc["outcomes"]["cut"].get("ERR_CLOSED", 0) > 0


def test_the_guard_check_catches_a_write_past_the_result():
    """The harness can fail: a schedule that writes 4 elements past rank 0's result (both
    ranks built for count + 4) is reported as 'guard' whenever its stream gets through."""
    from nezha._core import engine as _eng
    from tests import enginefuzz
    over = (("overflow", _eng.COLL_ALLREDUCE,
             lambda s, o, a, n, r: _eng.rd_allreduce(s, 0, o, a, n + 4)),)
    counts, failures, n = enginefuzz.run(40, SEED, colls=over)
    assert counts["none"] == {"guard": counts["none"].get("guard", 0)} and counts["none"]["guard"]
    assert all(outcome == "guard" for _, _, outcome in failures)
