import sys
sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "..", "..", "..", "..", "tools"))
import ddp_timeline as T
d, stat = sys.argv[1], sys.argv[2]
last = {r: (seg[0][0], seg[-1][0]) for r, seg in T.last_backward(T.load(d)).items()}
t0 = min(a for a, b in last.values())
t1 = max(b for a, b in last.values())
S = []
for line in open(stat):
    a, b = line.split("|")
    v = a.split()
    t = float(v[0]); st = list(map(int, v[1:]))
    ks = [tuple(map(int, x.split(","))) for x in b.split()]
    S.append((t, st, ks))
W = 20
t = t0 - 200
print("ms_from_t0 busy% user% sys% softirq% steal% ksoftirqd_run_ms ksoftirqd_wait_ms (per 20 ms window)")
while t < t1 + 50:
    win = [s for s in S if t <= s[0] < t + W]
    if len(win) >= 2:
        a, b = win[0], win[-1]
        d_ = [y - x for x, y in zip(a[1], b[1])]
        tot = sum(d_) or 1
        user, nice, sys_, idle, iow, irq, sirq, steal = d_
        kr = sum(y[0] - x[0] for x, y in zip(a[2], b[2])) / 1e6
        kw = sum(y[1] - x[1] for x, y in zip(a[2], b[2])) / 1e6
        print(f"{t - t0:6.0f} {100*(tot-idle-iow)/tot:5.0f} {100*(user+nice)/tot:5.0f} {100*sys_/tot:5.0f} {100*sirq/tot:5.0f} {100*steal/tot:5.0f} {kr:6.1f} {kw:6.1f}")
    t += W
