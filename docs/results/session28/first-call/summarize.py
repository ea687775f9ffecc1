"""Summarize first_collective.py JSONs named TAG-K-COND-GAP.json: per (COND, GAP) the
median of 1st/opt (opt = median of calls 10..19 of the same job), jobs over 1.05, call 1
and calls 2-5 (medians over jobs), calls 20-39, rail0 share at calls 1, 2, 5 and 40, and
call 1's THP / minor faults (rank 0's machine-wide THP faults, its own minor faults).
    python summarize.py /tmp/h36/fc/*.json [--jobs]"""
import collections
import json
import os
import statistics as st
import sys

med = st.median
groups = collections.defaultdict(list)
for path in sys.argv[1:]:
    if not path.endswith(".json"):
        continue
    tag = os.path.basename(path)[:-5].split("-")
    cond = "-".join(tag[2:])
    for run in json.load(open(path))["runs"]:
        rows = run["rows"]
        ms = [r["ms"] for r in rows]
        share = [100 * r["shares"]["rail0"] / sum(r["shares"].values()) for r in rows]
        cpu = rows[0].get("cpu", {})
        groups[cond].append(dict(file=os.path.basename(path), rep=run["rep"],
                                 ratio=run["ratio"], opt=run["opt_ms"], ms=ms, share=share,
                                 probe=run["probe"], thp=cpu.get("thp_fault_alloc"),
                                 init=run["init_ms"],
                                 minflt=cpu.get("minflt")))
ref_jobs = [j for c, js in groups.items() if c.startswith("h36-g0") for j in js]
ref = med(x for j in ref_jobs for x in j["ms"][20:40]) if ref_jobs else None
print(f"REF (median of calls 20-39 over h36-g0 jobs) = {ref and round(ref, 1)} ms")
print(f"{'cond':<12}{'jobs':>5}{'1st/opt':>9}{'>1.05':>6}{'1st/REF':>8}{'call1':>7}"
      f"{'call2':>7}{'call3':>7}{'call4':>7}{'call5':>7}{'20-39':>7}  rail0 % at call 1 / 2 / 5 / 40"
      f"  [call 40 min-max]  call-1 THP, minflt  init ms")
for cond, js in sorted(groups.items()):
    c = lambda i: med(j["ms"][i] for j in js)  # noqa: E731
    sh = lambda i: med(j["share"][i] for j in js)  # noqa: E731
    thp = [j["thp"] for j in js if j["thp"] is not None]
    mf = [j["minflt"] for j in js if j["minflt"] is not None]
    print(f"{cond:<12}{len(js):>5}{med(j['ratio'] for j in js):>9.3f}"
          f"{sum(j['ratio'] > 1.05 for j in js):>6}"
          f"{(c(0) / ref if ref else 0):>8.3f}{c(0):>7.1f}{c(1):>7.1f}{c(2):>7.1f}{c(3):>7.1f}"
          f"{c(4):>7.1f}{med(x for j in js for x in j['ms'][20:40]):>7.1f}  "
          f"{sh(0):.2f} / {sh(1):.2f} / {sh(4):.2f} / {sh(39):.2f}"
          f"  [{min(j['share'][39] for j in js):.2f}-{max(j['share'][39] for j in js):.2f}]"
          f"  {med(thp) if thp else '-'}, {med(mf) if mf else '-'}"
          f"  {med(j['init'] for j in js):.0f}")
if "--jobs" in sys.argv:
    for cond, js in sorted(groups.items()):
        for j in js:
            print(f"{j['file']:<22}{j['rep']:>2} 1st/opt {j['ratio']:.3f} opt {j['opt']:.1f} "
                  f"calls1-5 {' '.join(f'{x:.0f}' for x in j['ms'][:5])} "
                  f"split1/2/5/40 {j['share'][0]:.2f}/{j['share'][1]:.2f}/{j['share'][4]:.2f}/"
                  f"{j['share'][39]:.2f} thp {j['thp']} minflt {j['minflt']}")
