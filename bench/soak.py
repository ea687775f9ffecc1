#!/usr/bin/env python
"""Soak in the lab: random collectives under random rail trouble, every result checked.

4 hosts x 2 rails (--ranks-per-host N puts N ranks in each host: shared memory between
them; --ina puts an INA service on rail 1). Every rank draws the same sequence of random
collectives from one seed (allreduce in and out of place, reduce, broadcast, allgather,
reduce_scatter, alltoall, barrier; sizes 0, 1, primes, up to --max-mib; every dtype but
bfloat16 and every op it has; inputs are small integers, so float results are exact) and
checks each against a numpy oracle. A watchdog per collective calls it a hang after
--hang-s. Meanwhile a controller, over --minutes:
  * cuts a random host's random rail (down or blackhole) every few seconds, then heals it,
  * flaps one rail every 2 s (1 s down, 1 s up) for 60 s x minutes/30 (at least 8 s),
  * slows one rail to a quarter of its rate (tc) for a while, then restores it,
  * and cuts at random again until the end.
Reports collectives completed, failures injected and survived (no error, no hang, no wrong
result while it lasted, and collectives completed after its heal), the worst extra time per
failure (the slowest collective overlapping it minus the typical time of that collective
and size class in quiet periods), wrong results, hangs, as a table and JSON.
    python bench/soak.py --minutes 10 [--seed 18] [--ranks-per-host 2] [--ina]
"""
import argparse
import faulthandler
import json
import math
import os
import random
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

COLLS = ["allreduce", "allreduce_inplace", "reduce", "broadcast", "allgather",
         "reduce_scatter", "alltoall", "barrier"]
PRIMES = [2, 3, 5, 7, 13, 31, 97, 127, 1009, 4093, 8191, 65521, 131071, 262139, 524287,
          1048573, 2097143, 4194301]
STOP_EVERY = 8  # a stop-flag allreduce (also checked) after this many collectives


def draw(rng, size, max_bytes):
    """The next collective: (name, dtype, op, count, root); identical on every rank."""
    from nezha.types import DType
    from tests import oracle
    name = rng.choice(COLLS)
    dt = rng.choice([d for d in DType if d != DType.BFLOAT16])  # bfloat16 needs torch
    op = rng.choice(oracle.ops_for(dt))
    u = rng.random()
    if u < 0.1:
        count = 0
    elif u < 0.2:
        count = 1
    elif u < 0.6:
        count = rng.choice([p for p in PRIMES if p < 2000])
    else:
        count = rng.choice(PRIMES)
    per = {"allgather": size, "alltoall": size, "reduce_scatter": size}.get(name, 1)
    while count > 1 and count * dt.itemsize * per > max_bytes:
        count //= 3
    return name, dt, op, count, rng.randrange(size)


def run_one(comm, spec, seed):
    """Run one collective; returns (what was wrong or None, nbytes)."""
    import numpy as np

    from nezha.types import ReduceOp, numpy_dtype
    from tests import oracle
    name, dt, op, n, root = spec
    r, size = comm.rank, comm.size
    if name == "barrier":
        comm.barrier()
        return None, 0
    if name in ("allgather", "broadcast"):
        op = ReduceOp.SUM
    if name in ("reduce_scatter", "alltoall"):
        ins = [oracle.values(dt, n * size, k, op, seed) for k in range(size)]
    else:
        ins = [oracle.values(dt, n, k, op, seed) for k in range(size)]
    mine = ins[r].copy()
    fill = np.zeros(1, numpy_dtype(dt))
    if name == "allreduce_inplace":
        comm.allreduce(mine, op=op)
        got, want = mine, oracle.reduce(dt, op, ins)
    elif name == "allreduce":
        got = np.full_like(mine, 0x55)
        comm.allreduce(mine, got, op=op)
        want = oracle.reduce(dt, op, ins)
    elif name == "reduce":
        got = np.full_like(mine, 0x55)
        comm.reduce(mine, got, op=op, root=root)
        want = oracle.reduce(dt, op, ins) if r == root else got
    elif name == "broadcast":
        if r != root:
            mine[:] = fill[0]
        comm.broadcast(mine, root=root)
        got, want = mine, ins[root]
    elif name == "allgather":
        got = np.full(n * size, 0x55, mine.dtype)
        comm.allgather(mine, got)
        want = np.concatenate(ins)
    elif name == "reduce_scatter":
        got = np.full(n, 0x55, mine.dtype)
        comm.reduce_scatter(mine, got, op=op)
        want = oracle.reduce(dt, op, ins)[r * n:(r + 1) * n]
    else:  # alltoall: block j of rank k goes to rank j
        got = np.full(n * size, 0x55, mine.dtype)
        comm.alltoall(mine, got)
        want = np.concatenate([ins[k][r * n:(r + 1) * n] for k in range(size)])
    try:
        oracle.assert_result(got, want, dt, op)
        bad = None
    except AssertionError:
        bad = _mismatch(got, want, n)
    return bad, mine.nbytes


