"""Per job: 1st/opt, calls 1-3 ms, optimum, init, probe; CPU kinds in calls 1-3 vs 10-19;
then per condition (the tag's last part) rep 0 against reps 1-2.
    python summarize.py /tmp/h30/fj/*.json"""
import json
import statistics as st
import sys
from collections import defaultdict

agg = defaultdict(lambda: defaultdict(list))
print(f"{'tag':<14}{'rep':>3}{'1st/opt':>8}{'c1':>7}{'c2':>7}{'c3':>7}{'opt':>7}{'init':>6}"
      f"{'probe%':>7}{'learn%':>7}{'gapMiB':>7}{'rMiB1-3':>8}  cpu c1-3 (idle/steal/softirq/proc ms per call) | c10-19  metrics")
for path in sys.argv[1:]:
    d = json.load(open(path))
    tag = path.rsplit("/", 1)[-1][:-5]
    for r in d["runs"]:
        ms = [x["ms"] for x in r["rows"]]
        pr = r["probe"]["mbps"]
        psp = 100 * pr["rail0"] / sum(pr.values())
        lsp = 100 * r["opt_split"]["rail0"]

        def cpu(rows):
            if "cpu" not in rows[0]:
                return ""
            f = lambda k: st.mean(x["cpu"][k] for x in rows)
            return (f"{f('idle'):4.0f}/{f('steal'):3.0f}/{f('softirq'):3.0f}/"
                    f"{f('proc_user') + f('proc_sys'):4.0f}")
        gap = r.get("gap_reported_kib")
        gap = f"{gap / 1024:7.0f}" if gap is not None else f"{'':7}"
        rc = [x.get("cpu", {}).get("reported_kib") for x in r["rows"][:3]]
        rc = f"{sum(rc) / 1024:8.0f}" if None not in rc else f"{'':8}"
        met = r.get("tcp_metrics")
        nmet = "/".join(str(len(met[h].splitlines())) for h in sorted(met)) if met else ""
        print(f"{tag:<14}{r['rep']:>3}{r['ratio']:>8.3f}{ms[0]:>7.1f}{ms[1]:>7.1f}{ms[2]:>7.1f}"
              f"{r['opt_ms']:>7.1f}{r['init_ms']:>6.0f}{psp:>7.1f}{lsp:>7.1f}{gap}{rc}  "
              f"{cpu(r['rows'][:3])} | {cpu(r['rows'][10:20])}  {nmet}")
        cond = tag.rsplit("-", 1)[-1]
        g = agg[cond]["rep0" if r["rep"] == 0 else "rep1+"]
        g.append((r["ratio"], st.mean(ms[:3]) / r["opt_ms"], r["opt_ms"]))
print()
print(f"{'cond':<6}{'jobs':>10}{'n':>4}{'med 1st/opt':>12}{'> 1.05':>7}{'mean c1-3/opt':>14}"
      f"{'med opt ms':>11}")
for cond in sorted(agg):
    for k in ("rep0", "rep1+"):
        v = agg[cond][k]
        if v:
            print(f"{cond:<6}{k:>10}{len(v):>4}{st.median(x[0] for x in v):>12.3f}"
                  f"{sum(x[0] > 1.05 for x in v):>7}{st.mean(x[1] for x in v):>14.3f}"
                  f"{st.median(x[2] for x in v):>11.1f}")
