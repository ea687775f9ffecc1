# the switch point and the 400 + 100 choices after the change
from nezha.config import Config
from nezha.planner import Planner, ALGO_NAMES
for mbps in ([235.1, 235.1], [235.1, 58.8]):
    p = Planner(2, Config.load({}, environ={}), ["rail0","rail1"], 4)
    p.set_hosts([0,1,2,3]); p.set_rail_rates(mbps, ring_payload=True); p.set_step_latency(18.7e-6, "lab")
    p.set_hop_samples({"small_ns": 37403, "sizes": [4096, 16384, 65536], "ns": [112834, 628925, 2612764]})
    prev = None
    for nb in range(1024, 65537, 256):
        a = ALGO_NAMES[p.algorithm("reduce_scatter", nb)]
        k = p._rails_used(nb, "reduce_scatter", a)
        if (a, k) != prev: print(mbps, nb, a, k); prev = (a, k)
