"""Golden-output tests for the OSU-style benchmark formatting (bench/_common.py).

The column layout must stay identical to OSU 7.4 (c/util/osu_util_mpi.c) so OSU parsers
read our output; busbw factors are nccl-tests' (doc/PERFORMANCE.md). Pure functions
only, except one end-to-end run of bench/osu_allreduce.py under mpirun.
"""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
sys.path.insert(0, BENCH)

import _common as c  # noqa: E402  (bench/ is not a package)
from nezha._version import __version__  # noqa: E402

HEADER_PLAIN = "# Size         Avg Latency(us)"
HEADER_FULL = ("# Size         Avg Latency(us)     Min Latency(us)     Max Latency(us)"
               "  Iterations")


def test_title_is_osu_style_not_osu():
    line = c.title_line("Allreduce Latency")
    assert line == f"# OSU-style nezha Allreduce Latency Test v{__version__}"
    assert not line.startswith("# OSU MPI")


def test_column_header_plain_and_full():
    assert c.column_header(c.Columns()) == HEADER_PLAIN
    assert c.column_header(c.Columns(full=True)) == HEADER_FULL


def test_column_header_matches_osu_printf():
    # OSU: "%-*s" 10 "# Size", "%*s" 20 per column, "%*s" 12 "Iterations".
    want = "%-10s%20s%20s%20s%12s%20s%20s%20s" % (
        "# Size", "Avg Latency(us)", "Min Latency(us)", "Max Latency(us)", "Iterations",
        "Validation", "P50 Tail Lat(us)", "P99 Tail Lat(us)")
    cols = c.Columns(full=True, validate=True, percentiles=(50, 99))
    assert c.column_header(cols) == want


def test_bandwidth_header_and_extra_bw_columns_go_last():
    cols = c.Columns(metric="Bandwidth (MB/s)", percentiles=(90,), tail_unit="BW(MB/s)", bw=True)
    assert c.column_header(cols) == ("# Size        Bandwidth (MB/s)   P90 Tail BW(MB/s)"
                                     "         algbw(GB/s)         busbw(GB/s)")


def test_header_lines_order():
    lines = c.header_lines("Allreduce Latency", [("Backend", "mpi (Open MPI v5)"),
                                                 ("Rails", "lo"), ("Ranks", "4")],
                           "float32", c.Columns(full=True))
    assert lines == ["", f"# OSU-style nezha Allreduce Latency Test v{__version__}",
                     "# Backend: mpi (Open MPI v5)", "# Rails: lo", "# Ranks: 4",
                     "# Datatype: float32.", HEADER_FULL]


def test_data_row_golden():
    assert c.data_row(c.Columns(), 4, 3.156) == "4                         3.16"
    row = c.data_row(c.Columns(full=True), 1024, 2.0, 1.99, 2.011, 5)
    assert row == "1024                      2.00                1.99                2.01           5"
    assert row == "%-10d%20.2f%20.2f%20.2f%12d" % (1024, 2.0, 1.99, 2.011, 5)


def test_data_row_validation_tails_bw():
    cols = c.Columns(full=True, validate=True, percentiles=(50, 90), bw=True)
    row = c.data_row(cols, 8192, 10.0, 9.0, 11.0, 100, True, (9.5, 10.5), (0.8192, 1.2288))
    assert row == "%-10d%20.2f%20.2f%20.2f%12d%20s%20.2f%20.2f%20.2f%20.2f" % (
        8192, 10.0, 9.0, 11.0, 100, "Pass", 9.5, 10.5, 0.82, 1.23)
    assert c.data_row(c.Columns(validate=True), 4, 1.0, valid=False).endswith("Fail")


@pytest.mark.parametrize("coll,n,factor", [
    ("allreduce", 2, 1.0), ("allreduce", 4, 1.5), ("allreduce", 8, 1.75),
    ("allgather", 4, 0.75), ("reduce_scatter", 4, 0.75), ("allgather", 1, 0.0),
    ("broadcast", 4, 1.0), ("reduce", 8, 1.0)])
def test_busbw_factors_from_nccl_tests(coll, n, factor):
    assert c.BUSBW_FACTORS[coll](n) == pytest.approx(factor)


def test_algbw_and_busbw_units_are_1e9():
    assert c.algbw(10**9, 1.0) == pytest.approx(1.0)
    assert c.algbw(1 << 20, 1e-3) == pytest.approx(1.048576)
    assert c.busbw("allreduce", 4 * 10**9, 2.0, 4) == pytest.approx(3.0)


def test_size_parsing():
    assert c.parse_size("64K") == 65536 and c.parse_size("1M") == 1 << 20
    assert c.parse_size("4") == 4 and c.parse_size("2g") == 2 << 30
    assert c.parse_range("4:1M", 1) == (4, 1 << 20)
    assert c.parse_range("1024", 1) == (1, 1024)
    assert c.parse_range(":8", 1) == (1, 8) and c.parse_range("16:", 1) == (16, None)


