"""Per tree: 1st/opt sorted, median, worst, count > 1.05, and the optimum (calls 10..19) and
the 2nd call (a job-level transient shows there too; the probe's prior rules call 1 only:
the first sync measures every channel's overall rate, CostModel.prior) from the *.txt files.
    python summarize.py [ROUND...]   (default: every round)"""
import glob
import os
import statistics as st
import sys

D = os.path.dirname(os.path.abspath(__file__))
rounds = sys.argv[1:] or ["r"]
rows = {}
for f in sorted(glob.glob(os.path.join(D, "r*-*-*-*.txt"))):
    name = os.path.basename(f)[:-4]
    rnd, _, tree, _ = name.split("-")
    if not any(rnd.startswith(r) for r in rounds):
        continue
    for ln in open(f):
        if ln.startswith("auto"):
            c = ln.split()
            rows.setdefault(tree, []).append(dict(
                job=f"{name}/{c[1]}", probe=float(c[4][:-1]), first=float(c[9].split("/")[0]),
                learned=float(c[11].split("/")[0]), ms1=float(c[5]), ms2=float(c[6]),
                opt=float(c[7]), r=float(c[8])))
for tree in ("base", "spare", "after"):
    rs = rows.get(tree, [])
    if not rs:
        continue
    r = sorted(x["r"] for x in rs)
    r2 = [x["ms2"] / x["opt"] for x in rs]
    print(f"{tree}: {len(r)} jobs, 1st/opt median {st.median(r):.3f} worst {max(r):.3f} "
          f"> 1.05: {sum(x > 1.05 for x in r)}; opt ms median {st.median(x['opt'] for x in rs):.1f}"
          f"; 1st ms median {st.median(x['ms1'] for x in rs):.1f}; 2nd/opt > 1.03 (job-level "
          f"transient): {sum(x > 1.03 for x in r2)}; first split - probe split mean "
          f"{st.mean(x['first'] - x['probe'] for x in rs):+.2f}")
    print("   sorted: " + " ".join(f"{x:.3f}" for x in r))
    for x in rs:
        if x["r"] > 1.05:
            print(f"   > 1.05: {x['job']} 1st {x['ms1']} 2nd {x['ms2']} opt {x['opt']} "
                  f"split {x['first']} (probe {x['probe']}) -> {x['learned']}")
