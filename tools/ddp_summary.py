"""One line per run of examples/train_ddp.py saved as OUTDIR/<config>-<round>.txt (samples/s,
step, compute, exposed, alone, buckets alone, CPU), ratios to the round's gloo and gloo2 runs,
then the medians (the lab rounds of docs/results/session19/ddp-overlap and session22/ddp-rows).
usage: tools/ddp_summary.py OUTDIR"""
import glob, os, re, statistics, sys
d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, "*-[0-9]*.txt"))):
    t = open(f).read()
    m = re.search(r"samples/s ([\d.]+)  step ([\d.]+) ms = compute ([\d.]+) ms .*? exposed "
                  r"communication ([\d.]+) ms .*?alone ([\d.]+) ms, in the \d+ buckets alone "
                  r"([\d.]+) ms", t)
    c = re.search(r"every thread\): ([\d.]+) ms with DDP, ([\d.]+) ms under no_sync; .*? busy "
                  r"([\d.]+) % / ([\d.]+) %", t)
    name, rnd = os.path.basename(f)[:-4].rsplit("-", 1)
    rows[(int(rnd), name)] = ([float(x) for x in m.groups()] if m else None,
                              [float(x) for x in c.groups()] if c else None)
names = sorted({n for _, n in rows})
print("round config samples/s step_ms compute_ms exposed_ms alone_ms buckets_alone_ms "
      "cpu_step_ms cpu_nosync_ms busy_ddp% busy_nosync% vs_gloo vs_gloo2")
ratios = {}
for rnd in sorted({r for r, _ in rows}):
    for n in names:
        m, c = rows.get((rnd, n), (None, None))
        rs = []
        for base in ("gloo", "gloo2"):
            b = rows.get((rnd, base), (None,))[0]
            r = m[0] / b[0] if m and b else None
            rs.append(f"{r:.2f}" if r else "-")
            if r:
                ratios.setdefault((n, base), []).append(r)
        print(rnd, n, *(m or ["FAILED"] * 6), *(c or ["-"] * 4), *rs)
print("median ratios:", ", ".join(f"{n}/{b} {statistics.median(v):.2f}"
                                  for (n, b), v in sorted(ratios.items()) if n != b))