def _mismatch(got, want, n):
    """What a wrong result looks like: how many elements, where, a few values (JSON)."""
    import numpy as np
    g, w = np.atleast_1d(got).view(np.uint8), np.atleast_1d(want).view(np.uint8)
    if g.shape != w.shape:
        return dict(shape=[list(got.shape), list(want.shape)])
    isz = got.itemsize
    diff = (g != w).reshape(-1, isz).any(axis=1)
    idx = np.flatnonzero(diff)
    if not len(idx):  # equal bytes but unequal values (NaN) or AVG out of tolerance
        return dict(n_bad=0, note="bytes equal; tolerance or NaN")
    sample = [[int(k), repr(got.flat[k].item()), repr(want.flat[k].item())] for k in idx[:4]]
    return dict(n_bad=int(len(idx)), of=int(got.size), per_rank=int(n),
                first=int(idx[0]), last=int(idx[-1]), sample=sample,
                fill=int(np.count_nonzero(g.reshape(-1, isz)[idx] == 0x55)))


def worker(args):
    """One rank: random collectives until the stop flag; writes OUT.rankN.json."""
    import numpy as np

    import nezha
    faulthandler.enable()
    comm = nezha.Communicator()
    me = comm.rank
    rng = random.Random(args.seed)
    rows, wrong, error, hang = [], [], None, None  # rows: [t0, t1, name, nbytes, rails up]
    cur = {"t0": None, "what": None}
    out = f"{args.out}.rank{me}.json"

    def dump(extra=None):
        res = dict(rank=me, rows=rows, wrong=wrong, error=error, hang=hang or extra,
                   events=comm.stats()["events"] if me == 0 else [])
        with open(out + ".tmp", "w") as f:
            json.dump(res, f)
        os.replace(out + ".tmp", out)

    def watchdog():  # a collective running longer than --hang-s is a hang: record and die
        while True:
            time.sleep(0.5)
            t0 = cur["t0"]
            if t0 is not None and time.time() - t0 > args.hang_s:
                h = dict(at=t0, what=cur["what"], index=len(rows))
                try:
                    dump(h)
                finally:
                    faulthandler.dump_traceback(all_threads=True)
                    os._exit(3)
    threading.Thread(target=watchdog, daemon=True).start()
    flag = np.zeros(1, np.int32)
    told = None
    i = 0
    try:
        while True:
            if i % STOP_EVERY == STOP_EVERY - 1:
                flag[0] = 1 if os.path.exists(args.stop) else 0
                cur.update(what="stopflag", t0=time.time())
                comm.allreduce(flag, op=nezha.MAX)
                t1 = time.time()
                if flag[0] not in (0, 1):
                    wrong.append([i, "stopflag"])
                rows.append([cur["t0"], t1, "stopflag", 4, 0])  # noqa
                cur["t0"] = None
                if flag[0] == 1:
                    break
            else:
                spec = draw(rng, comm.size, args.max_bytes)
                name, dt, op, n, root = spec
                what = f"{name} {dt.name} {op.name} n={n} root={root}"
                t0 = time.time()
                cur.update(what=what, t0=t0)
                bad, nbytes = run_one(comm, spec, args.seed + i)
                t1 = time.time()
                cur["t0"] = None
                alive = sum(1 << c for c, ok in enumerate(comm.planner.alive) if ok)
                if comm._ina is not None:  # --ina: TCP on rail0 (bit 0), the INA rail as bit 1
                    alive = (alive & 1) | (2 if comm._ina.alive else 0)
                if bad is not None:
                    wrong.append([i, what, dict(bad, t0=t0, t1=t1, alive=alive,
                                                before=rows[-1][4] if rows else None)])
                rows.append([t0, t1, name, nbytes, alive])
                if me == 0 and alive != told:  # for the controller: only changes
                    with open(args.stop + ".alive.tmp", "w") as f:
                        f.write(str(alive))
                    os.replace(args.stop + ".alive.tmp", args.stop + ".alive")
                    told = alive
            i += 1
    except nezha.NezhaError as e:
        error = f"{type(e).__name__}: {e} (at {cur['what']})"
    dump()
    comm.close()
    return 0 if error is None and not wrong else 1


