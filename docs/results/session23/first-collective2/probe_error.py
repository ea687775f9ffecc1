"""The probe's split error against the optimum, per job: the probe's fast-rail share, the
first call's (hedged in 'after'), and the learned overall rates' share at the end of the
job (stats model rates_mbps: 79.74 +- 0.05 % in every job; the equal-finish split). Reads
run.sh's --json files (kept in /tmp/hB/fc, not here); writes probe_error.txt.
    python probe_error.py /tmp/hB/fc > probe_error.txt"""
import glob
import json
import os
import statistics as st
import sys

out = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "r*-*.json"))):
    tree = os.path.basename(f).split("-")[2]
    for r in json.load(open(f))["runs"]:
        pm, ra = r["probe"]["mbps"], r["rates"]
        p = 100 * pm["rail0"] / sum(pm.values())
        opt = 100 * ra["rail0"] / (ra["rail0"] + ra["rail1"])
        first = 100 * r["first_split"]["rail0"]
        print(f"{os.path.basename(f)[:-5]}/{r['rep']} probe {p:.2f} first {first:.2f} "
              f"optimum {opt:.2f} 1st/opt {r['ratio']:.3f}")
        out.setdefault(tree, []).append((p - opt, first - opt))
for tree, e in out.items():
    pe, fe = [x for x, _ in e], [y for _, y in e]
    print(f"# {tree}: {len(e)} jobs; probe - optimum mean {st.mean(pe):+.2f} sd {st.stdev(pe):.2f} "
          f"min {min(pe):+.2f} max {max(pe):+.2f}; first split - optimum mean {st.mean(fe):+.2f} "
          f"min {min(fe):+.2f} max {max(fe):+.2f}")
