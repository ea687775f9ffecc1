"""Per repetition (each its own job and start-up): the plan it ran (its start-up measure
replayed through the planner of the tree on PYTHONPATH, as plans.py) and its time, grouped by
plan: does a plan the measured slice picks run faster than the one the constant picks?
argv: OUTDIR TAG... ; prints 'tag coll size plan us step slice' lines (slowest rank's mean
as compare's avg_us)."""
import gzip
import json
import sys


sys.path.insert(0, __file__.rsplit("/", 1)[0])
from plans import planner_of, shape  # noqa: E402

top = sys.argv[1]
for tag in sys.argv[2:]:
    d = json.load(gzip.open(f"{top}/ab-{tag}/compare.json.gz"))
    for r in d["runs"]:
        if r.get("system") != "nezha-all":
            continue
        p, st = planner_of(r)
        coll = r["collective"]
        for res in r["doc"]["results"]:
            n = res["nbytes"]
            plan = shape(p, coll, n * (4 if coll == "allgather" else 1))
            print(tag, coll, n >> 10, plan, round(res["avg_us"], 1), st["alpha_us"],
                  (st.get("slice") or {}).get("steps", "-"))
