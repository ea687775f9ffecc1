"""A part of the fuzzing on the sanitizer build (issue 18): the engine and INA extensions
built with ASan + UBSan (`make asan-build`, into a directory of this test's own), then the
whole-rank fuzzer's tests (tests/test_fuzz.py: wire, votes and control frames, three ranks,
the INA service) and the engine-level fuzzer (tests/test_enginefuzz.py) run their real
ranks on it. Any sanitizer report ends that process with exit code 86 or 87, which those
tests count as an unclean case and fail on. The long runs are `make asan` and
`python tests/fuzzpeer.py --cases 100000 --asan build/asan` (docs/hardening.md)."""
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _have_sanitizers():
    if not shutil.which("gcc"):
        return False
    libs = [subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True,
                           text=True).stdout.strip() for lib in ("libasan.so", "libubsan.so")]
    return all(os.path.isabs(p) and os.path.exists(p) for p in libs)


@pytest.mark.skipif(not _have_sanitizers(), reason="gcc's libasan/libubsan not installed")
def test_fuzzing_on_the_sanitizer_build(tmp_path):
    d = str(tmp_path / "asan")
    b = subprocess.run(["make", "-s", "-C", ROOT, "asan-build", f"ASAN_DIR={d}",
                        f"PY={sys.executable}"], capture_output=True, text=True, timeout=900)
    assert b.returncode == 0, (b.stdout[-2000:], b.stderr[-4000:])
    env = dict(os.environ, TEST_FUZZ_ASAN=d, TEST_FUZZ_SECONDS="6",
               TEST_ENGINEFUZZ_CASES="300")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                        os.path.join(ROOT, "tests", "test_fuzz.py"),
                        os.path.join(ROOT, "tests", "test_enginefuzz.py")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-6000:]
    # the runs did use the sanitizer build (test_enginefuzz checks its engine's path) and
    # every fuzz test ran (the harness self-test too, in its own process on the sanitizer
    # build: its over-long writes land in slack): nothing skipped, nothing deselected
    assert '"asan": true' in out, out[-3000:]
    summary = [ln for ln in p.stdout.splitlines() if " in " in ln and "passed" in ln][-1:]
    assert summary and re.fullmatch(r"\d+ passed in [\d.]+s( \(.*\))?", summary[0]), out[-3000:]
