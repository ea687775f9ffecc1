"""The switch table and rails used for fixed inputs (probe 245 Mbit/s, 245 + 61, step 64 us), 4 x 1; runs on main and on h24 (set_rail_rates without ring_payload on main). usage: PYTHONPATH=<tree> python sw.py"""
from nezha.config import Config
from nezha.planner import layout_planner
cfg = Config.load({}, environ={})
for mbps in ([245.0, 245.0], [245.0, 61.0]):
    p = layout_planner(cfg, [0, 1, 2, 3], None, 2, 1, True)
    try:
        p.set_rail_rates(mbps, ring_payload=True)
    except TypeError:
        p.set_rail_rates(mbps)
    p.set_step_latency(64e-6, "64 us")
    t = {c: {k: round(v / 1024, 1) for k, v in d.items()} for c, d in p.switch_table().items()}
    print(mbps, "KiB:", t, "| rails at 32/40/64/128 KiB:", [p._rails_used(n << 10) for n in (32, 40, 64, 128)])
