"""Pool the same-call readings (nezha sim failover FILE --same-call) of several
bench/failover.py runs per mode, T1 = 2 T2 (no reference from other calls): the paired
verdict (failstats.verdict) of lab vs model over
  - every cut, the model replaying each hit call's own plan (its ops per rail in the trace,
    failover.plan_for_ops): the issue's reading,
  - the even-split cuts (the ones session 30's first look could use),
  - the uneven-plan cuts alone,
  - every cut with the even split for all (plan=False: the old model input), for contrast.
Also a per-cut relative reading (lab - model over the model, per cut) for the mix, since
the uneven cuts' extras (~100 ms) raise the every-cut mean and with it the 10 % bound.
    PYTHONPATH=/work/h50 python pool.py FILE...
"""
import statistics
import sys

from nezha.sim import failover as FO
from nezha.sim import failstats as FS

KW = dict(timeout=0.06, vote=5e-3, detect="silence", heartbeat=0.01, phase_q=None,
          phase_silence=True, resend=True)  # `nezha sim failover`'s defaults


def line(name, sel, key="sim_extra_2x_ms"):
    lab = [r["lab_extra_2x_ms"] for r in sel]
    sim = [r[key] for r in sel]
    if len(lab) < 2:
        print(f"| {name} | {len(lab)} | – | – | – | – | – | – | – |")
        return
    v = FS.verdict(lab, sim)
    s = FS.summary(lab)
    need = FO._paired_need(v, sim)
    lost = sum(r["lab_lost"] == r["sim_lost" if key == "sim_extra_2x_ms" else "sim_lost0"]
               for r in sel)
    print(f"| {name} | {len(lab)} | {s['mean']:.1f} ± {s['ci95']:.1f} | {statistics.fmean(sim):.1f} "
          f"| {v['error_pct']:+.1f} % | {v['mean']:+.1f} ± {v['ci95']:.1f} "
          f"(bound ±{v['bound']:.1f}) | **{v['verdict']}** | {need} | {lost}/{len(sel)} |")


rows = []
for path in sys.argv[1:]:
    got, summ = FO.same_call(path, [0.4, 0.4], 4, **KW)
    old, _ = FO.same_call(path, [0.4, 0.4], 4, plan=False, **KW)
    for r, o in zip(got, old):
        assert (r["mode"], r["cut"]) == (o["mode"], o["cut"])
        r["file"] = path
        r["sim_even_2x_ms"] = o["sim_extra_2x_ms"]
        r["sim_lost0"] = o["sim_lost"]
        rows.append(r)
    for s in summ:
        print(f"# {path} {s['mode']}: cuts {s['cuts']}, even {s['symmetric']}, "
              f"plan not matched {s['plan_unmatched']}")
print("| reading (T1 = 2 T2) | cuts | lab extra, mean ± 95 % (ms) | model (ms) | mean error "
      "| lab − model ± 95 % (ms) | verdict | cuts for a paired 10 % | lost slices lab = model |")
print("|---|---|---|---|---|---|---|---|---|")
for mode in ("down", "blackhole"):
    sel = [r for r in rows if r["mode"] == mode and r["plan_matched"]]
    if not sel:
        continue
    line(f"{mode}, every cut, own plan", sel)
    line(f"{mode}, even split", [r for r in sel if r["symmetric"]])
    line(f"{mode}, uneven plan, own plan", [r for r in sel if not r["symmetric"]])
    line(f"{mode}, every cut, even plan for all (old)", sel, "sim_even_2x_ms")
print()
print("| mode | cuts | per-cut (lab − model) / model: median | mean ± 95 % | "
      "share of cuts within ±10 % |")
print("|---|---|---|---|---|")
for mode in ("down", "blackhole"):
    sel = [r for r in rows if r["mode"] == mode and r["plan_matched"]]
    rel = [(r["lab_extra_2x_ms"] - r["sim_extra_2x_ms"]) / abs(r["sim_extra_2x_ms"])
           for r in sel if abs(r["sim_extra_2x_ms"]) > 1.0]
    s = FS.summary(rel)
    print(f"| {mode} | {len(rel)} | {100 * statistics.median(rel):+.1f} % | "
          f"{100 * s['mean']:+.1f} ± {100 * s['ci95']:.1f} % | "
          f"{sum(abs(x) <= 0.10 for x in rel)}/{len(rel)} |")
