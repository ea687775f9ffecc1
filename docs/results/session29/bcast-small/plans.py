"""What a small broadcast runs on this lab: algorithm, slices, one-round (flat) or binomial
per slice, with the model's prices (rank 0 prints)."""
import nezha
c = nezha.Communicator()
p = c.planner
if c.rank == 0:
    print("rates B/s", [round(r) for r in p.rail_rates], "alpha us", round(p.layout.rail_alpha * 1e6, 1),
          "piece_model", p.piece_model)
    for n in [4, 64, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]:
        a = c.algorithm_for(n, "broadcast")
        pl = p.broadcast(n, 1)
        rates = sorted(p.rail_rates, reverse=True)
        t1 = p.layout.time("broadcast", "tree", n, 1, 0, rate=rates[0]) * 1e6
        t2 = p.layout.time("broadcast", "tree", n, 1, 0, rate=sum(rates)) * 1e6
        st = p.layout.time("broadcast", "star", n, 1, 0, rate=rates[0]) * 1e6
        print(f"{n:6d} {a:6s} {pl!r:50s} flat {[p.flat_tree(ch, cnt) for ch, _, cnt in pl.slices]}"
              f"  tree1 {t1:.0f} tree2 {t2:.0f}(+{0.5 * p.layout.rail_alpha * 1e6:.0f}) star1 {st:.0f} us")
c.close()
