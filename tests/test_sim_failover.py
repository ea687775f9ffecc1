"""The simulator's lazy-failover model (small collectives: no vote unless a rank sees a
failure) and the failover bench's statistics (nezha/sim/failstats.py), against bounds
derived from the engine's rules and against the recorded lab runs."""
import math
import os

import numpy as np
import pytest

pytest.importorskip("nezha._core.engine")

from nezha.sim import failover as FO  # noqa: E402
from nezha.sim import failstats as FS  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "..", "docs", "results")
S14 = os.path.join(RESULTS, "session14", "wave1", "failover-after.json.gz")
KW = dict(timeout=0.06, vote=0.005, heartbeat=0.01, spin=200e-6, resend=False)


@pytest.mark.parametrize("hosts", [2, 4, 8])
def test_lazy_detection_waits_for_the_first_of_the_silent_peers_phases(hosts):
    # 1 KiB rides one channel whole (recursive doubling): the cut host exchanges with
    # log2(n) partners, so log2(n) + 1 heartbeat phases (the partners' and its own)
    r = FO.predict(hosts, [0.4, 0.4], 1024, 1, 0, 0.0, **KW)
    assert r["lazy"] and r["slices"] == 1 and r["unfinished"] == 1
    k = int(math.log2(hosts)) + 1
    assert r["phases"] == k
    assert r["phase_ms"] == pytest.approx(10.0 / (k + 1))
    # the band from the engine's rules: silence counts from the stall + the spin; a
    # heartbeat on another rail comes within one period; then the vote and the re-run
    lo = 60.0 + 0.2 + 5.0
    hi = lo + 10.0 + r["one_rail_ms"]
    assert lo <= r["extra_ms"] <= hi
    assert lo <= r["detected_ms"] + 5.0 <= hi


def test_model_constants_are_the_settings_defaults():
    from nezha.config import PARAMS
    assert FO.HEARTBEAT_S == float(PARAMS["HEARTBEAT"].default)
    assert FO.SPIN_S == pytest.approx(float(PARAMS["SPIN_US"].default) * 1e-6)
    assert FO.predict.__defaults__[0] == float(PARAMS["RAIL_TIMEOUT"].default)  # timeout


def test_lazy_phase_wait_is_the_minimum_of_uniform_phases():
    # oracle: the minimum of k independent uniform phases, drawn
    rng = np.random.default_rng(7)
    for k in (1, 2, 3, 5):
        draws = rng.uniform(0, 0.01, size=(200_000, k)).min(axis=1)
        assert FO.phase_wait(k, 0.01) == pytest.approx(draws.mean(), rel=0.01)
        for q in (0.1, 0.5, 0.9):
            assert FO.phase_wait(k, 0.01, q) == pytest.approx(np.quantile(draws, q), rel=0.02)
    assert FO.phase_wait(0, 0.01) == 0.0


def test_lazy_extra_moves_with_the_timeout_and_the_phase_alone():
    base = FO.predict(4, [0.4, 0.4], 1024, 2, 0, 0.0, **KW)
    later = FO.predict(4, [0.4, 0.4], 1024, 2, 0, 0.0, **dict(KW, timeout=0.1))
    assert later["extra_ms"] - base["extra_ms"] == pytest.approx(40.0, abs=1e-6)
    qs = [FO.predict(4, [0.4, 0.4], 1024, 2, 0, 0.0, phase_q=q, **KW)["extra_ms"]
          for q in (0.1, 0.5, 0.9)]
    assert qs[0] < qs[1] < qs[2] and qs[2] - qs[0] < 10.0
    # a socket error needs no silence: only the vote and the re-run are left
    err = FO.predict(4, [0.4, 0.4], 1024, 2, 0, 0.0, detect="error", **KW)
    assert 5.0 <= err["extra_ms"] <= 5.0 + err["one_rail_ms"] + 1e-9
    # a cut before the collective starts stalls it from its start
    early = FO.predict(4, [0.4, 0.4], 1024, 2, 0, -0.03, **KW)
    assert early["extra_ms"] == pytest.approx(base["extra_ms"])


