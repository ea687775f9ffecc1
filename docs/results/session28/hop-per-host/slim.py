#!/usr/bin/env python3
"""Shrinks ranks_per_host.py JSON records in place: every run keeps its system, repetition,
return code, nezha's probe stats and per-size results (without per-call samples)."""
import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    runs = []
    for r in d["runs"]:
        s = {k: r.get(k) for k in ("system", "collective", "rep", "order", "returncode", "timed_out", "wall_s", "loadavg_before", "loadavg_after")}
        doc = r.get("doc") or {}
        if doc:
            s["probe"] = (doc.get("stats") or {}).get("probe")
            s["results"] = [{k: v for k, v in x.items() if k not in ("samples_us", "rank_calls")} for x in doc.get("results", [])]
        runs.append(s)
    d["runs"] = runs
    json.dump(d, open(f, "w"), indent=0)
