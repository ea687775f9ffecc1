"""CPU accounting of the comparison suite (bench/_cpu.py, bench/compare.py): the CPU seconds
a rank used, and CPU seconds per GB moved in the summary and tables. Bounds, never timings."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
sys.path.insert(0, BENCH)

import _common  # noqa: E402  (bench/ is not a package)
import _cpu  # noqa: E402
import compare  # noqa: E402

BUSY = """
import threading, time
def spin(t):
    end = time.monotonic() + t
    while time.monotonic() < end:
        pass
ts = [threading.Thread(target=spin, args=(0.4,)) for _ in range(2)]
for t in ts: t.start()
for t in ts: t.join()
print("done", flush=True)
import sys; sys.stdin.readline()
"""


def test_cpu_of_a_busy_child_with_threads_is_counted_and_bounded():
    """A child that spins two threads and then waits: its /proc CPU time is > 0 and cannot
    exceed wall time x its threads (3: the main thread sleeps in readline)."""
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", BUSY], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "done"
        wall = time.monotonic() - t0
        user, system = _cpu.cpu_seconds(p.pid)
        assert user >= 0 and system >= 0
        assert user + system > 0
        tick = 1 / os.sysconf("SC_CLK_TCK")
        assert user + system <= wall * 3 + 2 * tick
    finally:
        p.stdin.close()
        p.wait(timeout=10)


def test_own_cpu_grows_with_work_and_stays_below_wall_times_threads():
    u0, s0 = _cpu.loop_cpu_seconds()
    t0 = time.monotonic()
    x = 0
    while time.monotonic() - t0 < 0.05:
        x += 1
    wall = time.monotonic() - t0
    u1, s1 = _cpu.loop_cpu_seconds()
    used = (u1 - u0) + (s1 - s0)
    assert 0 < used <= wall * os.cpu_count() + 0.01
    both = _cpu.cpu_seconds()
    assert both[0] >= u1 and both[1] >= s1  # children included, never less


def test_cpu_seconds_of_a_missing_process_raises():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait(timeout=10)
    with pytest.raises(OSError):
        _cpu.cpu_seconds(p.pid)


def test_cpu_per_gb_definition():
    # 4 ranks, 10 calls, 1.5e6 bus bytes per rank and call = 0.06 GB moved; 0.3 s -> 5 s/GB
    assert _cpu.cpu_s_per_gb(0.3, 4, 10, 1.5e6) == pytest.approx(5.0)
    assert _cpu.cpu_s_per_gb(0.3, 4, 0, 1.5e6) is None
    assert _cpu.cpu_s_per_gb(0.3, 4, 10, 0) is None


def test_time_loop_reports_cpu_of_the_timed_calls_only():
    """Warm-up calls and barriers burn CPU that must not be counted; the timed calls' does."""
    def burn(t):
        end = time.process_time() + t
        while time.process_time() < end:
            pass
    cpu = []
    samples = _common.time_loop(lambda: burn(0.01), lambda: burn(0.05), 3, 2, cpu=cpu)
    assert len(samples) == 3 and len(cpu) == 4
    # 3 timed calls of 10 ms CPU each; warm-up (2 x 10 ms) and barriers (6 x 50 ms) excluded
    assert 0.03 <= cpu[0] + cpu[1] < 0.03 + 0.05
    # the whole loop: the 3 calls and the 3 barriers after them (and the one before: warm-up)
    assert 0.03 + 3 * 0.05 <= cpu[2] + cpu[3] < 0.03 + 4 * 0.05 + 0.05


def _mpirun():
    here = os.path.join(os.path.dirname(sys.executable), "mpirun")
    return here if os.path.exists(here) else shutil.which("mpirun")


@pytest.mark.mpi
@pytest.mark.skipif(_mpirun() is None, reason="mpirun not found (Open MPI wheel not installed)")
@pytest.mark.parametrize("backend", ["mpi", "nezha"])
def test_osu_json_has_cpu_per_gb(tmp_path, backend):
    """Every rank's CPU over the timed calls reaches the JSON: positive, and at most 2 ranks x
    (their timed wall time + a scheduling margin) x the threads that can run (2 CPUs)."""
    pytest.importorskip("mpi4py")
    out = tmp_path / "r.json"
    cmd = [_mpirun(), "--allow-run-as-root", "--oversubscribe", "-np", "2",
           sys.executable, os.path.join(BENCH, "osu_allreduce.py"), "--backend", backend,
           "-m", "1M:1M", "-i", "5", "-x", "1", "--json", str(out)]
    env = dict(os.environ, PYTHONPATH=ROOT, NEZHA_SOCKET_IFNAME="lo")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(out.read_text())["results"][0]
    cpu = r["cpu_user_s"] + r["cpu_sys_s"]
    assert cpu > 0
    assert cpu <= 2 * (r["max_us"] * 1e-6 * r["iterations"] + 0.05) * os.cpu_count()
    assert r["bus_bytes"] == r["nbytes"]  # 2 ranks: factor 2 (n - 1) / n = 1
    assert r["cpu_s_per_gb"] == pytest.approx(cpu / (2 * r["iterations"] * r["nbytes"] / 1e9))
    assert r["cpu_loop_s"] >= cpu * 0.99 and r["cpu_loop_s_per_gb"] >= r["cpu_s_per_gb"] * 0.99
    # every rank's calls on one clock (nezha sim's replay reads the ranks' start skew)
    calls = r["rank_calls"]
    assert [len(s) for s in calls["start_us"]] == [r["iterations"]] * 2
    assert min(s[0] for s in calls["start_us"]) == 0.0
    assert calls["us"][0] == pytest.approx(r["samples_us"], abs=0.1)


