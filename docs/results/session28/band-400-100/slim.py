"""compare.json -> summary.json (the summary, nezha's algorithm per system and size): the full
file is not kept. usage: python slim.py /tmp/h39/diag-u1 diag-u1"""
import json
import sys

src, dst = sys.argv[1:3]
d = json.load(open(f"{src}/compare.json"))
algos = {}
for rec in d["runs"]:
    if rec.get("doc") and rec["system"].startswith("nezha"):
        for r in rec["doc"]["results"]:
            a = algos.setdefault(rec["system"], {}).setdefault(rec["collective"], {})
            a.setdefault(str(r["size"]), [])
            if (r.get("algorithm") or "?") not in a[str(r["size"])]:
                a[str(r["size"])].append(r.get("algorithm") or "?")
json.dump({"command": d["command"], "tree": d["tree"], "summary": d["summary"],
           "nezha_algorithms": algos}, open(f"{dst}/summary.json", "w"), indent=0)
