from nezha.config import Config
from nezha.planner import layout_planner, ALGO_NAMES
for H, L in ((2, 4), (4, 2)):
    hosts = [r // L for r in range(H * L)]
    p = layout_planner(Config.load({}, environ={}), hosts, None, 2, failover=True)
    print(H, "x", L, "vote-ish rd8", p.layout.time("allreduce", "rd", 8, 1, rate=p.rail_rates[0]) * 1e6)
    for s in (4096, 16384, 65536, 131072, 262144, 1 << 20):
        t = p.flat_times("broadcast", s)
        print(s, ALGO_NAMES[p.algorithm("broadcast", s)], {k: round(v * 1e6) for k, v in t.items()}, "hier", round(p._hier_time("broadcast", s)))
