"""The uneven hit calls of session 31's runs: the planner share their bytes give
(plan_for_ops with rail_bytes) against the middle of the range their ops give (session 30's
reading). PYTHONPATH=/work/h55 python shares.py FILE..."""
import collections
import sys

from nezha.sim import failover as FO
from nezha.sim import failstats as FS

MB = 1 << 20
out = collections.Counter()
for path in sys.argv[1:]:
    for row in FO.bench_json(path):
        for c in FS.same_call(row):
            by_b = FO.plan_for_ops(4, row["size"], c["rail_ops"], rail_bytes=c["rail_bytes"])
            if by_b is None:
                continue
            by_o = FO.plan_for_ops(4, row["size"], c["rail_ops"])
            sl = FO._plan_ops(4, row["size"], by_b)[1]
            out[(row["mode"], sl, round(min(by_b) / 0.4, 3),
                 None if by_o is None else round(min(by_o) / 0.4, 3))] += 1
print("| mode | slices per rail | share from the bytes | share from the ops (s30) | cuts |")
print("|---|---|---|---|---|")
for (m, sl, b, o), n in sorted(out.items()):
    print(f"| {m} | {sl[0]} + {sl[1]} | {b} | {o if o is not None else 'even (none)'} | {n} |")
