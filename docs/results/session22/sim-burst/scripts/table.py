"""nezha-all rows of `nezha sim lab --json` outputs, before and after, side by side: the
tbf replay (the default prediction) against the bench's row, and the flat one (no buckets).
usage: table.py RUN BEFORE.json AFTER.json ...  (RUN: a label; one triple per run)"""
import json
import sys

a = sys.argv[1:]
for k in range(0, len(a), 3):
    name, before, after = a[k:k + 3]
    rb, ra = ([r for r in json.load(open(p))["rows"] if r["system"] == "nezha-all"]
              for p in (before, after))
    for label, rows, key in (("before tbf", rb, "replay_tbf_pct"), ("after tbf", ra, "replay_tbf_pct"),
                             ("flat", ra, "replay_pct")):
        miss = [r["nbytes"] >> 10 for r in rows if abs(r[key]) > 10]
        print(f"{name:<8} {label:<11}" + " ".join(f"{r[key]:+6.1f}" for r in rows)
              + f"   misses (KiB): {miss or 'none'}")
        if label != "flat" and any(r.get("span_us") for r in rows):
            print(f"{'':<8} {'  vs span':<11}" + " ".join(f"{r[key.replace('_pct', '_vs_span_pct')]:+6.1f}" for r in rows))
