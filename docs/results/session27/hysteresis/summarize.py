"""Per job and per (tree, condition) of run.sh: the first 16 MiB allreduce against the job's
learned optimum (median of calls 10..19, bench/first_collective.py) and against a reference
optimum (REF: the median over h31's back-to-back jobs of their calls 20..39), the whole job
(mean and median of its 40 calls, median of calls 20..39), rail0's share at the last call and
how often the split changed during the job.
    python summarize.py /tmp/h31/hy/*.json"""
import json
import statistics as st
import sys
from collections import defaultdict

jobs = []
for path in sys.argv[1:]:
    d = json.load(open(path))
    tag = path.rsplit("/", 1)[-1][:-5]          # TAG-round-tree-cond
    _, rnd, tree, cond = tag.split("-")
    for r in d["runs"]:
        ms = [x["ms"] for x in r["rows"]]
        sh = [round(x["shares"].get("rail0", 0), 5) for x in r["rows"]]
        jobs.append(dict(tag=tag, tree=tree, cond=cond, rep=r["rep"], ms=ms, first=ms[0],
                         opt=r["opt_ms"], ratio=r["ratio"], mean=st.mean(ms),
                         med=st.median(ms), late=st.median(ms[20:]), last=sh[-1],
                         moves=sum(a != b for a, b in zip(sh, sh[1:])), first_sh=sh[0], sh=sh))
ref_jobs = [j["late"] for j in jobs if j["tree"] == "h31" and j["cond"] == "g0"]
REF = st.median(ref_jobs) if ref_jobs else st.median(j["late"] for j in jobs)
print(f"REF (median of calls 20..39 over h31's back-to-back jobs) = {REF:.1f} ms\n")
print(f"{'tag':<16}{'rep':>3}{'1st':>7}{'opt':>7}{'1st/opt':>8}{'1st/REF':>8}{'c2':>7}{'c3':>7}"
      f"{'mean':>7}{'median':>7}{'c20-39':>7}{'split1':>7}{'split40':>8}{'moves':>6}")
for j in jobs:
    print(f"{j['tag']:<16}{j['rep']:>3}{j['first']:>7.1f}{j['opt']:>7.1f}{j['ratio']:>8.3f}"
          f"{j['first'] / REF:>8.3f}{j['ms'][1]:>7.1f}{j['ms'][2]:>7.1f}{j['mean']:>7.1f}"
          f"{j['med']:>7.1f}{j['late']:>7.1f}{100 * j['first_sh']:>7.2f}{100 * j['last']:>8.2f}"
          f"{j['moves']:>6}")
agg = defaultdict(list)
for j in jobs:
    agg[(j["cond"], j["tree"])].append(j)
print(f"\n{'cond':<6}{'tree':<6}{'n':>3}{'1st/opt':>9}{'>1.05':>6}{'1st/REF':>9}{'>1.05':>6}"
      f"{'job mean':>9}{'job med':>8}{'c20-39':>8}{'split40 median [min-max]':>27}")
for (cond, tree), js in sorted(agg.items()):
    m = lambda k: st.median(j[k] for j in js)
    last = sorted(100 * j["last"] for j in js)
    print(f"{cond:<6}{tree:<6}{len(js):>3}{m('ratio'):>9.3f}{sum(j['ratio'] > 1.05 for j in js):>6}"
          f"{st.median(j['first'] / REF for j in js):>9.3f}"
          f"{sum(j['first'] / REF > 1.05 for j in js):>6}{m('mean'):>9.1f}{m('med'):>8.1f}"
          f"{m('late'):>8.1f}{st.median(last):>12.2f} [{last[0]:.2f}-{last[-1]:.2f}]")

print("\nPer call (c0 = the first), median over the jobs of each (condition, tree): ms, rail0's share")
print(f"{'cond':<6}{'tree':<6}" + "".join(f"{f'c{lo}-{hi - 1}' if hi - lo > 1 else f'c{lo}':>16}"
                                      for lo, hi in ((0, 1), (1, 2), (2, 3), (3, 5), (5, 10),
                                                     (10, 20), (20, 40))))
for (cond, tree), js in sorted(agg.items()):
    cells = []
    for lo, hi in ((0, 1), (1, 2), (2, 3), (3, 5), (5, 10), (10, 20), (20, 40)):
        t = st.median(st.mean(j["ms"][lo:hi]) for j in js)
        s = st.median(st.mean(j["sh"][lo:hi]) for j in js)
        cells.append(f"{t:.1f} {100 * s:.2f}%")
    print(f"{cond:<6}{tree:<6}" + "".join(f"{c:>16}" for c in cells))

print("\nEvery job (both trees, every condition) by the split it ended at: calls 20..39")
bins = [(0, 79.0), (79.0, 79.6), (79.6, 79.75), (79.75, 79.9), (79.9, 80.2), (80.2, 100)]
print(f"{'rail0 share %':<16}{'jobs h31':>9}{'jobs main':>10}{'c20-39 median ms':>18}{'[min-max]':>16}")
for lo, hi in bins:
    js = [j for j in jobs if lo <= 100 * j["last"] < hi]
    if js:
        late = sorted(j["late"] for j in js)
        print(f"{f'{lo:.2f}-{hi:.2f}':<16}{sum(j['tree'] == 'h31' for j in js):>9}"
              f"{sum(j['tree'] == 'main' for j in js):>10}{st.median(late):>18.1f}"
              f"{f'[{late[0]:.1f}-{late[-1]:.1f}]':>16}")
