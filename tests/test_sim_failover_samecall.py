"""failstats.same_call: each striped cut's extra against its own call, from the engine's op
trace every rank keeps (bench/failover.py's raw.rank_traces, session 30), and the model's
side of it (nezha sim failover FILE --same-call). Synthetic runs with exact times."""
import json

import pytest

pytest.importorskip("nezha._core.engine")

from nezha.sim import failover as FO  # noqa: E402
from nezha.sim import failstats as FS  # noqa: E402

MB = 1 << 20


def _run(size=64 * MB, two=1.0, one=2.0, cut_c=0.3, lost=22, end_after=0.75,
         skew=(0.0, 0.004, 0.002, 0.001), off=1000.0, extra_down=0.006, hit_ops=(30, 30)):
    """A bench row: 4 ranks, channel c = rail c (nconns 1), two-rail calls whose data take
    `two` s on both rails, one-rail calls `one` s on rail 1, and call 3 hit by a cut of
    rail 0 `cut_c` s after its data started (the last rank's engine start), its surviving
    rail done at `two`, its re-run done `end_after` s later on every rank. Ranks' engines
    start `skew` s after rank 0's call (the snapshot and the entry lag), wall = mono + off."""
    rows, traces = [], [[] for _ in skew]
    t, plan = 10.0, []
    for j in range(7):
        alive = 3 if j < 3 else (2 if j < 5 else 3)
        plan.append(alive)
    failures, called, events = [], [], [[] for _ in skew]
    for j, alive in enumerate(plan):
        start = t + max(skew)
        if j == 3:
            dur = two + end_after
            tf = start + cut_c
            failures.append((tf, tf + 2.5))
            called.append(tf - 0.004)
            for r in range(len(skew)):
                # rail 0's ops left undone; the survivor (rail 1) done at `two`
                traces[r].append([round((t + skew[r] - off) * 1e9),
                                  [[0, round((cut_c - 0.01 + max(skew) - skew[r]) * 1e9), 7,
                                    hit_ops[0]],
                                   [1, round((two + max(skew) - skew[r]) * 1e9), hit_ops[1],
                                    hit_ops[1]]]])
                events[r].append(dict(event="down", channel="rail0", time=start + two + extra_down
                                      + 0.001 * r, rerun_done_s=start + dur, rerun_slices=lost))
        elif alive == 3:
            dur = two
            for r in range(len(skew)):
                last = round((two + max(skew) - skew[r]) * 1e9)
                traces[r].append([round((t + skew[r] - off) * 1e9), [[0, last, 30, 30],
                                                                     [1, last, 30, 30]]])
        else:
            dur = one
            for r in range(len(skew)):
                traces[r].append([round((t + skew[r] - off) * 1e9),
                                  [[1, round((one + max(skew) - skew[r]) * 1e9), 60, 60]]])
        rows.append((t, start + dur, 3 if j == 3 and False else alive))
        t = start + dur + 0.05
    rows[3] = (rows[3][0], rows[3][1], 2)
    return dict(size=size, mode="down",
                ranks=[dict(events=e) for e in events],
                raw=dict(rows=rows, failures=failures, fail_called=called,
                         rank_traces=[dict(traces=tr, mono_off=off, nconns=1) for tr in traces]))


def test_same_call_reads_the_cut_from_the_data_start_at_the_calls_own_pace():
    row = _run()
    (c,) = FS.same_call(row)
    assert c["j"] == 3 and c["rail"] == 0 and c["lost"] == 22
    assert c["c"] == pytest.approx(0.3, abs=1e-6)       # from the last rank's engine start
    assert c["L"] == pytest.approx(1.0, abs=1e-6) and c["T2"] == pytest.approx(1.0, abs=1e-6)
    assert c["r21"] == pytest.approx(2.0) and c["n1"] == 1 and c["n2"] == 5
    # took 1.75 s from the data start; ideal 0.3 + 0.7 x 2.0 = 1.7: 50 ms extra
    assert c["took"] == pytest.approx(1.75, abs=1e-6)
    assert c["extra"] == pytest.approx(0.05, abs=1e-6)
    assert c["extra_2x"] == pytest.approx(0.05, abs=1e-6)
    assert c["first_down"] == pytest.approx(1.006, abs=1e-6)
    assert c["fail_s"] == pytest.approx(0.004, abs=1e-9) and c["symmetric"]


def test_same_call_ignores_the_entry_lag_that_moves_the_benchs_extra():
    # the same cut and pace, rank 2 entering 80 ms late: rank 0's call takes 80 ms more
    # and the bench's extra (against the medians) with it; the same-call extra does not move
    a, b = _run(), _run(skew=(0.0, 0.004, 0.08, 0.001))
    ea, eb = FS.same_call(a)[0], FS.same_call(b)[0]
    assert eb["extra"] == pytest.approx(ea["extra"], abs=1e-6)
    ba = FS.cut_extra(a["raw"]["rows"], a["raw"]["failures"][0][0])
    bb = FS.cut_extra(b["raw"]["rows"], b["raw"]["failures"][0][0])
    assert bb["took"] - ba["took"] == pytest.approx(0.076, abs=1e-6)


