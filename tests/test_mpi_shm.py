"""A test session leaves no Open MPI shared-memory segment behind (tests/mpi_shm.py).

A process that initialises MPI without a launcher (a singleton; nezha bootstraps through it
when the process imported mpi4py itself) gets a 16 MiB /dev/shm/sm_segment.* file that Open
MPI 5.0.x leaves behind after MPI_Finalize (docs/results/session31/shm-leak). Without a
launcher and without MPI, nezha itself does not call MPI_Init (test below). The plugin tests
run a small pytest session in a subprocess whose one test builds a singleton Communicator
and reports the segment files its process maps (/proc/self/maps: this
process's own files, whatever other Open MPI jobs on the machine do), then looks for them
after the session has exited.
"""
import json
import os
import subprocess
import sys

import pytest

from tests import mpi_shm

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH_ENV = ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK",
              "PMIX_RANK", "MPI_LOCALNRANKS", "RANK", "WORLD_SIZE", "MASTER_ADDR",
              "MASTER_PORT", "LOCAL_RANK", mpi_shm.VAR)

INNER = '''
import json, os
import nezha

def test_singleton_communicator():
    from mpi4py import MPI  # the user's own singleton MPI: nezha bootstraps through it
    c = nezha.Communicator()
    try:
        assert c.size == 1 and c._boot.kind == "mpi"
        maps = [line.split()[-1] for line in open("/proc/self/maps") if "sm_segment" in line]
        with open(os.environ["MPI_SHM_REPORT"], "w") as f:
            json.dump({"pid": os.getpid(), "segments": sorted(set(maps)),
                       "var": os.environ.get("OMPI_MCA_btl_sm_backing_directory")}, f)
    finally:
        c.close()
'''


def _inner_session(tmp_path, plugin):
    """Run INNER in its own pytest (with or without tests.mpi_shm); its report."""
    pytest.importorskip("mpi4py")
    test = tmp_path / "test_inner_singleton.py"
    test.write_text(INNER)
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_ENV}
    env["MPI_SHM_REPORT"] = str(report)
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in [env.get("PYTHONPATH")] if p])
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)]
    if plugin:
        argv[3:3] = ["-p", "tests.mpi_shm"]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(report.read_text())
    if not got["segments"]:
        pytest.skip("this Open MPI maps no sm_segment file in a singleton (btl sm not used)")
    return got


def test_the_plugin_points_this_session_at_its_own_directory():
    """conftest loads tests.mpi_shm: unless the caller set the variable, it names this
    session's directory, which exists while the session runs."""
    with open(os.path.join(REPO, "tests", "conftest.py")) as f:
        assert "tests.mpi_shm" in f.read()
    if mpi_shm.SESSION_DIR is None:
        pytest.skip(f"{mpi_shm.VAR} was set by the caller: kept as it is")
    assert os.environ[mpi_shm.VAR] == mpi_shm.SESSION_DIR == mpi_shm.session_dir()
    assert os.path.isdir(mpi_shm.SESSION_DIR)


def test_a_singleton_session_leaves_no_segment(tmp_path):
    """With the plugin the singleton's segment is in the session's directory, and the file and
    the directory are gone once the session has exited."""
    got = _inner_session(tmp_path, plugin=True)
    where = mpi_shm.session_dir(got["pid"])
    assert got["var"] == where
    assert all(os.path.dirname(s) == where for s in got["segments"]), got
    left = [s for s in got["segments"] if os.path.exists(s)]
    assert not left, f"the session left {left}"
    assert not os.path.exists(where)


def test_without_the_plugin_the_singleton_segment_stays(tmp_path):
    """The control: the same session without the plugin leaves its segment in /dev/shm
    (Open MPI 5.0.x, open-mpi/ompi#13261), so the test above can see a leak. Removes the
    file it found, that one file by name."""
    got = _inner_session(tmp_path, plugin=False)
    left = [s for s in got["segments"] if os.path.exists(s)]
    for s in left:
        assert os.path.basename(s).startswith("sm_segment.")
        os.unlink(s)
    if not left:
        pytest.skip("this Open MPI removes a singleton's segment itself: nothing to guard")
    assert all(os.path.dirname(s) == "/dev/shm" for s in left), left


def test_stale_directories_of_dead_sessions_are_swept(tmp_path, monkeypatch):
    """A session killed before its exit handlers leaves its directory; the next removes the
    directories whose pid is gone and keeps the live ones and everything else."""
    monkeypatch.setattr(mpi_shm, "BASE", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)
    for name in (f"nezha-pytest-{dead.pid}", f"nezha-pytest-{os.getpid()}", "nezha-pytest-x",
                 f"sm_segment.vm.0.{dead.pid:x}0000.0"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_text("")
    mpi_shm._sweep_stale()
    assert sorted(os.listdir(tmp_path)) == sorted(
        [f"nezha-pytest-{os.getpid()}", "nezha-pytest-x", f"sm_segment.vm.0.{dead.pid:x}0000.0"])


PLAIN = r"""
import json, sys
import numpy as np
import nezha
%s
c = nezha.Communicator()
try:
    x = np.arange(7, dtype=np.int64) - 3
    y = x.copy()
    c.allreduce(y)
    maps = [line.split()[-1] for line in open("/proc/self/maps") if "sm_segment" in line]
    print("OUT " + json.dumps({"kind": c._boot.kind, "size": c.size, "exact": bool((y == x).all()),
                               "mpi": "mpi4py.MPI" in sys.modules, "segments": maps}))
finally:
    c.close()
"""


@pytest.mark.parametrize("user_mpi", [False, True])
def test_a_plain_process_calls_no_mpi_init(user_mpi):
    """Without a launcher nezha is a world of one with no MPI_Init (so no segment to leak);
    a process that initialised MPI itself is bootstrapped through it, as before."""
    if user_mpi:
        pytest.importorskip("mpi4py")
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_ENV}
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in [env.get("PYTHONPATH")] if p])
    env[mpi_shm.VAR] = mpi_shm.SESSION_DIR or os.environ.get(mpi_shm.VAR, "/dev/shm")
    code = PLAIN % ("from mpi4py import MPI" if user_mpi else "")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(proc.stdout.split("OUT ", 1)[1].splitlines()[0])
    assert got["size"] == 1 and got["exact"]
    if user_mpi:
        assert got["kind"] == "mpi" and got["mpi"]
    else:
        assert got["kind"] == "single" and not got["mpi"] and not got["segments"], got
