"""Permutation test (20000 shuffles) of the median difference between two trees, on 1st/opt,
1st ms and opt ms; and misses by rep (rep 0 = a bench invocation's first job).
    python stats.py"""
import glob
import os
import random
import statistics as st

D = os.path.dirname(os.path.abspath(__file__))
rows = {}
for f in sorted(glob.glob(os.path.join(D, "r*-*-*-*.txt"))):
    tree = os.path.basename(f).split("-")[2]
    for ln in open(f):
        if ln.startswith("auto"):
            c = ln.split()
            rows.setdefault(tree, []).append(dict(rep=int(c[1]), r=float(c[8]), ms1=float(c[5]),
                                                  opt=float(c[7])))


def perm(a, b, n=20000, seed=1):
    d0 = abs(st.median(a) - st.median(b))
    pool, k, rnd, hit = a + b, len(a), random.Random(seed), 0
    for _ in range(n):
        rnd.shuffle(pool)
        hit += abs(st.median(pool[:k]) - st.median(pool[k:])) >= d0
    return hit / n


for t in ("spare", "after"):
    for key in ("r", "ms1", "opt"):
        a, b = [x[key] for x in rows["base"]], [x[key] for x in rows[t]]
        print(f"base vs {t} {key}: medians {st.median(a):.3f} {st.median(b):.3f}, p = {perm(a, b):.2f}")
for t, rs in rows.items():
    for rep in (0, 1):
        sel = [x for x in rs if x["rep"] == rep]
        print(f"{t} rep {rep}: {sum(x['r'] > 1.05 for x in sel)} of {len(sel)} > 1.05")
