"""Summarise exp.py output: per config, median call / barrier / period (rank means),
rail tx bytes per call per rank, and the tbf (host 0) drops/overlimits in the run.
usage: python table.py OUTDIR"""
import glob, json, os, re, sys
import numpy as np

d = sys.argv[1]
def sig(r):
    tr = r.get("trace")
    if not tr:
        return ""
    ops = tr[-1]["ops"]
    return " ".join(f"{c}:{'S' if k == 0 else 'R'}{nb}" for k, p, c, nb, *_ in ops if k in (0, 1, 2) and nb > 32)


names = sorted({re.sub(r"\.rank\d\.json$", "", os.path.basename(p))
                for p in glob.glob(f"{d}/*.rank0.json")}, key=lambda s: (s.split("-", 1)[1], s))
print(f"{'run':<28} {'call avg':>8} {'call p50':>8} {'bar p50':>8} {'period':>7} "
      f"{'r0 tx/call':>10} {'r1 tx/call':>10} {'r0 pkts':>7} {'r0 B/us':>7} {'r1 B/us':>7} {'ovl r0':>6}")
for n in names:
    rs = [json.load(open(p)) for p in sorted(glob.glob(f"{d}/{n}.rank*.json"))]
    call = np.mean([np.mean(r["call_us"]) for r in rs])
    c50 = np.mean([np.median(r["call_us"]) for r in rs])
    b50 = np.mean([np.median(r["barrier_us"]) for r in rs])
    per = np.mean([np.median(np.diff(r["start_us"])) for r in rs])
    it = rs[0]["iters"]
    tx0 = np.mean([r["net"].get("rail0", [0] * 4)[0] for r in rs]) / it
    tx1 = np.mean([r["net"].get("rail1", [0] * 4)[0] for r in rs]) / it
    pk0 = np.mean([r["net"].get("rail0", [0] * 4)[2] for r in rs]) / it
    span = np.mean([r["start_us"][-1] for r in rs]) / (it - 1)
    ovl = ""
    try:
        q = open(f"{d}/{n}.qdisc").read()
        ov = [int(x) for x in re.findall(r"overlimits (\d+)", q)]
        ovl = str(ov[2] - ov[0]) if len(ov) >= 4 else ""
    except OSError:
        pass
    print(f"{n:<28} {call:8.1f} {c50:8.1f} {b50:8.1f} {per:7.1f} {tx0:10.0f} {tx1:10.0f} "
          f"{pk0:7.1f} {tx0 / span:7.1f} {tx1 / span:7.1f} {ovl:>6}  {sig(rs[0])}")