def test_same_call_slower_one_rail_calls_change_the_reference_not_the_2x_reading():
    row = _run(one=2.1)
    (c,) = FS.same_call(row)
    assert c["r21"] == pytest.approx(2.1)
    assert c["extra"] == pytest.approx(1.75 - (0.3 + 0.7 * 2.1), abs=1e-6)
    assert c["extra_2x"] == pytest.approx(0.05, abs=1e-6)


def test_same_call_needs_every_ranks_trace():
    row = _run()
    row["raw"]["rank_traces"][2] = None
    assert FS.same_call(row) == []
    row = _run()
    del row["raw"]["rank_traces"]
    assert FS.same_call(row) == []


def test_model_side_places_the_cut_at_the_same_share(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps([_run()]))
    rows, summ = FO.same_call(str(path), [0.4, 0.4], 4, timeout=0.06, vote=0.005)
    (r,) = rows
    assert r["share"] == pytest.approx(0.3)
    t2 = r["sim_T2_ms"] / 1e3
    p = FO.predict(4, [0.4, 0.4], 64 * MB, 1, 0, 0.3 * t2, timeout=0.06, vote=0.005)
    s = 1.0 / t2  # the lab's T2 (1 s) over the model's
    assert r["sim_extra_ms"] == pytest.approx(p["extra_ms"] * s)
    assert r["sim_lost"] == p["unfinished"]
    assert r["lab_extra_ms"] == pytest.approx(50.0, abs=1e-3)
    (sm,) = summ
    assert sm["cuts"] == 1 and sm["verdict"] in ("within", "outside", "unresolved")


def test_plan_for_ops_reads_the_planners_split_back_from_the_trace_counts():
    # the planner's 64 MiB plan on rails planned at 0.4 and 0.37 Gbit/s: 32 + 31 slices
    ops, slices = FO._plan_ops(4, 64 * MB, (0.4, 0.37))
    assert slices == (32, 31) and ops[0] > ops[1]
    pr = FO.plan_for_ops(4, 64 * MB, ops)
    assert pr[0] == 0.4 and 0.36 < pr[1] < 0.38
    assert FO._plan_ops(4, 64 * MB, pr) == (ops, slices)
    # the lighter rail first: the same split mirrored
    pr = FO.plan_for_ops(4, 64 * MB, ops[::-1])
    assert pr[1] == 0.4 and FO._plan_ops(4, 64 * MB, pr)[1] == (31, 32)
    # the even split is the planner's own on equal rails: no plan to give
    even = FO._plan_ops(4, 64 * MB, (0.4, 0.4))[0]
    assert FO.plan_for_ops(4, 64 * MB, even) is None
    with pytest.raises(ValueError):
        FO.plan_for_ops(4, 64 * MB, (ops[0], ops[1] - 1))


def test_model_side_replays_the_hit_calls_uneven_plan(tmp_path):
    # the hit call planned 32 + 31 (rail 0, the cut one, the lighter): ops per rank as the
    # engine traces them (each rank a quarter of the counts)
    ops, _ = FO._plan_ops(4, 64 * MB, (0.37, 0.4))
    assert ops[0] < ops[1] and ops[0] % 4 == 0 == ops[1] % 4
    path = tmp_path / "run.json"
    path.write_text(json.dumps([_run(hit_ops=(ops[0] // 4, ops[1] // 4), cut_c=0.45)]))
    kw = dict(timeout=0.06, vote=0.005)
    rows, summ = FO.same_call(str(path), [0.4, 0.4], 4, **kw)
    (r,) = rows
    assert r["rail_ops"] == list(ops) and not r["symmetric"] and r["plan_matched"]
    pr = FO.plan_for_ops(4, 64 * MB, ops)
    # the model's T2: its surviving rail's (1) last transfer in the uncut uneven call
    L = FO._rail_last(4, (0.4, 0.4), pr, 64 * MB, 1, 0.0, 1 << 20)
    assert r["sim_T2_ms"] == pytest.approx(L * 1e3)
    p = FO.predict(4, [0.4, 0.4], 64 * MB, 1, 0, 0.45 * L, plan_rates=pr, **kw)
    s = 1.0 / L
    assert r["sim_lost"] == p["unfinished"]
    assert r["sim_extra_2x_ms"] == pytest.approx(
        (p["took_ms"] - FO._ideal(0.45 * L * 1e3, L * 1e3, 2 * L * 1e3)) * s)
    # not the even plan's answer: the survivor carries 32 of 63 slices, not 32 of 64
    t2 = FO._references(4, (0.4, 0.4), 64 * MB, 0, 0.0, 1 << 20)[0]
    pe = FO.predict(4, [0.4, 0.4], 64 * MB, 1, 0, 0.45 * t2, **kw)
    even = (pe["took_ms"] - FO._ideal(0.45 * t2 * 1e3, t2 * 1e3, 2 * t2 * 1e3)) / t2
    assert abs(r["sim_extra_2x_ms"] - even) > 5.0
    assert summ[0]["plan_unmatched"] == 0
    # plan=False: the even split for every cut, as before
    rows0, _ = FO.same_call(str(path), [0.4, 0.4], 4, plan=False, **kw)
    assert rows0[0]["sim_extra_2x_ms"] == pytest.approx(even)
