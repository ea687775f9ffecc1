"""INA credit sweep: window (slots in flight per rank) x message size -> allreduce throughput,
as NetReduce studies its message-level credits (seeds.md NR4: the rail saturates once
window x 1408 B >= bandwidth x RTT). Also the loss behaviour: busbw and wrong results at a
given random loss on the INA rail.

    # loopback: one service thread, N rank threads in this process (2 cores: CPU-bound)
    python bench/ina_credit_sweep.py --ranks 4
    # lab: N hosts, the service in rail0's switch namespace, tbf at --rate (root)
    flock /tmp/nezha-timing.lock python bench/ina_credit_sweep.py --lab --hosts 4 --rate 400mbit
    flock /tmp/nezha-timing.lock python bench/ina_credit_sweep.py --lab --loss 1 --windows 64 --sizes 16M

Every collective is checked (ranks add rank+1 and i, so the exact sum is known); a wrong
result is counted, never hidden. algbw = S / t; busbw = algbw x 2(n-1)/n (nccl-tests), so
it compares with a ring's; a rank of an INA allreduce sends and receives S bytes.
"""
import argparse
import json
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from nezha.rails.ina import InaClient  # noqa: E402
from nezha.types import ReduceOp  # noqa: E402
from tests._result import report  # noqa: E402

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    text = text.strip().upper().removesuffix("B")
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def parse_rate(text):
    """'400mbit', '1.6gbit' -> bit/s."""
    t = text.strip().lower()
    for suf, m in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)):
        if t.endswith(suf):
            return float(t[:-len(suf)]) * m
    return float(t)


def fmt_size(n):
    for u in ("G", "M", "K"):
        if n >= UNITS[u] and n % UNITS[u] == 0:
            return f"{n // UNITS[u]}{u}"
    return str(n)