def test_a_cut_of_the_first_rail_costs_the_vote_a_resend():
    # the vote's one STATUS copy per peer goes on the first rail the planner still has,
    # which is the cut one until the vote marks it dead: lost, sent again after the wait
    import re
    hdr = open(os.path.join(os.path.dirname(__file__), "..", "include", "nezha",
                            "nezha_engine.h")).read()
    ns = int(re.search(r"#define NZ_VOTE_RESEND_NS (\d+)LL", hdr).group(1))
    assert FO.VOTE_RESEND_S == pytest.approx(ns * 1e-9)
    kw = dict(KW, resend=True)
    for size, host in ((1024, 1), (1 << 20, 2)):
        off = FO.predict(4, [0.4, 0.4], size, host, 0, 0.0, **KW)
        on = FO.predict(4, [0.4, 0.4], size, host, 0, 0.0, **kw)
        assert on["extra_ms"] - off["extra_ms"] == pytest.approx(ns * 1e-6)
    # rail 1 is not the first: no resend (1 MiB rides both rails)
    a = FO.predict(4, [0.4, 0.4], 1 << 20, 2, 1, 0.0, **KW)
    b = FO.predict(4, [0.4, 0.4], 1 << 20, 2, 1, 0.0, **kw)
    assert a["extra_ms"] == pytest.approx(b["extra_ms"])


def test_lazy_cut_of_the_other_rail_stalls_nothing():
    r = FO.predict(4, [0.4, 0.4], 1024, 1, 1, 0.0, **KW)
    assert r["lazy"] and r["unfinished"] == 0 and r["extra_ms"] == 0.0


def test_striped_sizes_keep_the_striped_model():
    r = FO.predict(4, [0.4, 0.4], 1 << 20, 1, 0, 0.0, **KW)
    assert "lazy" not in r and r["slices"] == 2
    # the same silence rule: detection within one heartbeat after timeout + spin
    assert 60.2 <= r["detected_ms"] <= 70.2
    q = [FO.predict(4, [0.4, 0.4], 1 << 20, 1, 0, 0.0, phase_q=x, **KW)["detected_ms"]
         for x in (0.0, 1.0)]
    assert q == [pytest.approx(60.2), pytest.approx(70.2)]


# ---- the bench's statistics ---------------------------------------------------------------

def _rows(durs, alive, gap=0.001):
    rows, t = [], 0.0
    for d, a in zip(durs, alive):
        rows.append((t, t + d, a))
        t += d + gap
    return rows


def test_hit_span_of_a_lazy_stall_that_degrades_one_row_later():
    # two-rail rows of 1 ms, a 70 ms stall ending with both rails up, then a 3 ms row on
    # one rail (the next collective's vote marks the rail dead), then 2 ms one-rail rows
    rows = _rows([1e-3] * 5 + [70e-3, 3e-3] + [2e-3] * 5, [3] * 7 + [1] * 5)
    rows[6] = (rows[6][0], rows[6][1], 1)
    tf = rows[5][0] + 0.2e-3
    assert FS.hit_span(rows, tf, lazy=True) == (5, 5, 6)
    assert FS.hit_span(rows, tf, lazy=False) == (6, 6, 6)  # striped: the degraded row alone
    c = FS.cut_extra(rows, tf, lazy=True)
    # ideal: 0.2 ms on two rails, the rest of the stalled row's work on one rail (x2),
    # and one more row on one rail
    ideal = 0.2e-3 + (1 - 0.2) * 2e-3 + 2e-3
    assert c["ideal"] == pytest.approx(ideal) and c["took"] == pytest.approx(73e-3)
    assert c["extra"] == pytest.approx(73e-3 - ideal)
    assert FS.hit_span(rows[:6], tf, lazy=True) is None  # never degraded


