"""Frames on host 0's rail0 (sniff.py output): count per direction and TCP payload size,
per call (CALLS = warm-up + timed calls the capture saw). usage: frames.py FILE CALLS"""
import collections, sys

rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
calls = int(sys.argv[2])
c = collections.Counter(("out" if r[1] == "4" else "in", int(r[7])) for r in rows)
print(f"{sys.argv[1]}: {len(rows)} frames; per call (of {calls}), payload bytes: frames")
for (d, n), k in sorted(c.items(), key=lambda x: (x[0][0], -x[1])):
    if k >= calls // 10:
        print(f"  {d:>3} {n:>6} B: {k / calls:.2f}")
