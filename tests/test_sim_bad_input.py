"""`nezha sim` refuses bad knobs with a message naming the parameter (issue 16: "Bad input ...
is a clear error naming the parameter"), never a traceback or a hang. Each case runs the CLI in
a subprocess with a timeout, since the old code looped forever on some of them."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = ["run", "--fabric", "multirail", "--hosts", "4", "--rails", "2", "--sizes", "1M"]


def _sim(args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "nezha", "sim", *args], capture_output=True,
                          text=True, env=env, timeout=60)


@pytest.mark.parametrize("args,param", [
    # looped forever: a negative software latency or tolerance puts events before now
    (RUN + ["--algo", "ring", "--alpha=-1e-6"], "alpha="),
    (RUN + ["--algo", "ring", "--tol=-1"], "tol="),
    # a traceback (RuntimeError "stalls at t=0s")
    (RUN + ["--algo", "ring", "--alpha", "nan"], "alpha="),
])
def test_bad_simulation_knobs_name_the_parameter(args, param):
    try:
        res = _sim(args)
    except subprocess.TimeoutExpired:
        pytest.fail(f"nezha sim {' '.join(args)} did not end within 60 s")
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.startswith("nezha sim: ") and param in res.stderr, res.stderr[-2000:]
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("nconns", ["0", "-1"])
def test_no_channel_per_rail_names_nconns(nconns):
    # was an IndexError traceback from the Planner
    res = _sim(RUN + ["--algo", "nezha", "--nconns", nconns])
    assert res.returncode == 2 and "nconns=" in res.stderr, res.stderr[-2000:]
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("args,param", [
    (RUN + ["--algo", "ring", "--ranks", "0"], "ranks=0"),       # ran every host instead
    (RUN + ["--algo", "ring", "--sizes", "0:1M"], "sizes="),    # doubled 0 forever
    (RUN + ["--algo", "ring", "--sizes", "-5"], "sizes="),      # printed a -5 B row
    (["ina", "--nodes", "1", "--sizes", "64K"], "nodes=1"),     # ZeroDivisionError
    # nezha's INA client refuses these datagrams and windows (session 26's INA model)
    (["ina", "--nodes", "8", "--sizes", "64K", "--chunk", "100"], "chunk_bytes=100"),
    (["ina", "--nodes", "8", "--sizes", "64K", "--window=-1"], "window=-1"),
    (["ina", "--nodes", "8", "--sizes", "64K", "--mtu", "60"], "mtu=60"),
])
def test_bad_counts_and_sizes_name_the_parameter(args, param):
    try:
        res = _sim(args)
    except subprocess.TimeoutExpired:
        pytest.fail(f"nezha sim {' '.join(args)} did not end within 60 s")
    assert res.returncode == 2 and param in res.stderr, (res.stdout + res.stderr)[-2000:]
    assert "Traceback" not in res.stderr