def test_parse_args_osu_defaults():
    a = c.parse_args("x", "collective", [])
    assert (a.min_size, a.max_size, a.dtype.name) == (1, 1 << 20, "float32")
    assert a.counts == (1000, 100, 100, 10)
    a = c.parse_args("x", "collective", ["-m", "16:", "-i", "7", "-x", "0", "-T", "int"])
    assert (a.min_size, a.max_size, a.counts, a.dtype.name) == (16, 1 << 20, (7, 0, 7, 0),
                                                                "int32")
    assert c.parse_args("x", "latency", []).counts == (10000, 100, 1000, 10)
    assert c.parse_args("x", "bw", []).counts == (100, 10, 20, 2)
    assert c.parse_args("x", "collective", ["-z"]).tail_lat == (50, 90, 99)


def test_sizes_and_large_message_switch():
    assert c.message_sizes(0, 8) == [0, 1, 2, 4, 8]
    assert c.message_sizes(4, 64) == [4, 8, 16, 32, 64]
    assert c.default_counts(8192, (1000, 100, 100, 10)) == (1000, 100)
    assert c.default_counts(16384, (1000, 100, 100, 10)) == (100, 10)


def test_osu_percentile_rule():
    vals = list(range(100, 0, -1))   # 1..100 unsorted
    assert c.osu_percentile(vals, 50) == 50 and c.osu_percentile(vals, 99) == 99
    assert c.osu_percentile([5.0], 99) == 5.0


def test_algorithm_summary():
    pick = {4: "tree", 8: "tree", 16: "ring"}.get
    assert c.algorithm_summary(pick, [4, 8, 16]) == "tree 4..8 B, ring 16..16 B"
    assert c.algorithm_summary(lambda n: "auto", [4, 8]) == "auto"


def test_ranks_per_host_sizes_and_inter_host_floor():
    import ranks_per_host as rph   # bench/ranks_per_host.py (pure helpers only)
    assert rph.parse_sizes("1M,4,1K,4") == [4, 1024, 1 << 20]
    with pytest.raises(ValueError):
        rph.parse_sizes("6")
    goodput = 400e6 * 8948 / 9014 / 8            # bytes/s of one 400 Mbit/s rail at MTU 9000
    assert rph.floor_us(1 << 20, 2, [400e6, 400e6]) == pytest.approx((1 << 20) / (2 * goodput) * 1e6)
    assert rph.floor_us(1 << 20, 4, [400e6, 100e6]) == pytest.approx(
        1.5 * (1 << 20) / (goodput * 1.25) * 1e6)
    assert rph.floor_us(4, 1, [400e6]) is None
    # allgather: a host receives the other hosts' (H-1) x L per-rank blocks; reduce_scatter:
    # it sends (H-1)/H of the whole send buffer
    assert rph.floor_us(1 << 20, 2, [400e6, 400e6], "allgather", 4) == pytest.approx(
        4 * (1 << 20) / (2 * goodput) * 1e6)
    assert rph.floor_us(1 << 20, 3, [400e6], "reduce_scatter", 2) == pytest.approx(
        2 / 3 * (1 << 20) / goodput * 1e6)
    # broadcast: every host but the root's receives the whole buffer once
    assert rph.floor_us(1 << 20, 2, [400e6, 100e6], "broadcast", 4) == pytest.approx(
        (1 << 20) / (goodput * 1.25) * 1e6)
    assert rph.main(["--collective", "allgather", "-l"]) == 2   # in place: allreduce only

def test_lab_driver_arguments_make_the_lab():
    """bench/failover.py and bench/soak.py share add_lab_args / lab_from_args (not brought up)."""
    import argparse
    p = argparse.ArgumentParser()
    c.add_lab_args(p, "INA help", "x.json")
    a = c.lab_from_args(p.parse_args([]), "nzfo", up=False).spec
    assert (a.hosts, a.rails, a.name, a.ranks_per_host, list(a.ina)) == (4, 2, "nzfo", 1, [])
    args = p.parse_args(["--rate", "100mbit", "--ranks-per-host", "2", "--ina"])
    b = c.lab_from_args(args, "nzsoak", up=False).spec
    assert (list(b.rates), b.ranks_per_host, list(b.ina)) == ([100e6, 100e6], 2, [1])
    assert args.json == os.path.join(ROOT, "bench", "out", "x.json")


def _mpirun():
    here = os.path.join(os.path.dirname(sys.executable), "mpirun")
    return here if os.path.exists(here) else shutil.which("mpirun")


@pytest.mark.mpi
@pytest.mark.skipif(_mpirun() is None, reason="mpirun not found (Open MPI wheel not installed)")
def test_osu_allreduce_mpi_output_parses():
    pytest.importorskip("mpi4py")
    cmd = [_mpirun(), "--allow-run-as-root", "--oversubscribe", "-np", "2",
           sys.executable, os.path.join(BENCH, "osu_allreduce.py"),
           "--backend", "mpi", "-m", "4:1024", "-i", "5", "-x", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "" and lines[1] == c.title_line("Allreduce Latency")
    header = lines.index(HEADER_PLAIN)
    assert all(line.startswith("# ") for line in lines[1:header])
    assert "# Ranks: 2" in lines and "# Datatype: float32." in lines
    rows = [line.split() for line in lines[header + 1:] if line.strip()]
    assert all(len(r) == 2 for r in rows)
    sizes = [int(r[0]) for r in rows]
    assert sizes == [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert all(float(r[1]) >= 0 for r in rows)