def iters_for(nbytes, budget_bytes, lo=3, hi=200, fixed=0):
    return fixed or max(lo, min(hi, budget_bytes // max(nbytes, 1)))


def window_for(client, w, rate_Bps):
    """w > 0: that window. 0: nezha's default, as the communicator sets it (set_window from
    the rail's rate and the registration's PING round trip; unknown rate: 64 KiB)."""
    if w > 0:
        return w
    # the slowest rank's round trip, agreed over the service itself (the communicator agrees
    # it over TCP): every rank must run the same window
    rtt = np.array([client.rtt_s or 0.0])
    client.allreduce(rtt, op=ReduceOp.MAX, window=1)
    client.window_why = client.set_window(rate_Bps, float(rtt[0]) or None)[1]
    return client.window


def checked_allreduce(client, buf, base, want, rank, n, it, w, timeout):
    """One timed allreduce of base + rank + 1 + (it % 1024), compared element by element with
    the numpy oracle n * (base + it % 1024) + n(n+1)/2 (exact in float32: every value below
    2^24). The offset moves each call, so a result left from an earlier collective (or never
    written: the input stays) fails the check. Returns (seconds, ok)."""
    off = it % 1024
    buf[:] = base
    buf += rank + 1 + off
    t0 = time.perf_counter()
    client.allreduce(buf, window=w, timeout=timeout)
    dt = time.perf_counter() - t0
    return dt, bool(np.array_equal(buf, want + n * off))


def case(size, n):
    count = size // 4
    base = np.arange(count, dtype=np.float32) % 1024
    return base, np.empty(count, np.float32), base * n + n * (n + 1) / 2


def rank_sweep(client, rank, n, windows, sizes, budget, timeout, fixed_iters=0, rate_Bps=None):
    """What one rank runs: per (window, size) a warm-up, then timed checked allreduces.
    Returns rows (rank 0's are reported). Window 0: nezha's default (window_for)."""
    rows = []
    it = 0
    for w0 in windows:
        w = window_for(client, w0, rate_Bps)
        for size in sizes:
            base, buf, want = case(size, n)
            iters = iters_for(size, budget, fixed=fixed_iters)
            wrong, total = 0, 0.0
            for i in range(iters + 1):
                dt, ok = checked_allreduce(client, buf, base, want, rank, n, it, w, timeout)
                it += 1
                wrong += not ok
                if i:           # the first is the warm-up
                    total += dt
            t = total / iters
            rows.append({"window": w, "default": w0 == 0, "bytes": size, "iters": iters,
                         "checked": iters + 1, "time_us": t * 1e6,
                         "algbw_MBps": size / t / 1e6, "busbw_MBps": size / t / 1e6 * 2 * (n - 1) / n,
                         "wrong": wrong})
    return rows


def mix_order(mix, total):
    """The sizes of `total` collectives: mix = [(size, share), ...], interleaved round robin
    within each period of sum(shares) calls (4K:25,64K:24,1M:1 -> 4K 64K 1M 4K 64K ...)."""
    period, left = [], dict(mix)
    while any(left.values()):
        for size, _ in mix:
            if left[size]:
                period.append(size)
                left[size] -= 1
    return [period[i % len(period)] for i in range(total)]


def rank_mix(client, rank, n, mix, total, timeout, w0, rate_Bps=None):
    """`total` checked allreduces of the mixed sizes (mix_order), window w0 (0: default).
    Returns one row per size: calls, wrong, mean / median / max time."""
    w = window_for(client, w0, rate_Bps)
    cases = {size: case(size, n) for size, _ in mix}
    times = {size: [] for size, _ in mix}
    wrong = {size: 0 for size, _ in mix}
    for it, size in enumerate(mix_order(mix, total)):
        base, buf, want = cases[size]
        dt, ok = checked_allreduce(client, buf, base, want, rank, n, it, w, timeout)
        times[size].append(dt)
        wrong[size] += not ok
    rows = []
    for size, _ in mix:
        t = np.array(times[size])
        rows.append({"window": w, "default": w0 == 0, "bytes": size, "iters": len(t),
                     "checked": len(t), "time_us": float(t.mean() * 1e6),
                     "p50_us": float(np.median(t) * 1e6), "max_us": float(t.max() * 1e6),
                     "algbw_MBps": size / t.mean() / 1e6,
                     "busbw_MBps": size / t.mean() / 1e6 * 2 * (n - 1) / n, "wrong": wrong[size]})
    return rows


def worker(a):
    """One rank in the lab (lab run --env-rendezvous): prints its rows and counters as JSON
    (the parent takes rank 0's rows and every rank's counters)."""
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    secret = bytes.fromhex(os.environ["NEZHA_JOB_SECRET"])
    addr = os.environ["NEZHA_INA_ADDR"].split(",")[0]
    c = InaClient(addr, secret=secret, rank=rank, size=n, timeout=a.timeout, tag=b"sweep")
    if a.probe_ms:  # A/B of the tail probe (one value in a worker)
        c.set_rto(probe_ms=float(a.probe_ms))
    rows = rank_run(a, c, rank, n)
    st = dict(c.stats(), chunk_bytes=c.chunk_bytes, rtt_us=(c.rtt_s or 0) * 1e6,
              nslots=c.nslots, rank=rank, window_why=getattr(c, "window_why", None))
    c.close()
    report({"rows": rows if rank == 0 else [], "client": st})


def rank_run(a, client, rank, n):
    """What one rank runs: the mix or the sweep."""
    rate = parse_rate(a.rate) / 8
    if a.mix:
        return rank_mix(client, rank, n, a.mix, a.total, a.timeout, a.windows[0], rate)
    return rank_sweep(client, rank, n, a.windows, a.sizes, a.budget, a.timeout, a.iters, rate)


def sum_counters(docs):
    """Every rank's client counters added up (numbers only; rtt_us as rank 0's)."""
    tot = {}
    for d in docs:
        for k, v in d.items():
            if isinstance(v, (int, float)) and k not in ("rank", "chunk_bytes", "nslots", "rtt_us",
                                                         "srtt_us"):
                tot[k] = tot.get(k, 0) + v
    return tot


def loopback(a):
    from nezha._core import ina as _ina
    srv = _ina.Server("127.0.0.1", 0, slots=max(max(a.windows), 8) * 2, quota=max(max(a.windows), 8))
    t = threading.Thread(target=srv.serve, daemon=True)
    t.start()
    secret = os.urandom(32)
    cs = [None] * a.ranks
    out = [None] * a.ranks

    def reg(r):
        cs[r] = InaClient(("127.0.0.1", srv.port), secret=secret, rank=r, size=a.ranks, timeout=a.timeout)

    def run(r):
        out[r] = rank_run(a, cs[r], r, a.ranks)

    for fn in (reg, run):
        ts = [threading.Thread(target=fn, args=(r,)) for r in range(a.ranks)]
        for x in ts:
            x.start()
        for x in ts:
            x.join()
    srv.stop()
    t.join()
    cli = [dict(c.stats(), chunk_bytes=c.chunk_bytes, rtt_us=(c.rtt_s or 0) * 1e6, nslots=c.nslots,
                rank=r) for r, c in enumerate(cs)]
    phase = {"loss": 0.0, "rows": out[0], "client": cli[0], "clients_sum": sum_counters(cli)}
    return [phase], srv.stats(), f"loopback, {a.ranks} rank threads + 1 service thread, {os.cpu_count()} CPUs"


def cpu_seconds(pids):
    """user + system CPU seconds of the processes (their threads included)."""
    tot = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            tot += int(fields[11]) + int(fields[12])
        except (OSError, IndexError):
            pass
    return tot / os.sysconf("SC_CLK_TCK")


def lab_run(a):
    """One lab; per entry of a.loss (a schedule, e.g. 0,1,1,0) set that loss on every host's
    INA link and run the workers. Returns (phases, service counters, where)."""
    from nezha.lab import Lab, LabSpec
    name = f"is{os.getpid() % 100000}"
    lab = Lab(LabSpec(hosts=a.hosts, rails=1, rates=a.rate, name=name, ina=(0,))).up()
    try:
        from nezha.lab import netns as _nn
        svc = _nn.netns_pids([lab.switch_ns])[lab.switch_ns]
        cpu0, t0 = cpu_seconds(svc), time.monotonic()
        argv = [sys.executable, os.path.abspath(__file__), "--worker", "--windows",
                ",".join(map(str, a.windows)), "--sizes", ",".join(map(str, a.sizes)),
                "--budget", str(a.budget), "--timeout", str(a.timeout), "--iters", str(a.iters),
                "--rate", a.rate]
        if a.mix:
            argv += ["--mix", ",".join(f"{s}:{k}" for s, k in a.mix), "--total", str(a.total)]
        phases = []
        probes = a.probe_ms.split(",") if a.probe_ms else [None] * len(a.loss)
        if len(probes) != len(a.loss):
            sys.exit("--probe-ms: one value per --loss entry")
        for loss, probe in zip(a.loss, probes):
            for h in range(a.hosts):
                lab.loss(h, 0, loss)
            t1 = time.monotonic()
            res = lab.run(argv + (["--probe-ms", probe] if probe else []), env_rendezvous=True,
                          capture=True, timeout=3600)
            got = [json.loads(ln.split("RESULT ", 1)[1]) for ln in res.stdout.splitlines()
                   if "RESULT " in ln]
            if res.returncode or len(got) != a.hosts:
                sys.exit(f"lab run failed ({res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}")
            cli = sorted((g["client"] for g in got), key=lambda d: d["rank"])
            rows = [r for g in got for r in g["rows"]]
            phases.append({"loss": loss, "probe_ms": probe, "rows": rows, "client": cli[0],
                           "clients_sum": sum_counters(cli), "wall_s": round(time.monotonic() - t1, 2)})
            print(f"# phase {len(phases)}: loss {loss:g}% each way, {phases[-1]['wall_s']} s",
                  file=sys.stderr, flush=True)
        cpu, wall = cpu_seconds(svc) - cpu0, time.monotonic() - t0
        _nn.kill_pids(_nn.netns_pids([lab.switch_ns])[lab.switch_ns], 2.0)  # SIGTERM: it prints its counters
        time.sleep(0.3)
        log = open(f"/run/nezha-lab/{name}-ina0.log").read()
        srv = {}
        for ln in log.splitlines():
            if ln.startswith("{"):
                srv = json.loads(ln)
        dgrams = srv.get("rx", 0) + srv.get("tx", 0)
        srv["cpu_s"], srv["wall_s"] = round(cpu, 3), round(wall, 3)
        srv["cpu_pct_of_one_core"] = round(100 * cpu / wall, 1)
        srv["cpu_us_per_datagram"] = round(cpu / max(dgrams, 1) * 1e6, 3)
        where = (f"lab, {a.hosts} hosts x 1 rank, rail0 {a.rate} (tbf both ends), service in the switch "
                 f"namespace, loss schedule {','.join(f'{x:g}' for x in a.loss)} % each way on every "
                 f"host's link (one phase each, same lab), {os.cpu_count()} CPUs")
        return phases, srv, where
    finally:
        lab.down()


def print_phase(ph):
    print(f"## loss {ph['loss']:g}% each way"
          + (f", tail probe floor {ph['probe_ms']} ms" if ph.get("probe_ms") else ""))
    print(f"{'window':>7} {'size':>8} {'iters':>6} {'time_us':>12} {'algbw MB/s':>11} {'busbw MB/s':>11} "
          f"{'Mbit/s/rank':>12} {'checked':>8} {'wrong':>6}")
    for r in ph["rows"]:
        w = f"{r['window']}{'d' if r.get('default') else ''}"
        print(f"{w:>7} {fmt_size(r['bytes']):>8} {r['iters']:>6} {r['time_us']:>12.1f} "
              f"{r['algbw_MBps']:>11.2f} {r['busbw_MBps']:>11.2f} {r['algbw_MBps'] * 8:>12.1f} "
              f"{r['checked']:>8} {r['wrong']:>6}"
              + (f"  p50 {r['p50_us']:.1f} max {r['max_us']:.1f} us" if "p50_us" in r else ""))
    print(f"# rank 0 counters: {json.dumps(ph['client'])}")
    print(f"# all ranks' counters summed: {json.dumps(ph['clients_sum'])}")


def print_summary(phases):
    """Per row (window setting, size): Mbit/s per rank of every phase in run order, the mean
    per (tail probe, loss) and each lossy mean's ratio to the loss-free mean of the same
    probe setting."""
    if len(phases) < 2:
        return
    groups = sorted({(ph.get("probe_ms") or "", ph["loss"]) for ph in phases})
    print("## summary: Mbit/s per rank, phases in run order; mean per (tail probe floor ms, loss %); "
          "ratio to the same probe setting's loss-free mean")
    for i, r0 in enumerate(phases[0]["rows"]):
        per = [(ph.get("probe_ms") or "", ph["loss"], ph["rows"][i]["algbw_MBps"] * 8,
                ph["rows"][i]["window"]) for ph in phases]
        text = " ".join(f"{v:.1f}@{l:g}%{'/p' + p if p else ''}(w{w})" for p, l, v, w in per)
        print(f"{'default window' if r0.get('default') else 'window ' + str(r0['window'])} "
              f"size {fmt_size(r0['bytes'])}: {text}")
        mean = {g: float(np.mean([v for p, l, v, _ in per if (p, l) == g])) for g in groups}
        for g in groups:
            base = mean.get((g[0], 0.0))
            print(f"   probe {g[0] or '-'} loss {g[1]:g}%: {mean[g]:.1f}"
                  + (f" ({mean[g] / base:.3f} of loss-free)" if base and g[1] else ""))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=4, help="loopback ranks")
    p.add_argument("--lab", action="store_true", help="run in a lab (root)")
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--rate", default="400mbit")
    p.add_argument("--loss", default="0", help="lab: random loss %% on every host's INA link; a "
                   "list (0,1,1,0) runs one phase per entry in the same lab")
    p.add_argument("--windows", default="1,2,4,8,16,32,64,128",
                   help="0 or 'default': nezha's default window (set_window from --rate and the "
                   "registration's round trip)")
    p.add_argument("--sizes", default="4K,64K,1M,16M")
    p.add_argument("--budget", default="64M", help="bytes per point (sets the iteration count)")
    p.add_argument("--timeout", type=float, default=20.0)
    p.add_argument("--iters", type=int, default=0, help="timed collectives per point (default from --budget)")
    p.add_argument("--mix", default="", help="SIZE:SHARE,... e.g. 4K:25,64K:24,1M:1: --total checked "
                   "allreduces of these sizes interleaved (the first window of --windows)")
    p.add_argument("--total", type=int, default=10000, help="collectives of --mix")
    p.add_argument("--probe-ms", default="", help="lab: the tail probe's floor per --loss entry "
                   "(0: off; A/B in one lab), e.g. --loss 0,1,1,0 --probe-ms 0,0,1,1")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    a.windows = [0 if x.strip() == "default" else int(x) for x in str(a.windows).split(",")]
    a.sizes = [parse_size(x) for x in str(a.sizes).split(",")]
    a.budget = parse_size(str(a.budget))
    a.loss = [float(x) for x in str(a.loss).split(",")]
    a.mix = [(parse_size(x.split(":")[0]), int(x.split(":")[1])) for x in a.mix.split(",") if x]
    if a.worker:
        return worker(a)
    phases, srv, where = lab_run(a) if a.lab else loopback(a)
    print(f"# INA credit sweep: {where}")
    print(f"# cmd: {' '.join(sys.argv)}")
    cli = phases[0]["client"]
    print(f"# chunk = {cli.get('chunk_bytes')} B payload per datagram (from the MTU); window = slots in "
          "flight per rank ('d': nezha's default); every result checked element by element against "
          "numpy (wrong = collectives with a wrong element; checked includes the warm-up)")
    for ph in phases:
        print_phase(ph)
    print_summary(phases)
    print(f"# service counters (all phases): {json.dumps(srv)}")
    if cli.get("rtt_us"):  # what nezha's INA rail takes by default here
        from nezha.rails.ina.client import window_why
        rate = parse_rate(a.rate) / 8
        print(f"# nezha's default window at the rail's rate and rank 0's PING round trip "
              f"({cli['rtt_us']:.0f} us, the least of registration's): "
              f"{window_why(cli['chunk_bytes'], rate, cli['rtt_us'] * 1e-6, cli.get('nslots'))}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"where": where, "argv": sys.argv, "phases": phases, "service": srv}, f, indent=1)


if __name__ == "__main__":
    main()
