"""One line per run of ddp.sh: samples/s, step, compute, exposed, alone, buckets alone, CPU."""
import glob, os, re, sys
d = sys.argv[1]
rows = []
for f in sorted(glob.glob(os.path.join(d, "*-[0-9]*.txt"))):
    t = open(f).read()
    m = re.search(r"samples/s ([\d.]+)  step ([\d.]+) ms = compute ([\d.]+) ms .*? exposed "
                  r"communication ([\d.]+) ms .*?alone ([\d.]+) ms, in the \d+ buckets alone "
                  r"([\d.]+) ms", t)
    c = re.search(r"every thread\): ([\d.]+) ms with DDP, ([\d.]+) ms under no_sync; .*? busy "
                  r"([\d.]+) % / ([\d.]+) %", t)
    name, rnd = os.path.basename(f)[:-4].rsplit("-", 1)
    rows.append((int(rnd), name, m.groups() if m else None, c.groups() if c else None))
print("round config samples/s step_ms compute_ms exposed_ms alone_ms buckets_alone_ms "
      "cpu_step_ms cpu_nosync_ms busy_ddp% busy_nosync% ratio_to_gloo")
for rnd in sorted({r[0] for r in rows}):
    g = [r for r in rows if r[0] == rnd and r[1] == "gloo" and r[2]]
    for _, name, m, c in sorted([r for r in rows if r[0] == rnd], key=lambda r: r[1]):
        ratio = f"{float(m[0]) / float(g[0][2][0]):.2f}" if m and g else "-"
        print(rnd, name, *(m or ["FAILED"] * 6), *(c or ["-"] * 4), ratio)
