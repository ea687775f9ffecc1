"""Zero-copy TCP sends (NEZHA_ZEROCOPY=on, include/nezha/nezha_tcp.h): every collective
stays exact at sizes around NEZHA_ZEROCOPY_MIN and above it, over tcp and the loop rails
(two TCP rails over loopback), for 2 to 4 ranks; buffers refilled right after a call never
leak into what the kernel still sends; no send is left in flight when a call returns; the
counters show the kernel took sends without a copy (on loopback it reports them copied
at delivery). Off by default: no counters at all (tests/workers/zerocopy_worker.py)."""
import os
import shutil
import subprocess

import pytest

from tests.spawn import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "workers", "zerocopy_worker.py")
TRANSPORTS = {"tcp": {"NEZHA_RAILS": "tcp"},
              "loop": {"NEZHA_RAILS": "loop", "NEZHA_LOOP_RAILS": "2", "NEZHA_RAIL_TIMEOUT": "5"}}
CASES = [(2, "tcp"), (3, "loop"), (4, "tcp"), (4, "loop")]


@pytest.mark.parametrize("n,transport", CASES, ids=[f"np{n}-{t}" for n, t in CASES])
def test_collectives_with_zero_copy_sends_are_exact(n, transport):
    env = dict(NEZHA_TIMEOUT="60", NEZHA_PROBE="off", OMP_NUM_THREADS="1",
               NEZHA_ZEROCOPY="on", NEZHA_ZEROCOPY_MIN="4100", **TRANSPORTS[transport])
    results = spawn(n, None, env=env, timeout=600, worker=WORKER)
    for code, res, out in results:
        assert code == 0 and res, out[-3000:]
        assert res["nfail"] == 0, res["failures"]
        z = res["zerocopy"]
        assert z is not None and z["in_flight"] == 0
        # sizes of 4 MiB go out in sends far above 4100 B: zero-copy engaged on every rank
        assert z["sends"] > 0 and z["bytes"] >= z["sends"] * 4100
        # every completion is counted once, copied or not
        assert 0 <= z["copied"] <= z["sends"]


def test_zero_copy_off_by_default_has_no_counters():
    env = dict(NEZHA_TIMEOUT="60", NEZHA_PROBE="off", NEZHA_RAILS="tcp")
    results = spawn(2, "off", env=env, timeout=120, worker=WORKER, unset=("NEZHA_ZEROCOPY",))
    for code, res, out in results:
        assert code == 0 and res, out[-3000:]
        assert res["nfail"] == 0 and res["zerocopy"] is None


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_tcp_transport_holds_unacknowledged_memory(tmp_path):
    """nezha_tcp.h alone over a loopback connection (tests/fixtures/zc_tcp_check.c): while
    the receiver reads nothing, tx_busy reports the memory of the unacknowledged zero-copy
    sends (and not memory never sent); once all is read, byte for byte as sent, every send
    completes; sends under the threshold and two-buffer sends copy."""
    exe = str(tmp_path / "zc")
    src = os.path.join(ROOT, "tests", "fixtures", "zc_tcp_check.c")
    cc = subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-I", os.path.join(ROOT, "include"),
                         "-o", exe, src], capture_output=True, text=True, timeout=120)
    assert cc.returncode == 0, cc.stderr[-3000:]
    p = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("OK sends="), p.stdout + p.stderr
