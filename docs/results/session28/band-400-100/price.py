"""The model's prices for allreduce / allgather 2-32 KiB on 4 x 1 (offline, pure Python), with
the lab's agreed start-up samples (session 27, tests/test_step_latency.LAB_HOP: 8 B 44 us, rd
4/16/64 KiB 52/661/2661 us) and probed rates (400 + 100: 248 + 60 Mbit/s ring payload; equal:
227 + 227), step 22.13 us. Per candidate: the price the algorithm choice uses (measured byte
cost) on one rail and on two (+ the second slice's SLICE_STEP cost), and the sustained price
the rail count is chosen by. ALT_4K=<ns>: replace the 4 KiB sample (e.g. a stream long
enough to drain the shaper's bucket)."""
import os

from nezha.config import Config
from nezha.planner import ALGO_NAMES, layout_planner

LAB_HOP = {"small_ns": 44250, "sizes": [4096, 16384, 65536], "ns": [52096, 660900, 2661471]}


def planner(mbps, hop=LAB_HOP, alpha=22.13e-6):
    p = layout_planner(Config.load({}, environ={}), [0, 1, 2, 3], None, 2, 1, True)
    p.set_rail_rates(mbps, ring_payload=True)
    p.set_step_latency(alpha, "test")
    if hop:
        p.set_hop_samples(hop)
    return p


def main():
    hop = dict(LAB_HOP)
    if os.environ.get("ALT_4K"):
        hop["ns"] = [int(os.environ["ALT_4K"])] + hop["ns"][1:]
    print("samples", hop)
    for mbps in ([248.0, 60.0], [227.0, 227.0]):
        p = planner(mbps, hop)
        rates = sorted(p.rail_rates, reverse=True)
        print(f"\n{mbps} Mbit/s probed: link rates {[round(r / 1e6, 1) for r in p.rail_rates]} MB/s")
        for coll, names in (("allreduce", ("rd", "rab", "ring")), ("allgather", ("rd", "ring"))):
            for kb in (2, 4, 8, 16, 32):
                tot = (kb << 10) * (4 if coll == "allgather" else 1)
                t = p.flat_times(coll, tot)
                cells = []
                for name in names:
                    if name == "rd" and coll == "allreduce":
                        cells.append(f"rd(whole, 1 rail) {t['rd'] * 1e6:.0f}")
                        continue
                    v = []
                    for j in (1, 2):
                        for meas in (True, False):
                            v.append(p.layout.time(coll, name, tot, j, rate=sum(rates[:j]),
                                                   measured=meas)
                                     + (j - 1) * p._slice_cost(coll, name))
                    k = p._rails_used(tot, coll, name)
                    cells.append(f"{name} {k}r {t[name] * 1e6:.0f} [1r {v[0] * 1e6:.0f}/{v[1] * 1e6:.0f}"
                                 f" 2r {v[2] * 1e6:.0f}/{v[3] * 1e6:.0f}]")
                a = ALGO_NAMES[p.algorithm(coll, tot)]
                print(f"  {coll} {kb} KiB{' per rank' if coll == 'allgather' else ''}: "
                      f"-> {a}; " + "; ".join(cells))
    print("\n[1r m/s 2r m/s]: measured-byte-cost / sustained price (us) on one rail and on two")


main()
