"""Pool the same-call readings of several bench/failover.py runs (nezha sim failover FILE
--same-call, per file) per mode: the paired verdict (failstats.verdict) of lab vs model
over every cut of the runs, for the T1 = 2 T2 reading (all cuts, and the cuts whose hit
call had the model's even split) and the reference reading where the run's one-rail calls
were traced (r21 from >= 5 one-rail and two-rail calls).
    PYTHONPATH=/work/h48 python pool.py FILE...
"""
import statistics
import sys

from nezha.sim import failover as FO
from nezha.sim import failstats as FS

KW = dict(timeout=0.06, vote=5e-3, detect="silence", heartbeat=0.01, phase_q=None,
          phase_silence=True, resend=True)  # `nezha sim failover`'s defaults


def line(name, lab, sim):
    v = FS.verdict(lab, sim)
    s = FS.summary(lab)
    need = FO._paired_need(v, sim)
    print(f"| {name} | {len(lab)} | {s['mean']:.1f} ± {s['ci95']:.1f} | {statistics.fmean(sim):.1f} "
          f"| {v['error_pct']:+.1f} % | {v['mean']:+.1f} ± {v['ci95']:.1f} "
          f"(bound ±{v['bound']:.1f}) | **{v['verdict']}** | {need} |")


rows = []
for path in sys.argv[1:]:
    got, summ = FO.same_call(path, [0.4, 0.4], 4, **KW)
    ok = {s["mode"]: s for s in summ}
    for r in got:
        r["file"] = path
        # the reference reading only where the run traced enough one-rail calls
        rows.append(r)
    for s in summ:
        print(f"# {path} {s['mode']}: r21 {s['r21']:.4f}, cuts {s['cuts']}, even {s['symmetric']}")
print("| reading | cuts | lab extra, mean ± 95 % (ms) | model (ms) | mean error | lab − model ± 95 % "
      "| verdict | cuts for a paired 10 % |")
print("|---|---|---|---|---|---|---|---|")
for mode in ("down", "blackhole"):
    sel = [r for r in rows if r["mode"] == mode]
    if not sel:
        continue
    line(f"{mode}, T1 = 2 T2, every cut", [r["lab_extra_2x_ms"] for r in sel],
         [r["sim_extra_2x_ms"] for r in sel])
    ev = [r for r in sel if r["symmetric"]]
    line(f"{mode}, T1 = 2 T2, even split", [r["lab_extra_2x_ms"] for r in ev],
         [r["sim_extra_2x_ms"] for r in ev])
    ref = [r for r in ev if 1.8 < r["r21"] < 2.2]
    if len(ref) > 1:
        line(f"{mode}, T1 = r21 T2 (runs with one-rail traces), even split",
             [r["lab_extra_ms"] for r in ref], [r["sim_extra_ms"] for r in ref])
    print(f"<!-- {mode}: lost slices lab = model in {sum(r['lab_lost'] == r['sim_lost'] for r in ev)}"
          f" of {len(ev)} even-split cuts, {sum(r['lab_lost'] == r['sim_lost'] for r in sel)} of "
          f"{len(sel)} in all -->")
