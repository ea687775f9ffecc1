"""Pool the same-call readings (nezha sim failover FILE --same-call; T1 = 2 T2) of session
30's four 64 MiB runs and session 31's, per mode:
  - every cut, the model replaying each hit call's own plan: from the bytes per rail where
    the file has them (session 31's runs), else from the ops (the issue's reading),
  - the even-split cuts (by bytes where known) and the uneven ones,
  - on session 31's runs alone, what the bytes changed: the plan from the ops alone
    (plan="ops", session 30's reading) against the plan from the bytes, and the model's cut
    placed where its cut rail had moved the lab's bytes at the cut (sim_extra_bytes_ms)
    instead of at the same share of the call's time.
"cuts to decide": cuts for the 95 % interval of lab - model to clear the 10 % bound at this
mean and sd, (1.96 sd / | bound - |mean| |)^2.
    PYTHONPATH=/work/h55 python pool.py OLD_FILE... -- NEW_FILE...
"""
import math
import statistics
import sys

from nezha.sim import failover as FO
from nezha.sim import failstats as FS

KW = dict(timeout=0.06, vote=5e-3, detect="silence", heartbeat=0.01, phase_q=None,
          phase_silence=True, resend=True)  # `nezha sim failover`'s defaults
HEAD = ("| reading (T1 = 2 T2) | cuts | lab extra, mean ± 95 % (ms) | model (ms) | mean error "
        "| lab − model ± 95 % (ms) | verdict | cuts to decide | lost slices lab = model |\n"
        "|---|---|---|---|---|---|---|---|---|")


def decide(v):
    gap = abs(v["bound"] - abs(v["mean"]))
    return math.ceil((1.96 * v["sd"] / gap) ** 2) if gap else float("inf")


def line(name, sel, key="sim_extra_2x_ms", lost="sim_lost"):
    sel = [r for r in sel if r[key] == r[key]]
    lab = [r["lab_extra_2x_ms"] for r in sel]
    sim = [r[key] for r in sel]
    if len(lab) < 2:
        print(f"| {name} | {len(lab)} | – | – | – | – | – | – | – |")
        return
    v = FS.verdict(lab, sim)
    s = FS.summary(lab)
    same = sum(r["lab_lost"] == r[lost] for r in sel)
    print(f"| {name} | {len(lab)} | {s['mean']:.1f} ± {s['ci95']:.1f} | {statistics.fmean(sim):.1f} "
          f"| {v['error_pct']:+.1f} % | {v['mean']:+.1f} ± {v['ci95']:.1f} "
          f"(bound ±{v['bound']:.1f}) | **{v['verdict']}** | {decide(v)} | {same}/{len(sel)} |")


def read(path, new):
    got, summ = FO.same_call(path, [0.4, 0.4], 4, **KW)
    old, _ = FO.same_call(path, [0.4, 0.4], 4, plan="ops", **KW)
    for r, o in zip(got, old):
        assert (r["mode"], r["cut"]) == (o["mode"], o["cut"])
        r.update(file=path, new=new, sim_ops_2x_ms=o["sim_extra_2x_ms"],
                 sim_lost_ops=o["sim_lost"], even_ops=o["even"], ops_matched=o["plan_matched"])
    for s in summ:
        print(f"# {path} {s['mode']}: cuts {s['cuts']}, even by ops {s['symmetric']}, "
              f"even {s['even']}, plan not matched {s['plan_unmatched']}")
    return got


args = sys.argv[1:]
cut = args.index("--")
rows = [r for p in args[:cut] for r in read(p, False)] + \
       [r for p in args[cut + 1:] for r in read(p, True)]
print("\n## Every run pooled (session 30's four + session 31's)\n")
print(HEAD)
for mode in ("down", "blackhole"):
    sel = [r for r in rows if r["mode"] == mode and r["plan_matched"]]
    if not sel:
        continue
    line(f"{mode}, every cut, own plan", sel)
    line(f"{mode}, even split", [r for r in sel if r["even"]])
    line(f"{mode}, uneven plan, own plan", [r for r in sel if not r["even"]])
    old = [r for r in rows if r["mode"] == mode]
    line(f"{mode}, every cut, plan from the ops alone (session 30's reading)",
         [r for r in old if r["ops_matched"]], "sim_ops_2x_ms", "sim_lost_ops")
print("\n## Session 31's runs alone: what the bytes per rail change\n")
print(HEAD)
for mode in ("down", "blackhole"):
    sel = [r for r in rows if r["mode"] == mode and r["new"] and r["plan_matched"]]
    if not sel:
        continue
    line(f"{mode}, every cut, plan from the ops (s30)", sel, "sim_ops_2x_ms", "sim_lost_ops")
    line(f"{mode}, every cut, plan from the bytes", sel)
    line(f"{mode}, every cut, plan from the bytes, cut at the lab's bytes", sel,
         "sim_extra_bytes_ms", "sim_lost_bytes")
    un = [r for r in sel if not r["even"]]
    line(f"{mode}, uneven, plan from the ops (s30)", un, "sim_ops_2x_ms", "sim_lost_ops")
    line(f"{mode}, uneven, plan from the bytes", un)
    line(f"{mode}, uneven, plan from the bytes, cut at the lab's bytes", un,
         "sim_extra_bytes_ms", "sim_lost_bytes")
    ev = [r for r in sel if r["even"]]
    line(f"{mode}, even, cut at the time share", ev)
    line(f"{mode}, even, cut at the lab's bytes", ev, "sim_extra_bytes_ms", "sim_lost_bytes")
    hid = [r for r in sel if r["even_ops"] and not r["even"]]
    print(f"| {mode}: even by ops but uneven by bytes | {len(hid)} of "
          f"{sum(r['even_ops'] for r in sel)} | | | | | | | |")
print("\n## Per file, every cut, own plan\n")
print("| file | mode | cuts | lab − model ± 95 % (ms) | mean error |")
print("|---|---|---|---|---|")
for path in dict.fromkeys(r["file"] for r in rows):
    for mode in ("down", "blackhole"):
        sel = [r for r in rows if r["file"] == path and r["mode"] == mode and r["plan_matched"]]
        if len(sel) > 1:
            v = FS.verdict([r["lab_extra_2x_ms"] for r in sel], [r["sim_extra_2x_ms"] for r in sel])
            print(f"| {path.split('/')[-1]} | {mode} | {len(sel)} | {v['mean']:+.1f} ± "
                  f"{v['ci95']:.1f} | {v['error_pct']:+.1f} % |")
print("\n## Per cut, (lab − model) / model, every cut, own plan\n")
print("| mode | cuts | median | mean ± 95 % | share within ±10 % |")
print("|---|---|---|---|---|")
for mode in ("down", "blackhole"):
    sel = [r for r in rows if r["mode"] == mode and r["plan_matched"]]
    rel = [(r["lab_extra_2x_ms"] - r["sim_extra_2x_ms"]) / abs(r["sim_extra_2x_ms"])
           for r in sel if abs(r["sim_extra_2x_ms"]) > 1.0]
    if len(rel) > 1:
        s = FS.summary(rel)
        print(f"| {mode} | {len(rel)} | {100 * statistics.median(rel):+.1f} % | "
              f"{100 * s['mean']:+.1f} ± {100 * s['ci95']:.1f} % | "
              f"{sum(abs(x) <= 0.10 for x in rel)}/{len(rel)} |")
