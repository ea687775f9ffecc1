"""Sends a full qdisc dropped before they left (include/nezha/nezha_tcp.h tx_kick, the
engine's nz_kick_stuck): a socket whose bytes wait unsent is retried by the kernel only
when an acknowledgement comes or a timer fires (with nothing in flight its probe timer,
200 ms or more), and nezha, which hands a whole message to the kernel at once, had no
later send to retry it. In the lab
(2 hosts x 4 ranks, 2 rails of 400 Mbit/s) that stall came with most striped hierarchical
allgathers and reduce_scatters: 4 ranks per host start a large cross-host send on every
rail at the same instant, the host's shaper queue (5 ms) overflows, and a socket whose
first segment was dropped waited ~200 ms (225 ms against 45 ms at 1 MiB per rank).

tests/fixtures/tx_kick_check.c runs in a network namespace of its own (`unshare -n`: no
name to clean up) with a 1-byte bfifo on lo that drops everything, then none."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None
                    or shutil.which("tc") is None,
                    reason="needs root, unshare and tc (a network namespace with a qdisc)")
def test_kick_sends_what_a_dropping_qdisc_left_unsent(tmp_path):
    exe = str(tmp_path / "txk")
    src = os.path.join(ROOT, "tests", "fixtures", "tx_kick_check.c")
    cc = subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-I", os.path.join(ROOT, "include"),
                         "-o", exe, src], capture_output=True, text=True, timeout=120)
    assert cc.returncode == 0, cc.stderr[-3000:]
    p = subprocess.run(["unshare", "-n", exe], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("OK queued="), p.stdout + p.stderr