def _run(system, rep, size, cpu):
    return {"system": system, "collective": "allreduce", "rep": rep,
            "doc": {"results": [{"size": size, "nbytes": size, "avg_us": 1000.0,
                                 "iterations": 10, "cpu_s_per_gb": cpu, "cpu_user_s": cpu,
                                 "cpu_sys_s": 0.0}]}}


def test_summary_and_tables_carry_cpu_per_gb():
    meta = {"nezha-all": {"limit_gbps": 0.1}, "mpi-all": {"limit_gbps": 0.1}}
    runs = [_run("nezha-all", 0, 1 << 20, 1.0), _run("nezha-all", 1, 1 << 20, 3.0),
            _run("mpi-all", 0, 1 << 20, 4.0), _run("mpi-all", 0, 4, None)]
    summ = compare.summarize(runs, meta, 4)
    nz = summ["allreduce"]["nezha-all"][0]
    assert nz["cpu_s_per_gb"] == pytest.approx(2.0)  # median over the repetitions
    assert summ["allreduce"]["mpi-all"][0]["cpu_s_per_gb"] is None  # size 4: no CPU figure
    doc = {"summary": summ, "systems": {"nezha-all": {}, "mpi-all": {}}}
    lines = compare.cpu_table(doc, "allreduce", min_size=1 << 20)
    assert lines[0].startswith("| Size | nezha-all") and len(lines) == 3
    assert "2.000" in lines[2] and "4.000" in lines[2] and lines[2].startswith("| 1 MiB")


def test_lab_reach_verdict():
    assert compare.lab_reach([])["reaches"] is None
    got = compare.lab_reach([{"min_pct": 96.0}, {"min_pct": 90.0}, {"min_pct": 97.0},
                             {"error": "x"}])
    assert got["min_pct"] == 96.0 and got["reaches"] and got["runs"] == 3
    assert not compare.lab_reach([{"min_pct": 94.0}])["reaches"]


def test_zero_copy_row_runs_only_when_named():
    import types
    lab = types.SimpleNamespace(rails=2, hosts=4, spec=types.SimpleNamespace(rates=[8e8, 8e8], ina=()))
    default = [s.name for s in compare.select_systems(lab)]
    assert "nezha-all-zc" not in default and "nezha-all-zc16k" not in default
    names = [s.name for s in compare.select_systems(lab, ["nezha-all", "nezha-all-zc"])]
    assert names == ["nezha-all", "nezha-all-zc"]


@pytest.mark.parametrize("text,bps", [("800mbit", 800_000_000), ("1600mbit", 1_600_000_000),
                                      ("1.6gbit", 1_600_000_000)])
def test_faster_lab_rates_parse(text, bps):
    from nezha.lab.shaping import parse_rates
    assert parse_rates(text, 2) == [bps, bps]
    assert compare._rate_text(bps) in ("800mbit", "1600mbit")


def test_zero_copy_counters_reach_the_markdown():
    z = {"sends": 3, "bytes": 2e9, "copied": 3, "nobufs": 1, "full": 0, "in_flight": 0}
    stats = {"zerocopy": z, "rails": {"rail0": {"bytes_sent": 3e9}, "rail1": {"bytes_sent": 1e9}}}
    doc = {"runs": [{"system": "nezha-all-zc", "doc": {"stats": stats}},
                    {"system": "nezha-all-zc", "doc": {"stats": stats}},
                    {"system": "nezha-all", "doc": {"stats": {"zerocopy": None}}},
                    {"system": "mpi-all", "doc": {"stats": {}}}]}
    (line,) = [x for x in compare._zerocopy_lines(doc) if x]
    assert "nezha-all-zc: 6 sends (4.00 of 8.00 GB sent)" in line and "copied 6" in line
    assert "2 ENOBUFS" in line and "nezha-all:" not in line
    assert compare._zerocopy_lines({"runs": doc["runs"][2:]}) == []


def test_loop_period_is_rank0s_median_start_to_start_and_reaches_the_table():
    """The period a shaped link sets (session 29): rank 0's median start-to-start, median
    over repetitions; a result without rank_calls (or too few calls) has none."""
    def run(system, rep, starts):
        r = _run(system, rep, 8192, None)
        r["doc"]["results"][0]["rank_calls"] = {"start_us": [starts, [0.0] * len(starts)],
                                                "us": [[1.0] * len(starts)] * 2}
        return r
    runs = [run("nezha-all", 0, [0.0, 400.0, 810.0, 1205.0]),   # gaps 400, 410, 395: 400
            run("nezha-all", 1, [5.0, 425.0, 845.0]),           # 420, 420: 420
            run("mpi-rail0", 0, [0.0, 500.0, 1010.0, 1500.0]),  # 500, 510, 490: 500
            _run("mpi-all", 0, 8192, None)]
    summ = compare.summarize(runs, {n: {"limit_gbps": 0.1} for n in
                                    ("nezha-all", "mpi-rail0", "mpi-all")}, 4)
    assert summ["allreduce"]["nezha-all"][0]["period_us"] == pytest.approx(410.0)
    assert summ["allreduce"]["mpi-rail0"][0]["period_us"] == pytest.approx(500.0)
    assert summ["allreduce"]["mpi-all"][0]["period_us"] is None
    assert compare.loop_period_us({"rank_calls": {"start_us": [[0.0, 1.0]]}}) is None
    doc = {"summary": summ, "reference": "nezha-all",
           "systems": {"nezha-all": {}, "mpi-rail0": {}, "mpi-all": {}}}
    lines = compare.period_table(doc, "allreduce")
    assert lines[2] == "| 8 KiB | 410.0 | 1.22 | n/a |", lines
    assert compare.period_table(doc, "allreduce", max_size=4096) == []
