"""nezha-all rows of `nezha sim lab --json` outputs side by side: the replay with tbf
against the bench's row, the slowest rank and (runs with rank_calls) the span.
usage: table.py NAME=lab.json ...  (one file per model variant and run)"""
import json
import sys

for arg in sys.argv[1:]:
    name, path = arg.split("=", 1)
    rows = [r for r in json.load(open(path))["rows"] if r["system"] == "nezha-all"]
    miss = [r["nbytes"] >> 10 for r in rows if abs(r["replay_tbf_pct"]) > 10]
    print(f"{name:<22}" + " ".join(f"{r['replay_tbf_pct']:+6.1f}" for r in rows)
          + f"   misses (KiB): {miss or 'none'}")
    if any(r.get("span_us") == r.get("span_us") and r.get("span_us") for r in rows):
        print(f"{'  vs span':<22}" + " ".join(f"{r['replay_tbf_vs_span_pct']:+6.1f}" for r in rows))
