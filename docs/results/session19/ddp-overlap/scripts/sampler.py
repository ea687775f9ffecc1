"""Sample /proc/stat (machine) and ksoftirqd's schedstat every 5 ms with perf_counter stamps."""
import sys, time, glob
out = open(sys.argv[1], "w")
ks = []
for p in glob.glob("/proc/[0-9]*/comm"):
    try:
        if open(p).read().startswith("ksoftirqd"):
            ks.append(p.rsplit("/", 1)[0])
    except OSError:
        pass
end = time.perf_counter() + float(sys.argv[2])
while time.perf_counter() < end:
    t = time.perf_counter()
    st = open("/proc/stat").readline().split()[1:9]
    k = [open(d + "/schedstat").read().split()[:2] for d in ks]
    out.write(f"{t*1e3:.3f} {' '.join(st)} | {' '.join(a + ',' + b for a, b in k)}\n")
    time.sleep(0.005)
