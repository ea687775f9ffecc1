import os, sys, json
sys.path.insert(0, os.environ['PYTHONPATH'])
from nezha.config import Config
from nezha.costmodel import alpha_of_small
from nezha.planner import layout_planner, ALGO_NAMES
for n in ("A1", "B1", "B2", "A2"):
    d = json.load(open(f"/tmp/h35/res3/4x1-{n}/compare.json"))
    st = next(r for r in d["runs"] if r["system"] == "nezha-all")["doc"]["stats"]["probe"]
    hosts = [0, 1, 2, 3]
    p = layout_planner(Config.load({}, environ={}), hosts, None, 2, 1, True)
    p.set_rail_rates(list(st["mbps"].values()), ring_payload=True)
    p.set_step_latency(st["step"]["alpha_us"] * 1e-6, "t"); p.set_hop_samples(st["step"]["hop"])
    print(n, json.dumps(p.switch_points("allreduce", hi=1 << 21)))
