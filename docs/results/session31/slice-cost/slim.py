"""Shrink bench compare's compare.json.gz in place to what table.py, plans.py and perrep.py
read (the summary; per run: system, collective, the start-up probe record and per-size
times): the full documents are ~3 MB each. argv: compare.json.gz files."""
import gzip
import json
import sys

for f in sys.argv[1:]:
    d = json.load(gzip.open(f))
    runs = [{"system": r.get("system"), "collective": r.get("collective"),
             "doc": {"stats": {"probe": ((r.get("doc") or {}).get("stats") or {}).get("probe")},
                     "results": [{k: x.get(k) for k in ("nbytes", "avg_us", "min_us", "max_us")}
                                 for x in (r.get("doc") or {}).get("results") or []]}}
            for r in d.get("runs") or [] if r.get("system") == "nezha-all"]
    out = {"command": d.get("command"), "summary": d["summary"], "runs": runs, "slim": True}
    with gzip.open(f, "wt") as g:
        json.dump(out, g)
