#!/usr/bin/env python
"""Issue #6 baselines: what Gloo and Open MPI do when one host's rail fails mid-job.

The driver builds its own lab ("nzfb": 4 hosts x 2 rails at 400 Mbit/s; always torn down), and
for each system and failure mode (down = switch port down / NO-CARRIER, blackhole = link up but
every frame dropped) runs back-to-back 1 MiB float32 sum-allreduces on 4 ranks (one per host),
checks every result on every rank (small integers, so the sums are exact), cuts host 1's rail 1
a few seconds in and heals it 3 s later (the issue's scenario), then repeats everything with a
40 s cut (longer than the hang verdict: the rail is not back in time). Every rank prints one
progress line per allreduce (iteration, wall time), which the driver reads live, so it tells
"slow" from "hung": a rank with no progress for --hang-s (30 s) is declared hung and the job
is killed. Per rank it
records: completed (and its longest stall), raised an error (which, how long after the cut),
hung, or produced a wrong result.

Systems (the recipes of shared/LAB.md §2 and bench/_backends.py):
    gloo-2rail  torch.distributed Gloo, GLOO_SOCKET_IFNAME=rail0,rail1 (one device per rail)
    gloo-rail1  Gloo, GLOO_SOCKET_IFNAME=rail1 (the failed rail is its only rail)
    mpi-2rail   Open MPI 5 + mpi4py Allreduce, pml ob1, TCP BTL on rail0,rail1, ring allreduce;
                mpirun/PMIx bootstrap on the unshaped mgmt network
Both Gloo variants rendezvous through the TCPStore on host 0's mgmt address (so the store is
not what fails). Library defaults are kept (Gloo's process-group timeout is torch's default).

    python bench/failover_baselines.py [--systems gloo-2rail,gloo-rail1,mpi-2rail]
                                       [--modes down,blackhole] [--cut-s 3,40] [--hang-s 30]
Outputs: bench/out/failover_baselines.md (printed too) and bench/out/failover_baselines.json.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

LAB_NAME = "nzfb"
FAIL_HOST, FAIL_RAIL = 1, 1
SIZE = 1 << 20
# Forced ring allreduce (as the comparison suite's mpi-*-ring rows): the fast configuration.
MPI_RING = (("coll_tuned_use_dynamic_rules", "1"), ("coll_tuned_allreduce_algorithm", "4"))
SYSTEMS = {
    "gloo-2rail": {"kind": "gloo", "rails": "rail0,rail1"},
    "gloo-rail1": {"kind": "gloo", "rails": "rail1"},
    "mpi-2rail": {"kind": "mpi", "rails": "rail0,rail1"},
}


# ------------------------------------------------------------------------------ the rank

def worker(args):
    """One rank: allreduce until the stop file is seen by any rank (agreed through the sum)."""
    import numpy as np

    def say(*parts):
        print(*parts, flush=True)

    if args.system_kind == "gloo":
        import torch
        import torch.distributed as dist
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group("gloo", rank=rank, world_size=size)  # env:// (MASTER_ADDR on mgmt)

        def allreduce(a):
            dist.all_reduce(torch.from_numpy(a))
    else:
        from mpi4py import MPI
        world = MPI.COMM_WORLD   # mpi4py's default error handler raises MPI.Exception
        rank, size = world.rank, world.size

        def allreduce(a):
            world.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)

    n = args.size // 4
    base = (np.arange(n) % 7).astype(np.float32)
    expect = base * size + size * (size - 1) // 2        # rank r contributes base + r
    a = np.empty(n, np.float32)
    say(f"READY {rank} {time.time():.4f}")
    i = 0
    while True:
        a[:] = base + rank
        a[0] = 1.0 if os.path.exists(args.stop) else 0.0  # the stop flag rides along
        try:
            allreduce(a)
        except BaseException as e:  # noqa: BLE001 - recording it is the point
            msg = " ".join(f"{type(e).__name__}: {e}".split())[:400]
            say(f"ERR {rank} {i} {time.time():.4f} {msg}")
            sys.stderr.flush()
            os._exit(3)
        t = time.time()
        if a[0] > 0:
            break
        i += 1
        say(f"P {rank} {i} {t:.4f} {int(np.array_equal(a[1:], expect[1:]))}")
    say(f"DONE {rank} {i} {time.time():.4f}")
    if args.system_kind == "gloo":
        sys.stdout.flush()
        os._exit(0)   # no destroy_process_group: it may block on a peer that is already gone


# ------------------------------------------------------------------------------ the driver

_LINE = re.compile(r"^(?:\[\d+\]\s*)?(READY|P|ERR|DONE) (\d+) (\d+(?:\.\d+)?)(?: (\S+))?(?: (.*))?$")


class Job:
    """One running job: its processes and what its ranks have said so far (read live)."""

    def __init__(self, lab, nranks):
        self.lab, self.n = lab, nranks
        self.marker = uuid.uuid4().hex[:16]
        self.procs, self.threads = [], []
        self.lock = threading.Lock()
        self.ranks = {r: {"ready": None, "iters": [], "err": None, "done": None, "last_seen": None}
                      for r in range(nranks)}
        self.stderr = []

    def _pump(self, stream, is_err):
        for line in iter(stream.readline, ""):
            now = time.time()
            m = None if is_err else _LINE.match(line.strip())
            with self.lock:
                if m is None:
                    self.stderr.append(line.rstrip("\n"))
                    del self.stderr[:-200]
                    continue
                kind, r, x, y, rest = m.groups()
                st = self.ranks.get(int(r))
                if st is None:
                    continue
                if kind == "READY":
                    st["ready"] = float(x)
                    st["last_seen"] = now
                elif kind == "P":
                    st["iters"].append((int(x), float(y), int(rest or "1")))
                    st["last_seen"] = now
                elif kind == "ERR":
                    st["err"] = (int(x), float(y), (rest or "").strip())
                elif kind == "DONE":
                    st["done"] = (int(x), float(y))
        stream.close()

    def start(self, argvs_envs):
        """Start one process per (argv, env, host-or-None); read their output in threads."""
        for argv, env, host in argvs_envs:
            env = dict(env, NEZHA_LAB_JOB=self.marker)
            kw = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE,
                  "text": True, "errors": "replace", "start_new_session": True}
            p = (self.lab.popen(host, argv, env=env, **kw) if host is not None
                 else subprocess.Popen(argv, env=env, **kw))
            self.procs.append(p)
            for stream, is_err in ((p.stdout, False), (p.stderr, True)):
                t = threading.Thread(target=self._pump, args=(stream, is_err), daemon=True)
                t.start()
                self.threads.append(t)

    def snapshot(self):
        """A copy of the per-rank state."""
        with self.lock:
            return {r: dict(st, iters=list(st["iters"])) for r, st in self.ranks.items()}

    def alive(self):
        """True while any process of the job runs."""
        return any(p.poll() is None for p in self.procs)

    def kill(self):
        """Stop every process of the job (process groups, then anything carrying its marker)."""
        from nezha.lab import launch
        launch._stop(self.lab, self.procs, self.marker)

    def finish(self):
        """Wait for the output readers."""
        for t in self.threads:
            t.join(timeout=5)


def start_job(lab, sysname, mode_idx, stop, port):
    """Start the ranks of one system; returns the Job."""
    from nezha.lab import launch
    spec = SYSTEMS[sysname]
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--system-kind", spec["kind"],
           "--size", str(SIZE), "--stop", stop]
    job = Job(lab, lab.hosts)
    base = launch.job_env(lab, {"PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1",
                                "PYTHONUNBUFFERED": "1"})
    if spec["kind"] == "gloo":
        runs = []
        for r in range(lab.hosts):
            env = dict(base, RANK=str(r), WORLD_SIZE=str(lab.hosts), LOCAL_RANK="0",
                       MASTER_ADDR=lab.mgmt_addr(0), MASTER_PORT=str(port),
                       GLOO_SOCKET_IFNAME=spec["rails"])
            runs.append((cmd, env, r))
        job.start(runs)
    else:
        mca = (("btl_tcp_if_include", spec["rails"]),) + MPI_RING
        argv = launch.mpirun_argv(lab, cmd, lab.hosts, mca)
        env = dict(base, PMIX_MCA_ptl_base_if_include="mgmt")   # PMIx/bootstrap on mgmt (LAB.md §2)
        job.start([(argv, env, None)])
    return job


def run_one(lab, sysname, mode, cut_s, k, opts):
    """One system x mode x cut length: start, cut, heal, watch; returns the raw record."""
    stop = f"/tmp/nzfb-stop-{os.getpid()}-{k}"
    if os.path.exists(stop):
        os.remove(stop)
    lab.reset()
    # Forget neighbour (ARP) entries left FAILED by the previous run's cut: with them a new job's
    # first connect over the healed rail fails at once with EHOSTUNREACH (seen with Open MPI).
    for h in range(lab.hosts):
        lab.exec(h, ["ip", "neigh", "flush", "all"], check=False)
    c0 = lab.counters()
    job = start_job(lab, sysname, k, stop, 29600 + k)
    rec = {"system": sysname, "kind": SYSTEMS[sysname]["kind"], "rails": SYSTEMS[sysname]["rails"],
           "mode": mode, "cut_s": cut_s, "fail": {"host": FAIL_HOST, "rail": FAIL_RAIL},
           "size": SIZE, "t_start": time.time(), "t_cut": None, "t_heal": None, "t_healed": None,
           "t_stop": None, "killed_at": None, "kill_reason": None, "hung": {}, "note": ""}
    try:
        # 1. every rank has done an allreduce
        deadline = time.time() + opts.startup_s
        while True:
            snap = job.snapshot()
            if all(st["iters"] for st in snap.values()):
                break
            if not job.alive() or any(st["err"] for st in snap.values()) or time.time() > deadline:
                rec["note"] = "did not start"
                return finish(job, rec, "startup failure")
            time.sleep(0.05)
        rec["t_first"] = max(st["iters"][0][1] for st in snap.values())
        cut_at = time.time() + opts.warm_s
        # 2. one loop for the rest: cut, heal, stop once every rank ran steadily after the heal;
        #    declare a rank hung after hang_s without progress (also while the rail is cut)
        while job.alive():
            now = time.time()
            if rec["t_cut"] is None and now >= cut_at:
                rec["t_cut"] = time.time()
                lab.fail(FAIL_HOST, FAIL_RAIL, mode)
            elif rec["t_cut"] is not None and rec["t_heal"] is None and now >= rec["t_cut"] + cut_s:
                heal(lab, rec)
            snap = job.snapshot()
            live = [r for r, st in snap.items() if st["err"] is None and st["done"] is None]
            if rec["t_heal"] is not None and rec["t_stop"] is None and now >= rec["t_heal"] + opts.post_s:
                recovered = all(sum(1 for _, t, _ in snap[r]["iters"] if t > rec["t_healed"])
                                >= opts.post_iters for r in live)
                if recovered or now >= rec["t_heal"] + opts.post_s + opts.hang_s + 5:
                    open(stop, "w").close()
                    rec["t_stop"] = now
            for r in live:
                last = snap[r]["last_seen"] or rec["t_start"]
                if r not in rec["hung"] and now - last >= opts.hang_s:
                    rec["hung"][r] = last + opts.hang_s
            if live and all(r in rec["hung"] for r in live):
                return finish(job, rec, f"no progress for {opts.hang_s:g} s on every running rank")
            if rec["t_cut"] is not None and now > rec["t_cut"] + opts.max_s:
                return finish(job, rec, f"hard limit {opts.max_s:g} s after the cut")
            time.sleep(0.05)
        return finish(job, rec, None)
    except BaseException:
        job.kill()
        raise
    finally:
        if rec["t_cut"] is not None and rec["t_heal"] is None:
            heal(lab, rec)   # the job ended (or was killed) while the rail was still cut
        rec["counters"] = {f"{h}/{r}": [b[0] - c0[(h, r)][0], b[1] - c0[(h, r)][1]]
                           for (h, r), b in lab.counters().items()}
        if os.path.exists(stop):
            os.remove(stop)


def heal(lab, rec):
    """Undo the cut; t_heal = when the cut is undone, t_healed = when the link carries traffic."""
    rec["t_heal"] = time.time()
    lab.heal(FAIL_HOST, FAIL_RAIL)
    rec["t_healed"] = time.time()


def finish(job, rec, kill_reason):
    """Kill the job if asked (or if it is still running) and attach its per-rank record."""
    if kill_reason or job.alive():
        rec["killed_at"] = time.time()
        rec["kill_reason"] = kill_reason or "still running"
        job.kill()
    else:
        for p in job.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    job.finish()
    rec["t_end"] = time.time()
    rec["returncodes"] = [p.returncode for p in job.procs]
    rec["ranks"] = {str(r): st for r, st in job.snapshot().items()}
    rec["stderr_tail"] = job.stderr[-40:]
    rec["per_rank"] = {str(r): classify(rec, r) for r in range(job.n)}
    return rec


def classify(rec, r):
    """What happened to rank r: outcome, seconds after the cut, allreduces before/after it."""
    st = rec["ranks"][str(r)]
    tc = rec["t_cut"]
    its = st["iters"]
    wrong = sum(1 for _, _, ok in its if not ok)
    out = {"wrong": wrong, "total": len(its), "before": None, "after": None, "after_heal": None,
           "max_stall_s": None, "at_s": None}
    if tc is not None:
        out["before"] = sum(1 for _, t, _ in its if t < tc)
        out["after"] = sum(1 for _, t, _ in its if t >= tc)
        out["after_heal"] = (sum(1 for _, t, _ in its if t > rec["t_healed"])
                             if rec["t_healed"] else 0)
        times = [t for _, t, _ in its]
        prev = [t for t in times if t < tc][-1:] or [tc]
        seq = prev + [t for t in times if t >= tc]
        end = (st["done"][1] if st["done"] else st["err"][1] if st["err"]
               else rec.get("killed_at") or rec["t_end"])
        gaps = [b - a for a, b in zip(seq, seq[1:] + [end])]
        out["max_stall_s"] = round(max(gaps), 3) if gaps else None
    if st["err"]:
        out["outcome"] = "error"
        out["error"] = st["err"][2]
        out["at_s"] = round(st["err"][1] - tc, 2) if tc else None
    elif st["done"]:
        out["outcome"] = "completed"
    elif str(r) in {str(k) for k in rec["hung"]}:
        out["outcome"] = "hung"
        out["at_s"] = round(rec["hung"][r] - tc, 2) if tc else None
    else:
        out["outcome"] = "killed" if rec["kill_reason"] else "exited"
        out["at_s"] = round((rec.get("killed_at") or rec["t_end"]) - tc, 2) if tc else None
    if wrong:
        out["outcome"] += f" + {wrong} WRONG results"
    return out


# ------------------------------------------------------------------------------ report

def _short_err(msg):
    """A table-sized version of an error message."""
    m = re.search(r"(Connection reset by peer|Connection closed by peer|Timed out|Broken pipe|"
                  r"No route to host|Connection refused|timed out|MPI_ERR_\w+)", msg)
    return m.group(1) if m else msg[:60]


def summary_row(rec):
    """One markdown row per run: ranks grouped by what happened."""
    pr = rec["per_rank"]
    groups = {}
    for r, o in sorted(pr.items()):
        key = o["outcome"]
        if o["outcome"] == "error":
            key = f"error `{_short_err(o['error'])}`"
        groups.setdefault(key, []).append(r)
    parts, times = [], []
    for key, rs in groups.items():
        who = "all" if len(rs) == len(pr) else "r" + ",".join(rs)
        extra = ""
        if key.startswith("completed"):
            stall = max(pr[r]["max_stall_s"] or 0 for r in rs)
            extra = f" (longest stall {stall:.1f} s)"
        parts.append(f"{who}: {key}{extra}")
        ats = [pr[r]["at_s"] for r in rs if pr[r]["at_s"] is not None]
        if ats and not key.startswith("completed"):
            label = key.split(" ")[0]
            spread = f"–{max(ats):.1f}" if max(ats) - min(ats) >= 0.1 else ""
            times.append(f"{label} {min(ats):.1f}{spread} s")
    if rec.get("note"):
        parts.append(rec["note"])
    bef = sorted({pr[r]["before"] for r in pr if pr[r]["before"] is not None})
    aft = sorted({pr[r]["after"] for r in pr if pr[r]["after"] is not None})
    rng = lambda v: "?" if not v else str(v[0]) if len(v) == 1 else f"{v[0]}–{v[-1]}"
    return (f"| {rec['system']} | {rec['rails']} | {rec['mode']} | {rec['cut_s']:g} s | {'; '.join(parts)} | "
            f"{', '.join(times) or '—'} | {rng(bef)} / {rng(aft)} |")


def render(results, opts, elapsed):
    """The markdown report."""
    intro = (f"Lab `{LAB_NAME}`: 4 hosts x 2 rails at {opts.rate}/rail. 4 ranks (one per host) run "
             "back-to-back 1 MiB float32 sum-allreduces, every result checked on every rank. "
             f"{opts.warm_s:g} s after every rank has completed its first allreduce, host "
             f"{FAIL_HOST}'s rail {FAIL_RAIL} is cut (`down`: switch port down, host sees NO-CARRIER; "
             "`blackhole`: link up, all frames dropped) and healed after the time in column `cut`. "
             f"A rank with no progress for {opts.hang_s:g} s is declared hung and the job is killed. "
             "Times are seconds after the cut. Last column: allreduces completed before / after the "
             "cut (range over ranks).")
    lines = ["# Rail failure baselines: Gloo and Open MPI (issue #6)", "", intro, "",
             ("| system | rails given | mode | cut | outcome (per rank) | time to error / hang "
              "verdict | allreduces before / after cut |"),
             "|---|---|---|---|---|---|---|"]
    lines += [summary_row(r) for r in results]
    lines += ["", "Per rank:", "",
              ("| system | mode | cut | rank | outcome | at (s after cut) | before / after cut | "
               "after heal | longest stall s | error |"),
              "|---|---|---|---|---|---|---|---|---|---|"]
    for rec in results:
        for r, o in sorted(rec["per_rank"].items()):
            lines.append(f"| {rec['system']} | {rec['mode']} | {rec['cut_s']:g} s | {r} | {o['outcome']} | "
                         f"{'—' if o['at_s'] is None else o['at_s']} | {o['before']} / {o['after']} | "
                         f"{o['after_heal']} | {o['max_stall_s']} | "
                         f"{(o.get('error') or '').replace('|', '/')[:160]} |")
    lines += ["", ("Rail bytes sent during each run (all hosts, MB: rail0 / rail1), proving where the "
                   "data went:"), ""]
    for rec in results:
        tx = [sum(v[0] for k, v in rec["counters"].items() if k.endswith(f"/{r}")) / 1e6
              for r in range(2)]
        lines.append(f"- {rec['system']} {rec['mode']} {rec['cut_s']:g} s: {tx[0]:.0f} / {tx[1]:.0f}"
                     + (f"; job killed: {rec['kill_reason']}" if rec["kill_reason"] else ""))
    lines += ["", ("Systems: gloo = torch.distributed Gloo (store on mgmt, torch's default timeout), "
                   "GLOO_SOCKET_IFNAME as given; mpi = Open MPI 5 + mpi4py `Allreduce`, pml ob1, "
                   "btl tcp,self, `btl_tcp_if_include` as given, ring allreduce "
                   "(coll_tuned_allreduce_algorithm 4), mpirun/PMIx on mgmt."),
              f"Command: `{' '.join(['python bench/failover_baselines.py', *opts.argv])}` — {elapsed:.0f} s."]
    return "\n".join(lines) + "\n"


def main():
    """Driver (or one rank with --worker)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--system-kind", help=argparse.SUPPRESS)
    p.add_argument("--size", type=int, default=SIZE, help=argparse.SUPPRESS)
    p.add_argument("--stop", help=argparse.SUPPRESS)
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--modes", default="down,blackhole")
    p.add_argument("--rate", default="400mbit")
    p.add_argument("--warm-s", type=float, default=3.0, help="allreduces before the cut")
    p.add_argument("--cut-s", default="3,40",
                   help="how long the rail stays cut, s (comma list: one run per value); 3 = the "
                        "issue's scenario, 40 = longer than the hang verdict, i.e. no heal in time")
    p.add_argument("--post-s", type=float, default=5.0, help="run at least this long after the heal")
    p.add_argument("--post-iters", type=int, default=20,
                   help="allreduces every rank must complete after the heal before stopping")
    p.add_argument("--hang-s", type=float, default=30.0, help="no progress this long = hung")
    p.add_argument("--startup-s", type=float, default=120.0)
    p.add_argument("--max-s", type=float, default=100.0, help="hard limit per run after the cut")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "failover_baselines"))
    args = p.parse_args()
    if args.worker:
        return worker(args)
    args.argv = sys.argv[1:]
    for s in args.systems.split(","):
        if s not in SYSTEMS:
            p.error(f"unknown system {s!r}: one of {', '.join(SYSTEMS)}")

    from nezha.lab import Lab, LabSpec
    # SIGTERM/SIGHUP take the same way out as Ctrl-C, so the lab is always torn down.
    def _interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    t0 = time.time()
    lab = Lab(LabSpec(hosts=4, rails=2, rates=args.rate, name=LAB_NAME))
    results = []
    try:
        lab.up(replace=True)
        k = 0
        for cut_s in (float(c) for c in args.cut_s.split(",")):
            for sysname in args.systems.split(","):
                for mode in args.modes.split(","):
                    rec = run_one(lab, sysname, mode, cut_s, k, args)
                    k += 1
                    results.append(rec)
                    print(summary_row(rec), f"[{time.time() - t0:.0f} s]", flush=True)
    finally:
        lab.down()
    text = render(results, args, time.time() - t0)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".md", "w") as f:
        f.write(text)
    with open(args.out + ".json", "w") as f:
        json.dump({"lab": {"name": LAB_NAME, "hosts": 4, "rails": 2, "rate": args.rate},
                   "options": {k: v for k, v in vars(args).items() if k not in ("worker",)},
                   "runs": results}, f, indent=1)
    print()
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
