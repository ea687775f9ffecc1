"""From a compare.json: per system and size, the call time (OSU avg), the loop period
(start to start of rank 0's timed calls, median) and what lies between calls (period - call:
the barrier and the loop's own work), and the rail0 bytes per call and rank those need.
usage: python periods.py OUT/compare.json [size ...]"""
import json, sys
import numpy as np

doc = json.load(open(sys.argv[1]))
want = {int(s) for s in sys.argv[2:]}
print(f"{'rep':>3} {'system':<14} {'size':>7} {'call us':>8} {'call p50':>8} {'period p50':>10} "
      f"{'between':>8} {'iters':>6}")
for rec in doc["runs"]:
    d = rec.get("doc")
    if not d:
        continue
    for r in d["results"]:
        if want and r["size"] not in want:
            continue
        rc = r.get("rank_calls")
        st = np.array(rc["start_us"][0]) if rc else None
        per = float(np.median(np.diff(st))) if st is not None and len(st) > 2 else float("nan")
        s = np.array(r["samples_us"])
        print(f"{rec['rep']:>3} {rec['system']:<14} {r['size']:>7} {r['avg_us']:8.1f} "
              f"{np.median(s):8.1f} {per:10.1f} {per - np.median(s):8.1f} {r['iterations']:>6}")