def test_summary_and_verdict_are_three_valued():
    assert FS.t95(1) == pytest.approx(12.706) and FS.t95(9) == pytest.approx(2.262)
    s = FS.summary([10.0, 12.0, 14.0])
    assert s["mean"] == pytest.approx(12.0) and s["sd"] == pytest.approx(2.0)
    assert s["ci95"] == pytest.approx(4.303 * 2.0 / math.sqrt(3))
    assert not s["resolves"] and s["cuts_needed"] == math.ceil((1.96 * 2 / 1.2) ** 2)
    model = [100.0] * 8
    assert FS.verdict([101, 99, 100, 102, 98, 100, 101, 99], model)["verdict"] == "within"
    assert FS.verdict([131, 129, 130, 132, 128, 130, 131, 129], model)["verdict"] == "outside"
    assert FS.verdict([60, 140, 100, 150, 50, 120, 80, 110], model)["verdict"] == "unresolved"


def test_recorded_lazy_cuts_are_all_stalls():
    # session 14's 1 KiB runs: with the degraded row alone, 2 of 6 'down' cuts read ~3 ms
    # (the stall ended with both rails up); as spans every cut is a stall past the timeout
    cuts = FO.bench_cuts(S14)
    for mode in ("down", "blackhole"):
        ex = [c[3] for c in cuts[(1024, mode)]["cuts"]]
        assert len(ex) == 6 and all(0.06 < x < 0.09 for x in ex)
    old = [r for r in __import__("json").load(__import__("gzip").open(S14, "rt"))
           if r["size"] == 1024 and r["mode"] == "down"][0]
    assert min(c["took_ms"] for c in old["cuts"]) < 5.0  # what the old reading kept


def test_compare_gives_the_paired_verdict_on_recorded_runs(tmp_path):
    import gzip
    import json
    rows, summ = FO.compare(S14, **KW)
    by = {(s["nbytes"], s["mode"]): s for s in summ}
    small = by[(1024, "down")]
    assert small["cuts"] == 6 and small["verdict"] in ("within", "outside", "unresolved")
    assert small["predicted_mean_ms"] == pytest.approx(60 + 0.2 + 2.5 + 5 + 0.041, abs=0.05)
    # the code since the one-copy vote: rail 0 cut, so the vote waits for its resend (the
    # 1 KiB rows alone: the larger ones' cuts are most of compare's time)
    with gzip.open(S14, "rt") as f:
        data = [row for row in json.load(f) if row["size"] == 1024]
    small_only = tmp_path / "1k.json"
    small_only.write_text(json.dumps(data))
    _, summ2 = FO.compare(small_only, **dict(KW, resend=True))
    small2 = {(s["nbytes"], s["mode"]): s for s in summ2}[(1024, "down")]
    assert small2["predicted_mean_ms"] == pytest.approx(small["predicted_mean_ms"] + 2.0)
    big = by[(64 << 20, "blackhole")]
    # the lab's noise at 64 MiB: a 10 % reading of a ~20 ms mean needs hundreds of cuts
    assert big["cuts_for_10pct"] > 100 and big["lab_noise_ms"] > 10


def test_a_run_out_of_place_starts_its_data_without_the_snapshot(tmp_path):
    """Files from code where a blocking in-place collective runs out of place (session 22:
    the bench records the counters) place each cut with no copy before the data: every
    64 MiB prediction's data starts at the call (session 14 recorded no rank's entry lag),
    not snapshot_s into it as for the same file without the counters."""
    import gzip
    import json
    with gzip.open(S14, "rt") as f:
        data = json.load(f)
    # the 64 MiB rows only: the assertion is about them, and the smaller rows' cuts take
    # most of compare's time
    data = [row for row in data if row["size"] == 64 << 20]
    assert data
    ref, oop = tmp_path / "ref.json", tmp_path / "oop.json"
    ref.write_text(json.dumps(data))
    for row in data:
        row["raw"]["snapshots"] = {"at_post": 0, "at_run": 0, "out_of_place": 40}
    oop.write_text(json.dumps(data))
    assert all(not v["copied"] for v in FO.bench_cuts(oop).values())
    assert all(v["copied"] for v in FO.bench_cuts(ref).values())
    old, new = FO.compare(ref, **KW)[0], FO.compare(oop, **KW)[0]
    snap = FO.snapshot_s(64 << 20) * 1e3
    big = [(a, b) for a, b in zip(old, new) if a["nbytes"] == 64 << 20]
    assert big and all(a["start_ms"] == pytest.approx(snap) and b["start_ms"] == 0
                       for a, b in big)


