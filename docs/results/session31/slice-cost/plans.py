"""The plan every nezha-all run of the A/B ran, from its own start-up measure (stats.probe:
probed rates, step, hop samples, and on h53 the second slice) replayed through the planner
of the tree on PYTHONPATH (run it with each tree's; the start-up decides the plans, every
call of one size runs the same plan). argv: OUTDIR TAG... (ab-TAG/compare.json.gz).
Sizes as bench compare's: allreduce, broadcast, reduce_scatter the whole buffer, allgather
per rank (the planner sees 4x)."""
import gzip
import json
import sys

from nezha.config import Config
from nezha.planner import ALGO_NAMES, layout_planner

SIZES = (1, 2, 4, 8, 16, 32)


def shape(p, coll, nbytes):
    if coll == "allreduce":
        pl = p.allreduce(nbytes // 4, 4)
    elif coll == "broadcast":
        pl = p.broadcast(nbytes, 1)
    else:
        algo = p.algorithm(coll, nbytes)
        pl = p.blocks(coll, nbytes // 4 // p.ranks, 4, algo)
    return f"{ALGO_NAMES[pl.algo]}{len(set(pl.chans))}"


def planner_of(run):
    """The planner a nezha-all run of compare.json had after its start-up (the tree's code)."""
    pr = run["doc"]["stats"]["probe"]
    st, mb = pr["step"], [pr["mbps"]["rail0"], pr["mbps"]["rail1"]]
    p = layout_planner(Config.load({}, environ={}), [0, 1, 2, 3], mb, failover=True)
    p.set_rail_rates(mb, ring_payload=True)
    p.set_step_latency(st["alpha_us"] * 1e-6, "run")
    p.set_hop_samples(st["hop"])
    if st.get("slice") and hasattr(p, "set_slice_step"):
        p.set_slice_step(st["slice"]["steps"])
    return p, st


def main():
    top = sys.argv[1]
    for tag in sys.argv[2:]:
        d = json.load(gzip.open(f"{top}/ab-{tag}/compare.json.gz"))
        seen = set()
        for r in d["runs"]:
            if r.get("system") != "nezha-all":
                continue
            key = (json.dumps(r["doc"]["stats"]["probe"], sort_keys=True), r.get("collective"))
            if key in seen:
                continue
            seen.add(key)
            p, st = planner_of(r)
            coll = r.get("collective")
            sl = st.get("slice", {}).get("steps", "-")
            row = " ".join(f"{kb}K:{shape(p, coll, (kb << 10) * (4 if coll == 'allgather' else 1))}"
                           for kb in SIZES)
            print(f"{tag:16s} {coll:14s} step {st['alpha_us']:5.1f} us slice {sl!s:6s} {row}")


if __name__ == "__main__":
    main()
