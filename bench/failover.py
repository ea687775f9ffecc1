#!/usr/bin/env python
"""Rail failover in the lab: back-to-back allreduces while one host's rail is cut and healed.

For each size (1 KiB, 1 MiB, 64 MiB) and mode (down = link down, blackhole = frames dropped
silently) the driver cuts one host's rail --failures times (rotating hosts), heals it, and
waits for re-admission. It reports per size and mode: the extra time of the collective hit by
each failure (its time minus what it would take with the cut and no failover cost: two-rail
speed until the cut, one-rail speed after, from the medians of the same run), the steady
throughput before, during and after, and the time from heal to re-admission. Every result is
checked against the expected sum on every rank.
    python bench/failover.py [--sizes 1K,1M,64M] [--modes down,blackhole] [--failures 10]
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(t):
    """'64M' -> bytes."""
    t = t.strip().upper()
    return int(t[:-1]) * UNITS[t[-1]] if t[-1] in UNITS else int(t)


def parse_rate(t):
    """'400mbit' -> bits per second."""
    t = t.lower()
    for suffix, mult in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if t.endswith(suffix):
            return float(t[: -len(suffix)]) * mult
    return float(t)


def call_record(tr):
    """One traced call (Engine.op_times()) summed up per channel, as raw.rank_traces keeps
    it: ([engine t0 ns, [[chan, last finish ns, ops done, ops, network bytes done, network
    bytes]...]] + for a hit call (ops left undone) [[[chan, [finish ns...], [bytes...]]...]],
    every finished op's time and network bytes in finish order, so the cut's place in each
    rail's work and the bytes each rail had moved at it are read, not assumed), {chan:
    [last, done, ops, bytes done, bytes]}). Network bytes: the sends' and receives' (peer >=
    0); a transfer counts on both ranks, as its ops do. One pass over the call's ops."""
    per, fins = {}, {}
    for _, peer, ch, nb, _, _, fin in tr["ops"]:
        c = per.setdefault(ch, [0, 0, 0, 0, 0])
        nb = nb if peer >= 0 else 0
        c[2] += 1
        c[4] += nb
        if fin >= 0:
            c[1] += 1
            c[3] += nb
            c[0] = max(c[0], fin)
            fins.setdefault(ch, []).append((fin, nb))
    rec = [tr["t0"], sorted([ch] + v for ch, v in per.items())]
    if any(v[1] < v[2] for v in per.values()):
        for v in fins.values():
            v.sort()
        rec.append(sorted([ch, [f for f, _ in v], [b for _, b in v]] for ch, v in fins.items()))
    return rec, per