def test_failover_command_prints_the_verdict(capsys):
    from nezha.sim.cli import main
    assert main(["failover", S14, "--near", "3"]) == 0
    out = capsys.readouterr().out
    assert "verdict" in out and "cuts_for_10pct" in out


def test_bench_analyse_reads_the_recorded_run_as_the_model_does():
    import gzip
    import importlib.util
    import json
    spec = importlib.util.spec_from_file_location(
        "failover_bench", os.path.join(os.path.dirname(__file__), "..", "bench", "failover.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    with gzip.open(S14, "rt") as f:
        data = json.load(f)
    cuts = FO.bench_cuts(S14)
    for row in data:
        a = bench.analyse(dict(rows=row["raw"]["rows"], wrong=[0]), row["raw"]["failures"],
                          row["size"], 400e6, 4, 4)
        assert a["hits"] == len(row["raw"]["failures"]) == 6
        mine = [c[3] * 1e3 for c in cuts[(row["size"], row["mode"])]["cuts"]]
        assert a["extra_ms_mean"] == pytest.approx(sum(mine) / len(mine))
        if row["size"] == 1024:  # lazy: every cut a stall; the late-degrading ones span 2 rows
            assert all(c["took_ms"] > 60 for c in a["cuts"])
            assert any(c["rows"] == 2 for c in a["cuts"])
        else:
            assert all(c["rows"] == 1 for c in a["cuts"])
        if row["size"] == 64 << 20:
            assert a["cuts_for_10pct"] > 50 and a["noise_ms"] > 10


def test_phases_read_the_first_rank_to_mark_the_rail_dead(tmp_path, capsys):
    import gzip
    import json
    # 1 KiB, back to back: a 70 ms stall right after the cut, then one-rail rows
    rows = _rows([50e-6] * 20 + [70e-3] + [0.4e-3] * 20, [3] * 21 + [1] * 20)
    t0 = rows[20][0]
    tc, tf = t0 - 3e-3, t0 - 0.1e-3          # lab.fail called, returned
    down0 = dict(event="down", time=t0 + 71e-3, why="reported by another rank",
                 rerun_done_s=t0 + 70.9e-3 + 1.5e-3, rerun_slices=1)
    down2 = dict(event="down", time=t0 + 68e-3, why="silence", detect_ms=66.0)
    doc = [{"size": 1024, "mode": "down", "events": [down0],
            "ranks": [{"events": [down0]}, {"events": []}, {"events": [down2]},
                      {"events": []}],
            "raw": {"rows": rows, "failures": [[tf, tf + 1.0]], "fail_called": [tc]}}]
    path = tmp_path / "fo.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    (p,) = FO.phases(path, **KW)
    assert p["lab_down_ms"] == pytest.approx(71.0) and p["lab_first_down_ms"] == pytest.approx(68.0)
    assert p["sim_down_ms"] == pytest.approx(60.0 + 0.2 + 2.5)  # lazy: not scaled
    assert p["lab_slices"] == p["unfinished"] == 1
    from nezha.sim.cli import main
    assert main(["failover", str(path), "--phases", "--no-resend"]) == 0
    assert "lost slices lab = model in 1 of 1 cuts" in capsys.readouterr().out
    # an older file (rank 0's events only) has no first rank
    doc[0].pop("ranks")
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    assert math.isnan(FO.phases(path, **KW)[0]["lab_first_down_ms"])
