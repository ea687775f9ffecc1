"""Feed a start-up measure (rates Mbit/s, step, hop, slice) to the planner of the tree on
PYTHONPATH and print its plans 1-32 KiB and switch points, with the measured slice and with
the constant (NEZHA_SLICE_STEP=model). argv: alpha_us rail0 rail1 hop_json [slice_steps]"""
import json
import sys

from nezha.config import Config
from nezha.planner import ALGO_NAMES, layout_planner


def plans(p):
    out = []
    for coll in ("allreduce", "broadcast", "allgather", "reduce_scatter"):
        row = []
        for kib in (1, 2, 4, 8, 16, 32):
            n = kib << 10
            name = ALGO_NAMES[p.algorithm(coll, n)]
            k = (p._tree_rails(n) if name == "tree" else 1 if (coll, name) == ("allreduce", "rd")
                 else p._rails_used(n, coll, name))
            row.append(f"{kib}K {name}{k}")
        out.append(f"  {coll:15s} " + ", ".join(row))
    return "\n".join(out)


alpha, r0, r1, hop = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
steps = [None] + ([float(sys.argv[5])] if len(sys.argv) > 5 else [])
for s in steps:
    p = layout_planner(Config.load({}, environ={}), [0, 1, 2, 3], [r0, r1], failover=True)
    p.set_rail_rates([r0, r1], ring_payload=True)
    p.set_step_latency(alpha * 1e-6, "x")
    p.set_hop_samples(hop)
    if s is not None and hasattr(p, "set_slice_step"):
        p.set_slice_step(s)
    print(f"slice {'constant' if s is None else s}: {p.describe().split('): ')[1]}")
    print(plans(p))