def worker(args):
    """One rank: allreduces until the driver's stop file appears (agreed through the sum)."""
    import numpy as np

    import nezha
    comm = nezha.Communicator()
    n = max(2, args.size // 4)
    base = (np.arange(n) % 7).astype(np.float32)
    a = np.empty(n, np.float32)
    rows, wrong, told = [], 0, None
    expect = base * comm.size + comm.size * (comm.size - 1) // 2
    from nezha.failover import LAZY_MAX_BYTES
    # striped sizes: the engine's op trace (Engine.trace_ops, a finish time per op kept by
    # the engine; nothing per op in Python) of each call's main run, summed up per channel
    # once per call: when its data started on this rank (the engine's t0, after the
    # failover snapshot) and when each channel's last op finished. A hit collective's main
    # run keeps its trace through the vote and resume; its re-run has at most half the ops
    # and is left out by the trace's op floor (set from the first call). What
    # failstats.same_call reads: the extra against the hit call's own pace
    eng = comm._engine
    tracing = args.size > LAZY_MAX_BYTES and hasattr(eng, "trace_ops")
    traces, t0_seen, n_main = [], None, 0
    if tracing:
        eng.trace_ops(16, 1 << 22)
    mono_off = time.time() - time.monotonic()  # the engine's clock is CLOCK_MONOTONIC
    while True:
        a[:] = base + comm.rank
        a[0] = 1.0 if os.path.exists(args.stop) else 0.0  # the stop flag rides along
        t0 = time.time()
        comm.allreduce(a)
        t1 = time.time()
        if tracing:
            tr = eng.op_times()
            if tr["t0"] and tr["t0"] != t0_seen:
                t0_seen = tr["t0"]
                rec, per = call_record(tr)
                traces.append(rec)
                n = len(tr["ops"])
                if (n > n_main and all(v[1] == v[2] for v in per.values())
                        and len({ch // comm._mesh.nconns for ch in per if ch >= 0}) > 1):
                    # an unhit two-rail call's main schedule: trace no run under 3/4 of its
                    # ops (a re-run moves only the lost slices, on the rails left; a one-rail
                    # call's, twice the ops of a rail, must not raise the floor over a
                    # two-rail one's)
                    n_main = n
                    eng.trace_ops(max(16, int(0.75 * n_main)), 1 << 22)
            else:
                traces.append(None)
                if n_main:  # the plan shrank under the floor: learn it again
                    n_main = 0
                    eng.trace_ops(16, 1 << 22)
        if a[0] > 0:
            break
        if len(rows) == 3 and comm.rank == 0:
            open(args.stop + ".warm", "w").close()  # the driver cuts only from now on
        wrong += int(not np.array_equal(a[1:], expect[1:]))
        alive = sum(1 << c for c, ok in enumerate(comm.planner.alive) if ok)
        if comm._ina is not None:  # --ina: TCP on rail0 (bit 0), the INA rail as bit 1
            alive = (alive & 1) | (2 if comm._ina.alive else 0)
        rows.append((t0, t1, alive))
        if comm.rank == 0:  # for the driver: rails up, and the rail this size rides on
            plan = comm._st.last_plan
            # and the bytes each rail carried in it (a re-admitted rail is planned in again
            # over a few calls: --fast-cuts waits for an even split)
            per = [0] * comm.nrails if hasattr(comm, "nrails") else [0, 0]
            for sl in (plan.slices if plan is not None else ()):
                r = sl[0] // comm._mesh.nconns
                if r < len(per):
                    per[r] += sl[2]
            state = (alive, plan.slices[0][0] // comm._mesh.nconns if plan is not None else 0,
                     min(per) * 100 // max(max(per), 1))
            if state != told:  # only changes: a file write per 1 KiB call would slow it
                with open(args.stop + ".alive.tmp", "w") as f:
                    f.write("%d %d %d" % state)
                os.replace(args.stop + ".alive.tmp", args.stop + ".alive")
                told = state
    st = comm.stats()
    total_wrong = comm._boot.allgather(wrong)
    # every rank's events (which rank detected a cut, when in its run: detect_ms) and vote
    # resends: what `nezha sim failover` models per rank, where rank 0 alone showed a third
    rank_events = comm._boot.allgather(dict(events=st["events"],
                                            vote_resends=st.get("vote_resends")))
    # every rank's call times (one clock: the lab's ranks share a machine): when the last
    # rank entered each collective, so `nezha sim failover` knows when each hit one's data
    # started to move (failstats.entry_lags); striped sizes only (a few thousand calls)
    starts = comm._boot.allgather([r[0] for r in rows] if args.size > LAZY_MAX_BYTES
                                  else None)
    # per rank, per call (the stop call's last): [engine t0 ns, [[chan, last ns, done,
    # total, bytes done, bytes]...]] (+ a hit call's [[chan, [finish ns...], [bytes...]]...])
    # or None, and the rank's wall - monotonic clock offset (seconds)
    rank_traces = comm._boot.allgather(dict(traces=traces[:len(rows)], mono_off=mono_off,
                                            nconns=comm._mesh.nconns)
                                       if tracing else None)
    if comm.rank == 0:
        with open(args.out, "w") as f:
            # how in-place inputs were kept for a re-run (a copy before the data, or out of
            # place: none), which `nezha sim failover` needs to place the cuts
            json.dump(dict(rows=rows, wrong=total_wrong, events=st["events"],
                           ranks=rank_events, rank_starts=starts, rank_traces=rank_traces,
                           snapshots=st.get("snapshots")), f)
    comm.close()


def _state(path):
    """(rails-up mask, rail the last collective rode on, the least loaded rail's bytes in %
    of the most loaded's) that rank 0 wrote, or (0, 0, 0)."""
    try:
        with open(path) as f:
            a, r, even = f.read().split()
        return int(a), int(r), int(even)
    except (OSError, ValueError):
        return 0, 0, 0


def analyse(res, failures, size, rate_bps, ranks, hosts):
    """Numbers for one size and mode. Each cut's extra (nezha/sim/failstats.py, shared with
    `nezha sim failover`): the collectives it hit (for a lazy small one, the stalled row and
    the one whose vote marks the rail dead), their time minus two rails until the cut and one
    after, from the run's medians; extra_near_ms: from the 3 collectives around the cut.
    A single cut's extra carries its collective's own noise (noise_ms: the one-rail times'
    spread), so the mean comes with a 95 % interval and the number of cuts a 10 % reading of
    it would need: at 64 MiB that is hundreds."""
    from nezha.failover import LAZY_MAX_BYTES
    from nezha.sim import failstats as FS
    rows = res["rows"]
    dur = [t1 - t0 for t0, t1, _ in rows]
    both = [d for (t0, t1, al), d in zip(rows, dur) if al == 3]
    one = [d for (t0, t1, al), d in zip(rows, dur) if al != 3]
    med_one = statistics.median(one) if one else float("nan")
    lazy = size <= LAZY_MAX_BYTES
    extra, near, readmit, cuts = [], [], [], []
    for tf, th in failures:
        c = FS.cut_extra(rows, tf, th, lazy=lazy) if both and one else None
        if c is None:
            continue
        n = FS.cut_extra(rows, tf, th, near=3, lazy=lazy)
        extra.append(c["extra"])
        near.append(n["extra"])
        cuts.append(dict(at_ms=round(1e3 * c["at"], 1), took_ms=round(1e3 * c["took"], 1),
                         ideal_ms=round(1e3 * c["ideal"], 1), rows=c["k"] - c["i"] + 1,
                         extra_near_ms=round(1e3 * n["extra"], 1)))
        back = next((r0 for r0, r1, al in rows if r0 > th and al == 3), None)
        if back is not None:
            readmit.append(back - th)
    st = FS.summary([1e3 * x for x in extra])
    algbw = lambda d: size / d if d else 0.0  # noqa: E731
    factor = 2 * (ranks - 1) / ranks
    # a rail's limit is what crosses a host's link: 2(H-1)/H x S whatever the ranks per host
    # (hierarchical), so the share of it uses hosts, not ranks (busbw stays nccl-tests')
    host_factor = 2 * (hosts - 1) / hosts
    limit1 = rate_bps / 8
    return dict(
        size=size, failures=len(failures), hits=len(extra),
        cuts=cuts,  # per cut: when in the hit collective, how long it took, the ideal
        extra_ms_median=1e3 * statistics.median(extra) if extra else None,
        extra_ms_max=1e3 * max(extra) if extra else None,
        extra_ms_mean=st.get("mean"), extra_ms_ci95=st.get("ci95"),
        extra_near_ms_mean=1e3 * statistics.fmean(near) if near else None,
        noise_ms=1e3 * FS.noise(rows), cuts_for_10pct=st.get("cuts_needed"),
        busbw_two_rails=algbw(statistics.median(both)) * factor if both else None,
        busbw_one_rail=algbw(med_one) * factor if one else None,
        one_rail_pct_of_limit=100 * algbw(med_one) * host_factor / limit1 if one else None,
        readmit_s_median=statistics.median(readmit) if readmit else None,
        collectives=len(rows), wrong=sum(res["wrong"]))


def main():
    """Driver."""
    from _common import add_lab_args, lab_from_args  # bench/ (run as a script)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--size", type=int, help=argparse.SUPPRESS)
    p.add_argument("--stop", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--sizes", default="1K,1M,64M")
    p.add_argument("--modes", default="down,blackhole")
    p.add_argument("--failures", type=int, default=10)
    p.add_argument("--down-s", type=float, default=1.0, help="how long each cut lasts")
    p.add_argument("--gap-s", type=float, default=2.5, help="time after a heal before the next")
    p.add_argument("--fast-cuts", action="store_true",
                   help="striped sizes: hold a cut only through the hit collective and its "
                   "next (--down-s, at least 1.3 one-rail calls) and cut again as soon as both "
                   "rails are back, after a random wait of up to one call (the cut's place "
                   "in the call spread evenly): failstats.same_call reads each cut against "
                   "its own call's pace, so no run of one-rail calls per cut is needed")
    p.add_argument("--seed", type=int, default=1, help="--fast-cuts' random waits")
    p.add_argument("--lab-name", default="nzfo", help="the lab's name (namespace prefix)")
    p.add_argument("--log", help="write every run's worker output to LOG-SIZE-MODE.txt "
                   "(with NEZHA_DEBUG=INFO: what each rank re-ran, and when)")
    add_lab_args(p, "rail0 TCP + an INA service on rail1 (NEZHA_RAILS=tcp,shm,ina); every "
                 "cut hits rail1, so the INA part of each collective fails over to TCP",
                 "failover.json")
    args = p.parse_args()
    if args.worker:
        return worker(args)

    lab = lab_from_args(args, args.lab_name)
    import random
    rng = random.Random(args.seed)
    results = []
    env = dict(os.environ, PYTHONPATH=ROOT, NEZHA_SOCKET_IFNAME="rail0,rail1",
               NEZHA_READMIT="0.3")
    if args.ina:
        env.update(NEZHA_SOCKET_IFNAME="rail0", NEZHA_RAILS="tcp,shm,ina")
    try:
        for size in (parse_size(s) for s in args.sizes.split(",")):
            for mode in args.modes.split(","):
                stop = f"/tmp/nzfo-stop-{os.getpid()}"
                out = f"/tmp/nzfo-{os.getpid()}.json"
                for f in (stop, out, stop + ".warm", stop + ".alive"):
                    if os.path.exists(f):
                        os.remove(f)
                cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--size",
                       str(size), "--stop", stop, "--out", out]
                box = {}
                th = threading.Thread(target=lambda: box.update(
                    r=lab.run(cmd, env=env, timeout=1800, capture=True)))
                th.start()
                # warm up on both rails: 3 collectives done (8 ranks can take longer than
                # a fixed sleep to start, and a cut before the first collective measures
                # start-up, not failover), then 1 s more
                warm = stop + ".warm"
                t_wait = time.time() + 120
                while not os.path.exists(warm) and th.is_alive() and time.time() < t_wait:
                    time.sleep(0.05)
                time.sleep(1.0)
                failures, called = [], []
                # long enough cuts for a few collectives to run on one rail alone (the
                # reference for "extra"), and long enough gaps to get both rails back
                one_rail_s = size * 1.5 / (parse_rate(args.rate) / 8)
                down_s = max(args.down_s, 3 * one_rail_s)
                gap_s = max(args.gap_s, 3 * one_rail_s / 2 + 2.5)
                if args.fast_cuts:
                    down_s, gap_s = max(args.down_s, 1.3 * one_rail_s), args.gap_s
                if args.ina:  # the INA rail is tried again every READMIT_EVERY allreduces
                    from nezha.rails.ina.offload import READMIT_EVERY
                    gap_s = max(gap_s, (READMIT_EVERY + 4) * one_rail_s + 2)
                for k in range(args.failures):
                    # every cut starts with both rails up (a re-admission can take a few
                    # collectives: with 2 s collectives, longer than the gap)
                    alive, ride, even = _state(stop + ".alive")
                    t_wait = time.time() + 60
                    # --fast-cuts: and the re-admitted rail planned in again (an even split
                    # of a striped size; in session 30's first run the calls right after a
                    # re-admission still rode one rail)
                    while ((alive != 3 or (args.fast_cuts and size > (1 << 20) and even < 90))
                           and th.is_alive() and time.time() < t_wait):
                        time.sleep(0.05)
                        alive, ride, even = _state(stop + ".alive")
                    if args.fast_cuts:  # anywhere in the next call (one is ~T1/2 long)
                        time.sleep(rng.uniform(0, one_rail_s / 2))
                    # cut the rail small messages ride on, or alternate for large ones
                    host, rail = 1 + k % 3, ride if (size < (1 << 20)) else k % 2
                    rail = 1 if args.ina else rail
                    # the cut is in force once the nft / ip command has run: stamp it when
                    # lab.fail returns (spawning it on 2 loaded cores takes milliseconds);
                    # when it was called is kept apart, failures stay (cut, heal) pairs
                    called.append(time.time())
                    lab.fail(host, rail, mode)
                    tf = time.time()
                    time.sleep(down_s)
                    lab.heal(host, rail)
                    failures.append((tf, time.time()))
                    time.sleep(gap_s)
                open(stop, "w").close()
                th.join()
                res = box["r"]
                if args.log:
                    with open(f"{args.log}-{size}-{mode}.txt", "w") as f:
                        f.write((res.stdout or "") + (res.stderr or ""))
                if res.returncode != 0 or not os.path.exists(out):
                    print((res.stdout or "")[-3000:] + (res.stderr or "")[-3000:], file=sys.stderr)
                    raise SystemExit(f"failover run failed: size {size} mode {mode}")
                with open(out) as f:
                    data = json.load(f)
                row = analyse(data, failures, size, parse_rate(args.rate),
                              4 * args.ranks_per_host, 4)
                row["mode"] = mode
                row["events"] = data["events"]
                row["ranks"] = data.get("ranks")  # per rank: events, vote_resends
                row["raw"] = dict(rows=data["rows"], failures=failures, fail_called=called,
                                  rank_starts=data.get("rank_starts"),
                                  rank_traces=data.get("rank_traces"),
                                  mono_off=time.time() - time.monotonic(),
                                  snapshots=data.get("snapshots"))
                results.append(row)
                os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
                with open(args.json, "w") as f:  # so far: a stopped run keeps what it measured
                    json.dump(results, f, indent=1)
                print(json.dumps({k: v for k, v in row.items()
                                  if k not in ("events", "raw", "ranks")}),
                      flush=True)
    finally:
        lab.down()
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
    print("\n| size | mode | failures | extra ms (median / worst) | extra ms mean ± 95 % "
          "(noise; cuts for 10 %) | busbw 2 rails | busbw 1 rail (% of its limit) | "
          "re-admission s (median) | collectives | wrong |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        fmt = lambda v, f: "n/a" if v is None else format(v, f)  # noqa: E731
        print(f"| {r['size']} | {r['mode']} | {r['hits']}/{r['failures']} | "
              f"{fmt(r['extra_ms_median'], '.1f')} / {fmt(r['extra_ms_max'], '.1f')} | "
              f"{fmt(r['extra_ms_mean'], '.1f')} ± {fmt(r['extra_ms_ci95'], '.1f')} "
              f"({fmt(r['noise_ms'], '.1f')}; {r['cuts_for_10pct']}) | "
              f"{fmt(r['busbw_two_rails'] and r['busbw_two_rails'] / 1e6, '.1f')} MB/s | "
              f"{fmt(r['busbw_one_rail'] and r['busbw_one_rail'] / 1e6, '.1f')} MB/s "
              f"({fmt(r['one_rail_pct_of_limit'], '.1f')}%) | "
              f"{fmt(r['readmit_s_median'], '.2f')} | {r['collectives']} | {r['wrong']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
