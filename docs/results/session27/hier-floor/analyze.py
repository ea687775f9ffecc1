"""Summarise breakdown.py's per-rank JSON: call times vs the inter-host floor, start and
end skew across ranks, per-channel completion times and bytes, the plan's split."""
import glob, json, statistics as stt, sys

GOOD = 400e6 / 8 * 8948 / 9014   # one rail's goodput, bytes/s

for d in sys.argv[1:]:
    R = sorted((json.load(open(f)) for f in glob.glob(d + "/rank*.json")), key=lambda x: x["rank"])
    N, S = R[0]["size"], R[0]["bytes"]
    print(f"== {d}: {N} ranks, {S} B, tree {R[0]['file']}")
    reps = len(R[0]["sep"])
    H = len(R[0]["hosts"]) if R[0].get("hosts") else int(__import__("os").environ.get("BD_H", "2"))
    floor = 2 * (H - 1) / H * S / (2 * GOOD)
    print(f"floor (H={H}) {floor*1e3:.2f} ms")
    spans, walls = [], []
    for i in range(reps):
        t0 = [x["sep"][i]["t0"] for x in R]; t1 = [x["sep"][i]["t1"] for x in R]
        span = (max(t1) - min(t0)) / 1e6
        wall = [(b - a) / 1e6 for a, b in zip(t0, t1)]
        spans.append(span); walls.append(max(wall))
        ch = [[c[0] / 1e6 for c in x["sep"][i]["chan"]] for x in R]
        cb = [[c[1] for c in x["sep"][i]["chan"]] for x in R]
        if i < 3 or i == reps - 1:
            print(f" rep {i}: start skew {(max(t0)-min(t0))/1e6:.2f} ms, end skew {(max(t1)-min(t1))/1e6:.2f} ms, "
                  f"span {span:.1f} ms = {span/1e3/floor:.3f}x floor; per-rank wall {min(wall):.1f}-{max(wall):.1f}")
            print("   chan ms per rank:", " ".join("/".join(f"{v:.1f}" for v in c) for c in ch))
            print("   chan MB per rank:", " ".join("/".join(f"{v/1e6:.2f}" for v in c) for c in cb))
    osu = stt.mean((c["t1"] - c["t0"]) / 1e6 for x in R for c in x["sep"])
    print(f" sep: per-rank wall mean (OSU-like) {osu:.1f} ms = {osu/1e3/floor:.3f}x")
    print(f" sep: span median {stt.median(spans):.1f} ms = {stt.median(spans)/1e3/floor:.3f}x, "
          f"min {min(spans):.1f} = {min(spans)/1e3/floor:.3f}x")
    b = [x["b2b"] for x in R]
    per = (max(y["t1"] for y in b) - min(y["t0"] for y in b)) / b[0]["n"] / 1e6
    print(f" back-to-back: {per:.1f} ms per call = {per/1e3/floor:.3f}x floor")
    print(" plan:", R[0]["sep"][-1]["plan"][:400])
    print(" rails bytes sent (all reps, rank 0..):", [{k: round(v['bytes_sent']/1e6, 1) for k, v in x['rails'].items()} for x in R][:8])
