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


def rank_sweep(client, rank, n, windows, sizes, budget, timeout, fixed_iters=0):
    """What one rank runs: per (window, size) a warm-up, then timed checked allreduces.
    Returns rows (rank 0's are reported)."""
    rows = []
    for w in windows:
        for size in sizes:
            count = size // 4
            base = np.arange(count, dtype=np.float32) % 1024
            buf = np.empty(count, np.float32)
            want = base * n + n * (n + 1) / 2
            iters = iters_for(size, budget, fixed=fixed_iters)
            wrong, total = 0, 0.0
            for it in range(iters + 1):
                buf[:] = base
                buf += rank + 1
                t0 = time.perf_counter()
                client.allreduce(buf, window=w, timeout=timeout)
                dt = time.perf_counter() - t0
                if not np.array_equal(buf, want):
                    wrong += 1
                if it:           # the first is the warm-up
                    total += dt
            t = total / iters
            rows.append({"window": w, "bytes": size, "iters": iters, "time_us": t * 1e6,
                         "algbw_MBps": size / t / 1e6, "busbw_MBps": size / t / 1e6 * 2 * (n - 1) / n,
                         "wrong": wrong})
    return rows


def worker(a):
    """One rank in the lab (lab run --env-rendezvous): prints rank 0's rows as JSON."""
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    secret = bytes.fromhex(os.environ["NEZHA_JOB_SECRET"])
    addr = os.environ["NEZHA_INA_ADDR"].split(",")[0]
    c = InaClient(addr, secret=secret, rank=rank, size=n, timeout=a.timeout, tag=b"sweep")
    rows = rank_sweep(c, rank, n, a.windows, a.sizes, a.budget, a.timeout, a.iters)
    st = dict(c.stats(), chunk_bytes=c.chunk_bytes, rtt_us=(c.rtt_s or 0) * 1e6,
              nslots=c.nslots)
    c.close()
    if rank == 0:
        report({"rows": rows, "client": st})


def loopback(a):
    from nezha._core import ina as _ina
    srv = _ina.Server("127.0.0.1", 0, slots=max(a.windows) * 2, quota=max(a.windows))
    t = threading.Thread(target=srv.serve, daemon=True)
    t.start()
    secret = os.urandom(32)
    cs = [None] * a.ranks
    out = [None] * a.ranks

    def reg(r):
        cs[r] = InaClient(("127.0.0.1", srv.port), secret=secret, rank=r, size=a.ranks, timeout=a.timeout)

    def run(r):
        out[r] = rank_sweep(cs[r], r, a.ranks, a.windows, a.sizes, a.budget, a.timeout, a.iters)

    for fn in (reg, run):
        ts = [threading.Thread(target=fn, args=(r,)) for r in range(a.ranks)]
        for x in ts:
            x.start()
        for x in ts:
            x.join()
    srv.stop()
    t.join()
    return out[0], srv.stats(), dict(cs[0].stats(), chunk_bytes=cs[0].chunk_bytes), f"loopback, {a.ranks} rank threads + 1 service thread, {os.cpu_count()} CPUs"


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
    from nezha.lab import Lab, LabSpec
    name = f"is{os.getpid() % 100000}"
    lab = Lab(LabSpec(hosts=a.hosts, rails=1, rates=a.rate, name=name, ina=(0,))).up()
    try:
        if a.loss:
            for h in range(a.hosts):
                lab.loss(h, 0, a.loss)
        from nezha.lab import netns as _nn
        svc = _nn.netns_pids([lab.switch_ns])[lab.switch_ns]
        cpu0, t0 = cpu_seconds(svc), time.monotonic()
        argv = [sys.executable, os.path.abspath(__file__), "--worker", "--windows",
                ",".join(map(str, a.windows)), "--sizes", ",".join(map(str, a.sizes)),
                "--budget", str(a.budget), "--timeout", str(a.timeout), "--iters", str(a.iters)]
        res = lab.run(argv, env_rendezvous=True, capture=True, timeout=3600)
        line = [ln for ln in res.stdout.splitlines() if "RESULT " in ln]
        if res.returncode or not line:
            sys.exit(f"lab run failed ({res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}")
        got = json.loads(line[0].split("RESULT ", 1)[1])
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
                 f"namespace, loss {a.loss:g}% each way on every host's link, {os.cpu_count()} CPUs")
        return got["rows"], srv, got["client"], where
    finally:
        lab.down()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=4, help="loopback ranks")
    p.add_argument("--lab", action="store_true", help="run in a lab (root)")
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--rate", default="400mbit")
    p.add_argument("--loss", type=float, default=0.0, help="lab: random loss %% on every host's INA link")
    p.add_argument("--windows", default="1,2,4,8,16,32,64,128")
    p.add_argument("--sizes", default="4K,64K,1M,16M")
    p.add_argument("--budget", default="64M", help="bytes per point (sets the iteration count)")
    p.add_argument("--timeout", type=float, default=20.0)
    p.add_argument("--iters", type=int, default=0, help="timed collectives per point (default from --budget)")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    a.windows = [int(x) for x in str(a.windows).split(",")]
    a.sizes = [parse_size(x) for x in str(a.sizes).split(",")]
    a.budget = parse_size(str(a.budget))
    if a.worker:
        return worker(a)
    rows, srv, cli, where = lab_run(a) if a.lab else loopback(a)
    print(f"# INA credit sweep: {where}")
    print(f"# cmd: {' '.join(sys.argv)}")
    print(f"# chunk = {cli.get('chunk_bytes')} B payload per datagram (from the MTU); window = slots in "
          "flight per rank; every result checked (wrong = collectives with a wrong element)")
    print(f"{'window':>7} {'size':>8} {'iters':>6} {'time_us':>12} {'algbw MB/s':>11} {'busbw MB/s':>11} "
          f"{'Mbit/s/rank':>12} {'wrong':>6}")
    for r in rows:
        print(f"{r['window']:>7} {fmt_size(r['bytes']):>8} {r['iters']:>6} {r['time_us']:>12.1f} "
              f"{r['algbw_MBps']:>11.2f} {r['busbw_MBps']:>11.2f} {r['algbw_MBps'] * 8:>12.1f} {r['wrong']:>6}")
    print(f"# service counters: {json.dumps(srv)}")
    print(f"# rank 0 counters: {json.dumps(cli)}")
    if a.lab and cli.get("rtt_us"):  # what nezha's INA rail takes by default here
        from nezha.rails.ina.client import window_why
        rate = parse_rate(a.rate) / 8
        print(f"# nezha's default window at the rail's rate and rank 0's PING round trip "
              f"({cli['rtt_us']:.0f} us, median of registration's): "
              f"{window_why(cli['chunk_bytes'], rate, cli['rtt_us'] * 1e-6, cli.get('nslots'))}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"where": where, "argv": sys.argv, "rows": rows, "service": srv, "client": cli}, f, indent=1)


if __name__ == "__main__":
    main()