def _classify(name, nbytes):
    """Size class of a collective, for its typical time."""
    return f"{name}:{int(math.log2(nbytes)) if nbytes else -1}"


def analyse(ranks, failures, t_start, t_end):
    """The summary from every rank's record and the controller's list of failures."""
    rows0 = next((r["rows"] for r in ranks if r["rank"] == 0), [])
    hangs = [dict(rank=r["rank"], **r["hang"]) for r in ranks if r.get("hang")]
    errors = [dict(rank=r["rank"], error=r["error"]) for r in ranks if r.get("error")]
    wrong = sum(len(r["wrong"]) for r in ranks)
    # typical time of a collective class: rows that overlap no failure window (+1 s after)
    windows = [(f["t_fail"], f["t_heal"] + 1.0) for f in failures]
    overlaps = lambda t0, t1: any(t0 < b and t1 > a for a, b in windows)  # noqa: E731
    quiet = {}
    for t0, t1, name, nbytes, _ in rows0:
        if not overlaps(t0, t1):
            quiet.setdefault(_classify(name, nbytes), []).append(t1 - t0)
    typical = {k: statistics.median(v) for k, v in quiet.items()}
    all_med = statistics.median([t1 - t0 for t0, t1, *_ in rows0]) if rows0 else 0.0
    last_t1 = max((r["rows"][-1][1] for r in ranks if r["rows"]), default=0.0)
    failed_at = min([h["at"] for h in hangs] + [last_t1 if errors else math.inf])
    worst = []
    for f in failures:
        a, b = f["t_fail"], f["t_heal"] + 1.0
        extra = [(t1 - t0) - typical.get(_classify(name, nbytes), all_med)
                 for t0, t1, name, nbytes, _ in rows0 if t0 < b and t1 > a]
        f["extra_ms"] = round(1e3 * max(extra), 1) if extra else 0.0
        f["collectives_during"] = len(extra)
        after = sum(1 for t0, *_ in rows0 if t0 > f["t_heal"])
        f["survived"] = bool(after and f["t_heal"] + 1.0 < failed_at and not wrong)
        worst.append(f["extra_ms"])
    kinds = {}
    for f in failures:
        k = kinds.setdefault(f["kind"], dict(injected=0, survived=0, worst_extra_ms=0.0))
        k["injected"] += 1
        k["survived"] += int(f["survived"])
        k["worst_extra_ms"] = max(k["worst_extra_ms"], f["extra_ms"])
    colls = {}
    for t0, t1, name, nbytes, _ in rows0:
        colls[name] = colls.get(name, 0) + 1
    events = next((r["events"] for r in ranks if r["rank"] == 0), [])
    ra = [f["readmit_s"] for f in failures if f.get("readmit_s") is not None]
    return dict(
        seconds=round(t_end - t_start, 1), ranks=len(ranks), collectives=len(rows0),
        per_collective=colls, bytes=sum(r[3] for r in rows0),
        failures=len(failures), survived=sum(f["survived"] for f in failures),
        readmit_s_median=round(statistics.median(ra), 2) if ra else None,
        readmit_s_worst=max(ra, default=None),
        not_readmitted=sum(1 for f in failures if "readmit_s" in f and f["readmit_s"] is None),
        worst_extra_ms=max(worst, default=0.0),
        median_extra_ms=round(statistics.median(worst), 1) if worst else 0.0,
        by_kind=kinds, wrong=wrong, hangs=hangs, errors=errors,
        # which collectives were wrong: (rank, index, what); the per-rank records are removed
        wrong_list=[[r["rank"], *w] for r in ranks for w in r["wrong"]],
        rail_events={e: sum(1 for x in events if x.get("event") == e)
                     for e in sorted({x.get("event") for x in events})},
        failure_list=failures)


def _alive(path):
    """The rails-up mask rank 0 last wrote, or 0."""
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


