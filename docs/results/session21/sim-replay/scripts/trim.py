"""A compare JSON small enough to keep (< 200 KB gzipped): every run's per-call samples_us
dropped, rank_calls kept from 64 KiB (what nezha sim lab and bench/rankskew.py read).
usage: trim.py IN.json OUT.json.gz"""
import gzip
import json
import sys

doc = json.load(open(sys.argv[1]))
for run in doc.get("runs") or []:
    for r in (run.get("doc") or {}).get("results") or []:
        r.pop("samples_us", None)
        if r.get("nbytes", 0) < 64 << 10:
            r.pop("rank_calls", None)
doc["trimmed"] = "samples_us dropped, rank_calls below 64 KiB dropped (scripts/trim.py)"
with gzip.open(sys.argv[2], "wt", compresslevel=9) as f:
    json.dump(doc, f)
