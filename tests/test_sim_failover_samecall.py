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
    ops, slices, _ = FO._plan_ops(4, 64 * MB, (0.4, 0.37))
    assert slices == (32, 31) and ops[0] > ops[1]
    pr = FO.plan_for_ops(4, 64 * MB, ops)
    assert pr[0] == 0.4 and 0.36 < pr[1] < 0.38
    assert FO._plan_ops(4, 64 * MB, pr)[:2] == (ops, slices)
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
    ops = FO._plan_ops(4, 64 * MB, (0.37, 0.4))[0]
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


# ---- session 31: the bytes each rail moved, in the trace (bench/failover.py call_record) --

def _bench():
    import importlib.util
    import os
    spec = importlib.util.spec_from_file_location(
        "failover_bench", os.path.join(os.path.dirname(__file__), "..", "bench", "failover.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _hit_ops(d, two=1.0, cut=0.3):
    """One rank's hit call as Engine.op_times() gives it (finish ns after the rank's engine
    start, d s after the last rank's): rail 0 (cut) 30 ops of 256 KiB finishing every 40 ms
    until the cut, rail 1 30 ops of 256 KiB every two/30 (from half a step) and a 32 B
    header, and a local reduce (peer -1) that moves no network bytes."""
    ops = []
    for i in range(30):
        t = 0.04 * (i + 1)
        ops.append((i % 2, 1, 0, 262144, -1, -1, round((t + d) * 1e9) if t < cut - 0.01 else -1))
    for i in range(30):
        ops.append((i % 2, 2, 1, 262144, -1, -1, round(((i + 0.5) * two / 30 + d) * 1e9)))
    ops.append((3, 2, 1, 32, -1, -1, round(d * 1e9)))
    ops.append((4, -1, 1, 999, -1, -1, round((two + d) * 1e9)))
    return ops


def test_call_record_keeps_each_rails_bytes_and_same_call_reads_them_at_the_cut():
    fb = _bench()
    row = _run()
    skew = (0.0, 0.004, 0.002, 0.001)
    for r, rt in enumerate(row["raw"]["rank_traces"]):
        d = max(skew) - skew[r]
        rec, per = fb.call_record({"t0": rt["traces"][3][0], "ops": _hit_ops(d)})
        assert per[0][2:] == [30, 7 * 262144, 30 * 262144]  # ops, bytes done, bytes
        assert per[1][3:] == [30 * 262144 + 32] * 2          # the local op's 999 B not counted
        assert len(rec) == 3 and [c[0] for c in rec[2]] == [0, 1]
        rt["traces"][3] = rec
        # an unhit call's record: no finish list
        full = [(0, 1, c, 100, -1, -1, 5) for c in (0, 1)]
        assert len(fb.call_record({"t0": 1, "ops": full})[0]) == 2
    row = json.loads(json.dumps(row))  # the field round-trips through the bench's JSON
    (c,) = FS.same_call(row)
    # summed over 4 ranks: every rail's planned bytes, and what each had moved by the cut
    # (0.3 s after the data start): rail 0 its 7 ops, rail 1 its header and the 9 ops done
    # by then (0.5/30 .. 8.5/30 s)
    assert c["rail_bytes"] == [4 * 30 * 262144, 4 * (30 * 262144 + 32)]
    assert c["rail_bytes_at_cut"] == [4 * 7 * 262144, 4 * (9 * 262144 + 32)]
    assert c["c"] == pytest.approx(0.3, abs=1e-6)
    # files before session 31 (4 fields a channel, finish times alone): no bytes
    (old,) = FS.same_call(_run())
    assert old["rail_bytes"] is None and old["rail_bytes_at_cut"] is None


def test_plan_for_ops_reads_the_exact_split_from_the_bytes():
    # a share of 0.94: 32 + 32 slices like the even plan, but 48.5 % of the bytes on rail 0;
    # the ops alone read it as the even plan (None)
    ops, slices, nb = FO._plan_ops(4, 64 * MB, (0.376, 0.4))
    even_ops, _, even_b = FO._plan_ops(4, 64 * MB, (0.4, 0.4))
    assert ops == even_ops and slices == (32, 32) and nb != even_b
    assert FO.plan_for_ops(4, 64 * MB, ops) is None
    pr = FO.plan_for_ops(4, 64 * MB, ops, rail_bytes=nb)
    assert pr[1] == 0.4 and FO._plan_ops(4, 64 * MB, pr)[2] == nb
    # 32 + 31 at a share of 0.93: the ops give the middle of their range, the bytes the share
    ops, _, nb = FO._plan_ops(4, 64 * MB, (0.372, 0.4))
    mid = FO.plan_for_ops(4, 64 * MB, ops)
    pr = FO.plan_for_ops(4, 64 * MB, ops, rail_bytes=nb)
    assert FO._plan_ops(4, 64 * MB, pr)[2] == nb and FO._plan_ops(4, 64 * MB, mid)[2] != nb
    # the lab's headers (64 B a rank and channel) do not move the reading
    ph = FO.plan_for_ops(4, 64 * MB, ops, rail_bytes=(nb[0] + 256, nb[1] + 256))
    assert FO._plan_ops(4, 64 * MB, ph)[2] == nb
    # even bytes: the planner's own plan
    assert FO.plan_for_ops(4, 64 * MB, even_ops, rail_bytes=even_b) is None
    # bytes no plan with those ops has
    with pytest.raises(ValueError):
        FO.plan_for_ops(4, 64 * MB, even_ops, rail_bytes=(nb[0] - 40 * MB, nb[1]))


def test_model_side_replays_the_bytes_of_the_hit_call(tmp_path):
    # the hit call: ops as the even plan's (386 a rank and rail), bytes as a 0.94 share's
    ops, _, nb = FO._plan_ops(4, 64 * MB, (0.376, 0.4))
    row = _run(hit_ops=(ops[0] // 4, ops[1] // 4), cut_c=0.45)
    done = (300, 386)  # ops done a rank at the end of the main run (rail 0 cut)
    for rt in row["raw"]["rank_traces"]:
        for ch in rt["traces"][3][1]:
            b = nb[ch[0]] // 4
            ch += [b * done[ch[0]] // 386, b]
    path = tmp_path / "run.json"
    path.write_text(json.dumps([row]))
    kw = dict(timeout=0.06, vote=0.005)
    (r,), (sm,) = FO.same_call(str(path), [0.4, 0.4], 4, **kw)
    assert r["symmetric"] and not r["even"] and r["plan_matched"] and sm["even"] == 0
    pr = FO.plan_for_ops(4, 64 * MB, ops, rail_bytes=nb)
    assert r["sim_plan_rates"] == pytest.approx(pr)
    L = FO._rail_last(4, (0.4, 0.4), pr, 64 * MB, 1, 0.0, 1 << 20)
    assert r["sim_T2_ms"] == pytest.approx(L * 1e3)
    p = FO.predict(4, [0.4, 0.4], 64 * MB, 1, 0, 0.45 * L, plan_rates=pr, **kw)
    assert r["sim_lost"] == p["unfinished"]
    assert r["sim_extra_2x_ms"] == pytest.approx(
        (p["took_ms"] - FO._ideal(0.45 * L * 1e3, L * 1e3, 2 * L * 1e3)) / L)
    # plan="ops" (session 30's reading): the even plan for it
    (r0,), _ = FO.same_call(str(path), [0.4, 0.4], 4, plan="ops", **kw)
    assert r0["sim_plan_rates"] is None and r0["even"]
    assert r0["sim_extra_2x_ms"] != pytest.approx(r["sim_extra_2x_ms"])
    # no finish times in this synthetic call: no bytes at the cut, no bytes placement
    assert r["sim_extra_bytes_ms"] != r["sim_extra_bytes_ms"]


def test_model_places_the_cut_where_its_rail_has_moved_the_labs_bytes(tmp_path):
    fb = _bench()
    row = _run()
    skew = (0.0, 0.004, 0.002, 0.001)
    for r, rt in enumerate(row["raw"]["rank_traces"]):
        rec, _ = fb.call_record({"t0": rt["traces"][3][0],
                                 "ops": _hit_ops(max(skew) - skew[r])})
        rt["traces"][3] = rec
    path = tmp_path / "run.json"
    path.write_text(json.dumps([row]))
    kw = dict(timeout=0.06, vote=0.005)
    (r,), _ = FO.same_call(str(path), [0.4, 0.4], 4, **kw)
    # rail 0 had moved 7 of its 30 ops' bytes at the cut
    assert r["lab_dead_bytes_progress"] == pytest.approx(7 / 30)
    t, cum = FO._rail_finishes(4, (0.4, 0.4), None, 64 * MB, 0, 0.0, 1 << 20)
    tb = FO.time_at_bytes(4, (0.4, 0.4), None, 64 * MB, 0, 7 / 30)
    m = int((cum <= 7 / 30 + 1e-9).sum())
    assert cum[m - 1] <= 7 / 30 < cum[m] and tb == pytest.approx((t[m - 1] + t[m]) / 2)
    t2 = r["sim_T2_ms"] / 1e3
    assert r["sim_share_bytes"] == pytest.approx(tb / t2)
    p = FO.predict(4, [0.4, 0.4], 64 * MB, 1, 0, tb, **kw)
    assert r["sim_lost_bytes"] == p["unfinished"]
    assert r["sim_extra_bytes_ms"] == pytest.approx(
        (p["took_ms"] - FO._ideal(tb * 1e3, t2 * 1e3, 2 * t2 * 1e3)) / t2)