def controller(lab, minutes, seed, stop_evt, failures, ina=False, log=print, alive_file=None,
               readmit_wait=60.0):
    """Inject for `minutes`: random cuts, a flapping rail, a slowed rail, random cuts. Before
    each cut (and the flapping and the slowing) it waits up to readmit_wait s for rank 0 to
    have every rail back: a cut while another rail is still out is a double failure, which
    may rightly leave a host with no path."""
    rng = random.Random(seed * 7919 + 1)
    total = minutes * 60.0
    t_start = time.time()
    flap_s = max(8.0, 60.0 * minutes / 30.0)
    slow_s = max(6.0, 30.0 * minutes / 30.0)
    # phases: random cuts, flapping, random cuts, slowed rail, random cuts to the end
    rest = max(0.0, total - flap_s - slow_s)
    plan = [("cuts", rest * 0.4), ("flap", flap_s), ("cuts", rest * 0.3), ("slow", slow_s),
            ("cuts", rest * 0.3)]
    rails = [1] if ina else [0, 1]
    hosts = lab.hosts

    def sleep(s):
        return stop_evt.wait(s)

    def wait_rails():
        """Until every rail is back in rank 0's plan; the seconds since the last heal."""
        if alive_file is None:
            return None
        t_end = time.time() + readmit_wait
        while _alive(alive_file) != 3 and time.time() < t_end and not stop_evt.is_set():
            sleep(0.05)
        back = time.time() - failures[-1]["t_heal"] if failures else 0.0
        if failures and "readmit_s" not in failures[-1]:
            failures[-1]["readmit_s"] = round(back, 2) if _alive(alive_file) == 3 else None
        return back

    def cut(host, rail, mode, down_s, kind):
        tf = time.time()
        lab.fail(host, rail, mode)
        try:
            sleep(down_s)
        finally:
            lab.heal(host, rail)
        failures.append(dict(kind=kind, host=host, rail=rail, mode=mode,
                             t_fail=tf, t_heal=time.time()))
        log(f"soak: {kind} host {host} rail {rail} {mode} {time.time() - tf:.1f} s")

    for phase, length in plan:
        end = min(time.time() + length, t_start + total)
        if phase == "cuts":
            while time.time() + 2.0 < end and not stop_evt.is_set():
                wait_rails()
                if time.time() + 2.0 >= end:
                    break
                cut(rng.randrange(hosts), rng.choice(rails), rng.choice(["down", "blackhole"]),
                    rng.uniform(0.5, 2.0), "cut")
                sleep(rng.uniform(1.5, 4.0))
        elif phase == "flap":
            host, rail = rng.randrange(hosts), rng.choice(rails)
            wait_rails()
            while time.time() + 2.0 <= end and not stop_evt.is_set():
                cut(host, rail, "down", 1.0, "flap")
                sleep(1.0)
        elif phase == "slow" and time.time() + 2.0 < end and not stop_evt.is_set():
            rail = rng.choice(rails)
            wait_rails()
            before = lab.status()["rails"][rail]["rate_bps"]
            tf = time.time()
            lab.rate(rail, int(before // 4))
            try:
                sleep(max(0.0, end - time.time()))
            finally:
                lab.rate(rail, int(before))
            failures.append(dict(kind="slow", host=-1, rail=rail, mode=f"rate/4 ({before / 4e6:g} "
                                 f"Mbit)", t_fail=tf, t_heal=time.time()))
            log(f"soak: slow rail {rail} to {before / 4e6:g} Mbit for {time.time() - tf:.1f} s")
        sleep(max(0.0, end - time.time()))
        wait_rails()
        if stop_evt.is_set() or time.time() >= t_start + total:
            break


def soak(lab, minutes, seed=18, max_bytes=4 << 20, hang_s=90.0, ina=False, tmp="/tmp",
         env_extra=None, log=print, log_path=None):
    """Run the soak in a running lab; returns the summary (see analyse); log_path keeps
    every rank's output."""
    tag = f"{tmp}/nzsoak-{os.getpid()}-{seed}"
    stop, out = tag + ".stop", tag
    np_ = lab.hosts * lab.ranks_per_host
    for k in range(np_):
        for f in (stop, stop + ".alive", f"{out}.rank{k}.json"):
            if os.path.exists(f):
                os.remove(f)
    env = dict(os.environ, PYTHONPATH=ROOT, NEZHA_SOCKET_IFNAME="rail0,rail1",
               NEZHA_READMIT="0.3", NEZHA_TIMEOUT=str(max(30.0, hang_s / 2)))
    if ina:
        env.update(NEZHA_SOCKET_IFNAME="rail0", NEZHA_RAILS="tcp,shm,ina")
    env.update(env_extra or {})
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--seed", str(seed),
           "--stop", stop, "--out", out, "--max-bytes", str(max_bytes), "--hang-s", str(hang_s)]
    box = {}
    th = threading.Thread(target=lambda: box.update(
        r=lab.run(cmd, env=env, timeout=minutes * 60 + 600, capture=True)))
    failures, stop_evt = [], threading.Event()
    t_start = time.time()
    th.start()
    try:
        time.sleep(3.0)  # let the ranks connect and run a few collectives first
        ctl = threading.Thread(target=controller, args=(lab, minutes, seed, stop_evt, failures,
                                                        ina, log, stop + ".alive"),
                               daemon=True)
        ctl.start()
        while ctl.is_alive() and th.is_alive():
            ctl.join(0.5)
        stop_evt.set()
        ctl.join(30)
    finally:
        stop_evt.set()
        open(stop, "w").close()
        th.join(hang_s + 120)
        lab.reset()
    t_end = time.time()
    res = box.get("r")
    ranks = []
    for k in range(np_):
        try:
            with open(f"{out}.rank{k}.json") as f:
                ranks.append(json.load(f))
            os.remove(f"{out}.rank{k}.json")
        except (OSError, ValueError):
            ranks.append(dict(rank=k, rows=[], wrong=[], error="no record (rank died?)",
                              hang=None, events=[]))
    for f in (stop, stop + ".alive"):
        if os.path.exists(f):
            os.remove(f)
    summary = analyse(ranks, failures, t_start, t_end)
    summary["returncode"] = None if res is None else res.returncode
    summary["seed"], summary["minutes"] = seed, minutes
    if log_path and res is not None:  # every rank's log, for a post-mortem
        with open(log_path, "w") as f:
            f.write((res.stdout or "") + (res.stderr or ""))
        summary["log"] = log_path
    if res is None or res.returncode != 0 or summary["errors"] or summary["hangs"]:
        summary["output_tail"] = ((res.stdout or "")[-3000:] + (res.stderr or "")[-3000:]
                                  if res is not None else "job did not end")
    return summary


def table(s):
    """Markdown table of a summary."""
    lines = ["| what | value |", "|---|---|",
             f"| wall time | {s['seconds']} s ({s['ranks']} ranks) |",
             f"| collectives completed (rank 0) | {s['collectives']} "
             f"({', '.join(f'{k} {v}' for k, v in sorted(s['per_collective'].items()))}) |",
             f"| bytes (rank 0's inputs) | {s['bytes'] / 2**20:.1f} MiB |",
             f"| failures injected / survived | {s['failures']} / {s['survived']} |"]
    for k, v in s["by_kind"].items():
        lines.append(f"| &nbsp; {k} | {v['injected']} / {v['survived']}, worst extra "
                     f"{v['worst_extra_ms']:.0f} ms |")
    lines += [f"| extra time per failure, median / worst | {s['median_extra_ms']:.0f} / "
              f"{s['worst_extra_ms']:.0f} ms |",
              f"| heal to every rail back in the plan (rank 0), median / worst | "
              f"{s['readmit_s_median']} / {s['readmit_s_worst']} s "
              f"({s['not_readmitted']} not back within the wait) |",
              f"| rail events (rank 0) | {', '.join(f'{k} {v}' for k, v in s['rail_events'].items())} |",
              f"| wrong results | {s['wrong']} |",
              f"| hangs | {len(s['hangs'])} |",
              f"| errors | {len(s['errors'])} |"]
    return "\n".join(lines)


def main():
    """Driver."""
    from _common import add_lab_args, lab_from_args  # bench/ (run as a script)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--stop", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--max-bytes", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--minutes", type=float, default=10.0, help="how long to inject (bounded)")
    p.add_argument("--seed", type=int, default=18)
    p.add_argument("--max-mib", type=float, default=4.0, help="largest buffer per rank")
    p.add_argument("--hang-s", type=float, default=90.0,
                   help="a collective taking longer is a hang (watchdog)")
    p.add_argument("--log", help="write every rank's output (logs) to this file")
    add_lab_args(p, "rail0 TCP + an INA service on rail1 (NEZHA_RAILS=tcp,shm,ina); cuts, "
                 "flaps and the slowdown hit rail1 only", "soak.json")
    args = p.parse_args()
    if args.worker:
        return worker(args)

    lab = lab_from_args(args, "nzsoak")
    try:
        s = soak(lab, args.minutes, args.seed, int(args.max_mib * (1 << 20)), args.hang_s,
                 args.ina, log_path=args.log)
    finally:
        lab.down()
    s["args"] = dict(vars(args))
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(s, f, indent=1)
    print(json.dumps({k: v for k, v in s.items() if k not in ("failure_list", "output_tail")}))
    if s.get("output_tail"):
        print(s["output_tail"], file=sys.stderr)
    print()
    print(table(s))
    ok = (s["wrong"] == 0 and not s["hangs"] and not s["errors"]
          and s["survived"] == s["failures"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
