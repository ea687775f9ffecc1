#!/usr/bin/env python
"""The first large allreduce after start vs the learned optimum, start-up probe on and off.

Builds a 4-host lab with rails 400 + 100 Mbit/s (or uses --lab), and for each repetition and
each NEZHA_PROBE mode starts a fresh job (one rank per host, NEZHA_SOCKET_IFNAME=rail0,rail1:
veth, whose nominal speed nezha does not trust) that runs --count back-to-back allreduces of
--size bytes, each after a barrier. The learned optimum is the median of collectives 10..19
(the model is HOT by then). Prints a table and, with --json, writes every row.
    flock /tmp/nezha-timing.lock python bench/first_collective.py [--reps 3] [--json F]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def worker(args):
    """One rank: Communicator(), then timed allreduces; JSON lines on rank 0."""
    import numpy as np

    t0 = time.perf_counter()
    import nezha
    comm = nezha.Communicator()
    init_ms = (time.perf_counter() - t0) * 1e3
    a = np.ones(args.size // 4, np.float32)
    if args.force_prior:
        # control: the cold bucket's split forced to rail0 = this % (the probe's rates, if
        # any, replaced as the prior; measurements still replace it from the first sync)
        m = comm.planner.model
        m.nominal = [args.force_prior if comm._mesh.chan_name(c).split("#")[0] == "rail0"
                     else 100.0 - args.force_prior for c in range(comm.nchan)]
        m.prior_known = True
        m.version += 1
    if args.learn_cold:
        # control: the model learns from each bucket's cold call again (as before session 28)
        comm.planner.model.skip_cold = False
    if args.prespare:
        # diagnostic: the in-place allreduce's spare (it runs out of place into it, for
        # failover: executor._out_of_place) made and touched now, before the timed calls
        sp = comm._spare("snap", a.nbytes)
        sp[::4096] = 1
    if args.warmup:
        # diagnostic: one allreduce of the same size on another buffer, split evenly, that
        # the cost model never sees (key None: not recorded), so the timed first collective
        # still runs on the prior but no longer pays whatever the first large run costs
        from nezha._core import engine as _eng
        from nezha.buffers import address
        from nezha.planner import ALGO_RING, Plan
        from nezha.topo.rateprobe import _run
        from nezha.types import DType, ReduceOp
        w = np.ones_like(a)
        k = w.size // comm.nchan
        plan = Plan([(c, c * k, k if c < comm.nchan - 1 else w.size - c * k)
                     for c in range(comm.nchan)], ALGO_RING, None, 4)
        comm.barrier()
        _run(comm, "warm-up", 0xA0000010, w, DType.FLOAT32, ReduceOp.SUM, plan,
             lambda s, algo, chan, off, c, src: _eng.ring_allreduce(
                 s, chan, address(w) + off * 4, address(src) + off * 4, c))
    if args.prefault:
        # diagnostic: allocate, touch and free a payload-sized block twice, so that glibc
        # serves the next one (the executor's snapshot of an in-place input, with failover)
        # from heap pages already touched (no network, no collective, no model change)
        for _ in range(2):
            b = np.empty_like(a)
            b.fill(0)
            del b
    if args.prefault_mb:
        # diagnostic: touch and free this much fresh memory just before the timed loop, so
        # that the pages the job's first calls take (the kernel's socket buffers, the spare)
        # are ones the host has backed again (this VM's free page reporting, see
        # docs/results/session26/first-job)
        b = np.empty(args.prefault_mb << 20, np.uint8)
        b[::4096] = 1
        del b
    phases = time_phases() if args.phases else None
    rows = []
    net = [tcp_counters()] if args.netstat else None
    cpu = cpu_counters() if args.cpustat else None
    chan = []   # per call: ms from the run's start to each channel's last op (this rank)
    for i in range(args.count):
        comm.barrier()
        t0 = time.perf_counter()
        comm.allreduce(a)
        t1 = time.perf_counter()
        chan.append([round(ns / 1e6, 2) for ns, _ in comm._engine.channel_times_ns()])
        if i < args.ss or (args.ss and i == args.count - 1):
            out = subprocess.run(["ss", "-tinH", "state", "established"], capture_output=True,
                                 text=True, timeout=10).stdout
            print(f"SS {comm.rank} {i} " + json.dumps(out), flush=True)
        if cpu is not None:
            now = cpu_counters()
            use = {k: now[k] - cpu[k] for k in now}
            cpu = now
        if net is not None:
            net.append(tcp_counters())
        if phases is not None:
            phases.append(dict(phases.pop(0), total=(t1 - t0) * 1e3))
            phases.insert(0, {})
        if comm.rank == 0:
            shares = {}
            for c, _, cnt in comm._st.last_plan.slices:
                name = comm._mesh.chan_name(c)
                shares[name] = shares.get(name, 0) + cnt / a.size
            rows.append(dict(i=i, ms=(t1 - t0) * 1e3, shares=shares,
                             **({"cpu": use} if cpu is not None else {})))
    if phases is not None:
        calls = phases[1:]
        keys = sorted({k for c in calls for k in c})
        med = {k: statistics.median(c.get(k, 0) for c in calls[10:20]) for k in keys}
        print(f"PHASES {comm.rank} " + json.dumps(
            [{k: round(v, 2) for k, v in c.items()} for c in calls[:3]]
            + [{k: round(v, 2) for k, v in med.items()}]), flush=True)
    print(f"CHAN {comm.rank} " + json.dumps(chan), flush=True)
    if net is not None:
        deltas = [{k: b[k] - a_[k] for k in b if b[k] != a_[k]} for a_, b in zip(net, net[1:])]
        print(f"NET {comm.rank} " + json.dumps(deltas[:3] + [sum_counts(deltas[3:])]), flush=True)
    if comm.rank == 0:
        st = comm.stats()
        print("RUN " + json.dumps(dict(init_ms=init_ms, probe=st["probe"], rows=rows,
                                       rates=st["model"]["rates_mbps"])), flush=True)
    comm.close()


def time_phases():
    """Diagnostic: ms spent per call in the executor's steps (plan + schedule, the snapshot's
    buffer, the run on the rails, the conclusion, the model's feed). Returns a list whose
    first dict is the call in progress (the caller rotates it)."""
    import numpy as np

    from nezha import buffers, executor, planner
    acc = [{}]

    def wrap(cls, name, label):
        f = getattr(cls, name)

        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                return f(*a, **kw)
            finally:
                acc[0][label] = acc[0].get(label, 0) + (time.perf_counter() - t) * 1e3
        setattr(cls, name, timed)
    for cls, name, label in ((executor.Executor, "_schedule", "schedule"),
                             (executor.Executor, "_run", "run"),
                             (executor.Executor, "_conclude", "conclude"),
                             (executor.Executor, "_feed_model", "feed"),
                             (executor.Executor, "_execute", "execute"),
                             (planner.Planner, "split", "split"),
                             (buffers.Spares, "get", "spare")):
        wrap(cls, name, label)
    copyto = np.copyto  # the snapshot's copy (and any other in the call)

    def timed_copyto(*a, **kw):
        t = time.perf_counter()
        try:
            return copyto(*a, **kw)
        finally:
            acc[0]["copyto"] = acc[0].get("copyto", 0) + (time.perf_counter() - t) * 1e3
    np.copyto = timed_copyto
    return acc


CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_counters():
    """Diagnostic: the machine's CPU time per kind (/proc/stat, ms, both cores summed) and
    this process's own (all threads), read after each call (outside the timed part); the
    row of call i holds the deltas since the previous read (that call plus its barrier)."""
    tick = 1e3 / os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        vals = f.readline().split()[1:1 + len(CPU_FIELDS)]
    out = {k: int(v) * tick for k, v in zip(CPU_FIELDS, vals)}
    t = os.times()
    out.update(proc_user=t.user * 1e3, proc_sys=t.system * 1e3, reported_kib=reported_kib())
    import resource
    out["minflt"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt   # this process's
    with open("/proc/vmstat") as f:   # the machine's huge-page faults and compactions
        for ln in f:
            k, v = ln.split()
            if k in ("thp_fault_alloc", "pgfault", "compact_stall"):
                out[k] = int(v)
    return out


def reported_kib():
    """KiB of free memory the guest kernel has reported to the hypervisor so far (free page
    reporting: the host may drop their backing; the next touch faults on the host), or 0."""
    try:
        with open("/sys/module/page_reporting/parameters/reported_kib") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


NET_KEYS = ("RetransSegs", "TCPTimeouts", "TCPLossProbes", "TCPSackRecovery", "TCPLostRetransmit",
            "TCPFastRetrans", "TCPSlowStartRetrans", "TCPSpuriousRTOs")


def tcp_counters():
    """This host's (network namespace's) TCP loss counters from /proc/net/{snmp,netstat}."""
    got = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        with open(path) as f:
            lines = f.read().splitlines()
        for head, vals in zip(lines[::2], lines[1::2]):
            got.update(zip(head.split()[1:], map(int, vals.split()[1:])))
    return {k: got.get(k, 0) for k in NET_KEYS}


def sum_counts(ds):
    """Counters summed over a list of deltas."""
    out = {}
    for d in ds:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def summarize(run, lo=10, hi=20):
    """first ms, optimum (median of collectives lo..hi-1) and their ratio."""
    ms = [r["ms"] for r in run["rows"]]
    hi = min(hi, len(ms))
    lo = min(lo, hi - 1)
    opt = statistics.median(ms[lo:hi])
    return dict(first_ms=ms[0], second_ms=ms[1], opt_ms=opt, ratio=ms[0] / opt,
                first_split=run["rows"][0]["shares"], opt_split=run["rows"][hi - 1]["shares"],
                init_ms=run["init_ms"], probe=run["probe"])


def main():
    """Driver."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--size", default="16M")
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--modes", default="auto,off", help="NEZHA_PROBE values to compare")
    p.add_argument("--rates", default="400mbit,100mbit")
    p.add_argument("--lab", default=None, help="use this running lab")
    p.add_argument("--json", default=None)
    p.add_argument("--log", default=None, help="append every job's output to this file")
    p.add_argument("--prefault", action="store_true",
                   help="diagnostic: touch and free two payload-sized blocks before the timed ones")
    p.add_argument("--warmup", action="store_true",
                   help="diagnostic: one unrecorded evenly split allreduce before the timed ones")
    p.add_argument("--phases", action="store_true",
                   help="diagnostic: every rank prints ms per executor step (PHASES lines in "
                        "--log: calls 1, 2, 3, then the median of 10..19)")
    p.add_argument("--netstat", action="store_true",
                   help="diagnostic: every rank prints its host's TCP loss counters per call "
                        "(NET lines in --log: calls 1, 2, 3, then the rest summed)")
    p.add_argument("--cpustat", action="store_true",
                   help="diagnostic: rank 0 records the machine's CPU time per kind (steal, "
                        "softirq, idle, ...) and its own, per call (rows' cpu in --json)")
    p.add_argument("--ss", type=int, default=0,
                   help="diagnostic: every rank prints `ss -tin` (its TCP sockets' cwnd, "
                        "pacing, BBR state) after each of the first N calls and the last (SS "
                        "lines in --log; outside the timed part, but it lengthens the gap)")
    p.add_argument("--metrics", action="store_true",
                   help="diagnostic: after every job record `ip tcp_metrics show` of every "
                        "lab host (the kernel's per-destination TCP metrics cache)")
    p.add_argument("--flush-metrics", action="store_true",
                   help="diagnostic: `ip tcp_metrics flush all` in every lab host before "
                        "every job (each job starts as if in a fresh namespace)")
    p.add_argument("--gap", type=float, default=0.0,
                   help="diagnostic: idle seconds before every job (the first one too)")
    p.add_argument("--force-prior", type=float, default=0.0,
                   help="control: the first calls' split (the prior) forced to rail0 = PCT %%")
    p.add_argument("--learn-cold", action="store_true",
                   help="control: the cost model learns from the first call (skip_cold off)")
    p.add_argument("--prespare", action="store_true",
                   help="diagnostic: every rank makes and touches the in-place spare (the "
                        "failover run's out-of-place target) before the timed calls")
    p.add_argument("--prefault-mb", type=int, default=0,
                   help="diagnostic: every rank touches and frees this many MiB right before "
                        "the timed calls")
    p.add_argument("--gap-busy", action="store_true",
                   help="diagnostic: keep every CPU busy (a spinning process each) during --gap")
    p.add_argument("-x", action="append", default=[], help="extra K=V for the ranks")
    args = p.parse_args()
    from _common import parse_size  # bench/ is on sys.path when run as a script
    args.size = parse_size(args.size)
    if args.worker:
        return worker(args)

    from nezha.lab import Lab, LabSpec
    lab = Lab.attach(args.lab) if args.lab else Lab(LabSpec(hosts=4, rails=2, rates=args.rates,
                                                            name="nzfc"))
    if not args.lab:
        lab.up(replace=True)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--size", str(args.size),
           "--count", str(args.count)]
    for flag in ("warmup", "prefault", "netstat", "phases", "cpustat", "prespare",
                 "learn_cold"):                                         # the ranks' switches
        cmd += [f"--{flag.replace('_', '-')}"] if getattr(args, flag) else []
    for flag in ("prefault_mb", "ss", "force_prior"):                      # the ranks' numbers
        cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))] if getattr(args, flag) else []
    runs = []
    try:
        for rep in range(args.reps):
            for mode in args.modes.split(","):
                env = dict(os.environ, PYTHONPATH=ROOT, NEZHA_SOCKET_IFNAME="rail0,rail1",
                           NEZHA_PROBE=mode)
                env.update(kv.split("=", 1) for kv in args.x)
                if args.flush_metrics:
                    for h in range(lab.hosts):
                        lab.exec(h, ["ip", "tcp_metrics", "flush", "all"], check=False)
                rep_kib = reported_kib()
                if args.gap:
                    burn = [subprocess.Popen([sys.executable, "-c", "while 1: pass"])
                            for _ in range(os.cpu_count() or 1)] if args.gap_busy else []
                    time.sleep(args.gap)
                    for b in burn:
                        b.kill()
                        b.wait()
                rep_kib = reported_kib() - rep_kib   # reported during the gap
                res = lab.run(cmd, env=env, timeout=600, capture=True)
                got = [json.loads(ln[4:]) for ln in (res.stdout or "").splitlines()
                       if ln.startswith("RUN ")]
                if args.log:
                    with open(args.log, "a") as f:
                        f.write(f"=== rep {rep} NEZHA_PROBE={mode}\n{res.stdout or ''}"
                                f"{res.stderr or ''}")
                if res.returncode != 0 or not got:
                    print((res.stdout or "") + (res.stderr or ""), file=sys.stderr)
                    return 1
                runs.append({"rep": rep, "mode": mode, **got[0], **summarize(got[0]),
                             "gap_reported_kib": rep_kib})
                if args.metrics:
                    runs[-1]["tcp_metrics"] = {
                        h: lab.exec(h, ["ip", "tcp_metrics", "show"], check=False).stdout
                        for h in range(lab.hosts)}
    finally:
        if not args.lab:
            lab.down()

    print(f"# first {args.size >> 20} MiB allreduce after start vs the learned optimum (median "
          f"of collectives 10..19); 4 hosts x 1 rank, rails {args.rates}"
          + ("; after one unrecorded warm-up allreduce" if args.warmup else "")
          + ("; after pre-faulting two payload-sized blocks" if args.prefault else ""))
    print(f"{'# probe':<9}{'rep':>4}{'init ms':>9}{'probe ms':>10}{'probe split':>13}"
          f"{'1st ms':>9}{'2nd ms':>9}{'opt ms':>9}{'1st/opt':>9}  1st split -> learned split")
    for r in runs:
        pr = r["probe"]
        psplit = (f"{100 * pr['mbps']['rail0'] / sum(pr['mbps'].values()):.1f}%"
                  if pr.get("probed") else "-")
        fs = "/".join(f"{100 * v:.1f}" for v in r["first_split"].values())
        os_ = "/".join(f"{100 * v:.1f}" for v in r["opt_split"].values())
        print(f"{r['mode']:<9}{r['rep']:>4}{r['init_ms']:>9.0f}"
              f"{pr.get('ms', 0):>10.0f}{psplit:>13}{r['first_ms']:>9.1f}{r['second_ms']:>9.1f}"
              f"{r['opt_ms']:>9.1f}{r['ratio']:>9.3f}  {fs} -> {os_}")
    for mode in args.modes.split(","):
        rs = [r["ratio"] for r in runs if r["mode"] == mode]
        print(f"# NEZHA_PROBE={mode}: 1st/opt median {statistics.median(rs):.3f}, "
              f"worst {max(rs):.3f} over {len(rs)} runs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(size=args.size, rates=args.rates, count=args.count,
                           warmup=args.warmup, prefault=args.prefault, extra_env=args.x,
                           runs=runs), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
