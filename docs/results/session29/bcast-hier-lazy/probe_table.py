"""probe-*.txt -> per label and size: mean / max over ranks of the time per call, votes, algorithm."""
import collections
import glob
import os

HERE = os.path.dirname(os.path.abspath(__file__))
for path in sorted(glob.glob(os.path.join(HERE, "probe-*.txt"))):
    rows = collections.defaultdict(list)
    for line in open(path):
        f = line.split()
        rows[(f[0], int(f[3]))].append((int(f[7]), int(f[9]), f[11]))
    print(f"\n{os.path.basename(path)}\n\n| run | size | mean us | max us | votes per rank | algorithm |\n|---|---:|---:|---:|---:|---|")
    for (label, size), v in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        t = [x for x, _, _ in v]
        print(f"| {label} | {size} | {sum(t) / len(t):.0f} | {max(t)} | {v[0][1]} | {v[0][2]} |")
