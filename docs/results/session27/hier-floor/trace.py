"""Phase breakdown of traced hierarchical allreduces (breakdown.py's JSON with "ops"):
per call, on the common CLOCK_MONOTONIC axis (ms after the first rank's call start):
call starts (barrier exit skew), engine starts, per host and rail the window in which the
cross-host (rail) ops ran and the goodput over it, the last op, the call ends. A cross op
is one whose peer is on another host; local ones go over shm."""
import glob, json, statistics as stt, sys

GOOD = 400e6 / 8 * 8948 / 9014
SEND, RECV, RR = 0, 1, 2


def analyse(d, verbose=1):
    R = sorted((json.load(open(f)) for f in glob.glob(d + "/rank*.json")), key=lambda x: x["rank"])
    hosts = R[0]["hosts"]; H = len(hosts)
    host_of = {r: i for i, h in enumerate(hosts) for r in h}
    S = R[0]["bytes"]
    floor = 2 * (H - 1) / H * S / (2 * GOOD) * 1e3
    rows = []
    for i in range(len(R[0]["sep"])):
        base = min(x["sep"][i]["t0"] for x in R)
        ms = lambda t: (t - base) / 1e6
        c0 = [ms(x["sep"][i]["t0"]) for x in R]; c1 = [ms(x["sep"][i]["t1"]) for x in R]
        e0, elast, first_x, win = [], [], [], {}
        xbytes = {}
        for x in R:
            tr = x["sep"][i]["ops"]; t0 = ms(tr["t0"]); ops = tr["ops"]
            e0.append(t0)
            fin = [o[6] / 1e6 + t0 if o[6] >= 0 else None for o in ops]
            elast.append(max(f for f in fin if f is not None))
            h = host_of[x["rank"]]
            for k, o in enumerate(ops):
                kind, peer, chan, nb, d0, d1, t = o
                if peer < 0 or host_of[peer] == h or nb == 0:
                    continue
                # start of a cross op: its dependencies' finish (send) or call start
                deps = [fin[dd] for dd in (d0, d1) if dd >= 0 and fin[dd] is not None]
                st = max(deps) if deps else t0
                key = (h, chan)
                w = win.setdefault(key, [1e18, -1e18, 1e18])
                if kind == SEND:
                    w[0] = min(w[0], st); w[2] = min(w[2], fin[k])
                    xbytes[key] = xbytes.get(key, 0) + nb
                w[1] = max(w[1], fin[k])
        span = max(c1) - min(c0)
        rows.append(dict(span=span, eng=max(elast) - min(e0), startskew=max(c0) - min(c0),
                         eng_start=max(e0) - min(e0), post=[a - b for a, b in zip(c1, elast)],
                         pre=[a - b for a, b in zip(e0, c0)], win=win, xbytes=xbytes,
                         c0=c0, c1=c1, e0=e0, elast=elast))
        if verbose and (i < 2 or verbose > 1):
            print(f"-- call {i}: span {span:.1f} ms = {span/floor:.3f}x floor ({floor:.1f})")
            print(f"   call starts  {' '.join(f'{v:.2f}' for v in c0)}")
            print(f"   engine start {' '.join(f'{v:.2f}' for v in e0)}")
            print(f"   engine last  {' '.join(f'{v:.2f}' for v in elast)}")
            print(f"   call ends    {' '.join(f'{v:.2f}' for v in c1)}")
            for key in sorted(win):
                w = win[key]; nb = xbytes[key]
                print(f"   host {key[0]} chan {key[1]}: cross sends from {w[0]:.2f} (first done {w[2]:.2f}) "
                      f"to last cross op {w[1]:.2f}: {nb/1e6:.2f} MB, {nb/((w[1]-w[0])/1e3)/GOOD*100:.1f} % of goodput "
                      f"over the window; bytes/goodput = {nb/GOOD*1e3:.1f} ms")
    def med(f):
        return stt.median(f(r) for r in rows)
    print(f"== {d}: {len(rows)} calls, floor {floor:.2f} ms")
    print(f"   span median {med(lambda r: r['span']):.1f} ms = {med(lambda r: r['span'])/floor:.3f}x; "
          f"call start skew {med(lambda r: r['startskew']):.2f}; engine (first start..last op) "
          f"{med(lambda r: r['eng']):.1f} = {med(lambda r: r['eng'])/floor:.3f}x; "
          f"engine start skew {med(lambda r: r['eng_start']):.2f}")
    print(f"   pre (call->engine start) median max {med(lambda r: max(r['pre'])):.2f}; "
          f"post (last op->call end) median of max {med(lambda r: max(r['post'])):.2f}, of min {med(lambda r: min(r['post'])):.2f}")
    tails = " ".join("%.1f" % (max(r["c1"]) - max(r["elast"])) for r in rows)
    sk = " ".join("%.1f" % r["eng_start"] for r in rows)
    print(f"   tail (last call end - last engine op over ranks) median {med(lambda r: max(r['c1']) - max(r['elast'])):.2f} ms, each: {tails}")
    print(f"   engine start skew (over ranks) each: {sk}")
    keys = sorted(rows[0]["win"])
    for key in keys:
        print(f"   host {key[0]} chan {key[1]}: first cross send start {med(lambda r: r['win'][key][0] - min(r['e0'])):.2f} ms after first engine start; "
              f"window {med(lambda r: r['win'][key][1] - r['win'][key][0]):.1f} ms; "
              f"goodput over window {med(lambda r: r['xbytes'][key]/((r['win'][key][1]-r['win'][key][0])/1e3)/GOOD*100):.1f} %; "
              f"last cross op -> last engine op {med(lambda r: max(r['elast']) - r['win'][key][1]):.2f} ms")
    return rows


if __name__ == "__main__":
    v = 1
    for d in sys.argv[1:]:
        if d == "-v":
            v = 2; continue
        analyse(d, v)
