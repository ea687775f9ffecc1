"""Shared core of the OSU-style benchmarks: flags, timing loop, statistics and formatting.

Output follows OSU Micro-Benchmarks 7.4 (c/util/osu_util*.c) column for column, so OSU
parsers read it; nezha extras go in '#' lines above the column header. Bandwidth
definitions (algbw, busbw, GB = 1e9) follow nccl-tests doc/PERFORMANCE.md.
"""
import argparse
import json
import math
import os
import sys
import time
from typing import NamedTuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from nezha._version import __version__  # noqa: E402  (path set up just above)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _cpu import cpu_s_per_gb, loop_cpu_seconds  # noqa: E402

FIELD_WIDTH = 20        # OSU FIELD_WIDTH
FLOAT_PRECISION = 2     # OSU FLOAT_PRECISION
SIZE_WIDTH = 10         # OSU prints "# Size" / the size with %-10
ITER_WIDTH = 12         # OSU prints Iterations with %12
LARGE_MESSAGE_SIZE = 8192  # above this OSU switches to the "large" iteration counts
PROBE_CALLS = 2           # calls timed by --time-budget before choosing a count
SETTLE_S = 0.3  # extra warm-up before the first size (settle)

# OSU 7.4 osu_util.h defaults per family: (iters small, warm-up small, iters large,
# warm-up large), min and max message size, default datatype.
FAMILIES = {
    "collective": dict(counts=(1000, 100, 100, 10), min_size=1, max_size=1 << 20,
                       dtype="float32"),
    "latency": dict(counts=(10000, 100, 1000, 10), min_size=0, max_size=1 << 22,
                    dtype="uint8"),
    "bw": dict(counts=(100, 10, 20, 2), min_size=1, max_size=1 << 22, dtype="uint8"),
}

# OSU's -T names mapped to numpy; numpy names are accepted as they are.
DTYPE_ALIASES = {"char": "uint8", "mpi_char": "uint8", "int": "int32", "mpi_int": "int32",
                 "float": "float32", "mpi_float": "float32", "double": "float64"}

# nccl-tests busbw factors (doc/PERFORMANCE.md): make busbw comparable to link speed.
BUSBW_FACTORS = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "pt2pt": lambda n: 1.0,
}

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


# ---------------------------------------------------------------- argument parsing

def parse_size(text):
    """'64', '8K', '64M', '1G' -> bytes (binary multiples, as nccl-tests)."""
    text = text.strip().upper().removesuffix("B")
    if text and text[-1] in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1]])
    return int(text)


def parse_range(text, default_min):
    """OSU -m '[MIN:]MAX' (also 'MIN:' and ':MAX') -> (min, max) bytes."""
    lo, sep, hi = text.partition(":")
    if not sep:
        return default_min, parse_size(lo)
    return (parse_size(lo) if lo else default_min), (parse_size(hi) if hi else None)


def parse_percentiles(text):
    """OSU -z [P,...] -> tuple of ints (OSU default 50,90,99; at most 5)."""
    ps = tuple(int(p) for p in text.split(",") if p.strip())
    if not ps or len(ps) > 5 or not all(0 < p <= 99 for p in ps):
        raise argparse.ArgumentTypeError("percentiles: 1 to 5 integers in 1..99")
    return ps


def parent_parser():
    """argparse parent with OSU flags plus nezha's backend/JSON/budget options."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("-m", "--message-size", metavar="[MIN:]MAX",
                   help="message sizes in bytes, K/M/G suffixes allowed")
    p.add_argument("-i", "--iterations", type=int, help="timed iterations (small and large)")
    p.add_argument("-x", "--warmup", type=int, help="warm-up iterations (small and large)")
    p.add_argument("-f", "--full", action="store_true", help="print min/max latency and iterations")
    p.add_argument("-c", "--validation", action="store_true", help="check results (Validation)")
    p.add_argument("-T", "--type", default=None, help="datatype: numpy name or char/int/float")
    p.add_argument("-z", "--tail-lat", nargs="?", const="50,90,99", type=parse_percentiles,
                   metavar="P,..", help="tail percentiles (default 50,90,99)")
    p.add_argument("-l", "--in-place", action="store_true", help="in-place collective (allreduce)")
    p.add_argument("--backend", choices=("nezha", "mpi", "gloo"), default="nezha")
    p.add_argument("--json", metavar="FILE", help="write all results (and rank 0 samples) here")
    p.add_argument("--bw", action="store_true",
                   help="append algbw(GB/s) and busbw(GB/s) columns after OSU's")
    p.add_argument("--time-budget", type=float, metavar="SECONDS",
                   help="cap iterations so each size takes about this long")
    p.add_argument("--gloo-addr", default="127.0.0.1", help="Gloo MASTER_ADDR")
    p.add_argument("--gloo-ifname", default="lo", help="Gloo GLOO_SOCKET_IFNAME")
    p.add_argument("--timeout", type=float, default=300.0, help="Gloo operation timeout, seconds")
    return p


def parse_args(description, family, argv=None, extra=None):
    """Parse argv with the shared flags and fill in the family's OSU defaults."""
    p = argparse.ArgumentParser(description=description, parents=[parent_parser()])
    if extra is not None:
        extra(p)
    args = p.parse_args(argv)
    fam = FAMILIES[family]
    args.family = family
    args.min_size, args.max_size = fam["min_size"], fam["max_size"]
    if args.message_size:
        lo, hi = parse_range(args.message_size, fam["min_size"])
        args.min_size, args.max_size = lo, (hi if hi is not None else fam["max_size"])
    if args.min_size > args.max_size:
        p.error("-m: MIN is larger than MAX")
    small_i, small_x, large_i, large_x = fam["counts"]
    args.counts = (args.iterations or small_i, small_x if args.warmup is None else args.warmup,
                   args.iterations or large_i, large_x if args.warmup is None else args.warmup)
    name = (args.type or fam["dtype"]).lower()
    args.dtype = np.dtype(DTYPE_ALIASES.get(name, name))
    return args


# ---------------------------------------------------------------- sizes and counts

def message_sizes(min_size, max_size):
    """OSU size doubling from min to max inclusive (0 is followed by 1)."""
    sizes, s = [], min_size
    while s <= max_size:
        sizes.append(s)
        s = s * 2 if s else 1
    return sizes


def default_counts(size, counts):
    """(iterations, warm-up) for size from the (small, small, large, large) counts."""
    small_i, small_x, large_i, large_x = counts
    return (large_i, large_x) if size > LARGE_MESSAGE_SIZE else (small_i, small_x)


def algbw(nbytes, seconds):
    """Algorithm bandwidth in GB/s (GB = 1e9)."""
    return nbytes / seconds / 1e9 if seconds > 0 else 0.0


def busbw(collective, nbytes, seconds, nranks):
    """Bus bandwidth in GB/s: algbw times the nccl-tests factor for the collective."""
    return algbw(nbytes, seconds) * BUSBW_FACTORS[collective](nranks)


def osu_percentile(values, p):
    """OSU's tail rule: sorted ascending, element round(n*p/100) - 1."""
    v = np.sort(np.asarray(values, dtype=float))
    return float(v[min(len(v) - 1, max(0, int(round(len(v) * p / 100)) - 1))])


# ---------------------------------------------------------------- formatting

class Columns(NamedTuple):
    """Which OSU columns a run prints."""

    metric: str = "Avg Latency(us)"   # osu_bw: "Bandwidth (MB/s)"
    full: bool = False
    validate: bool = False
    percentiles: tuple = ()
    tail_unit: str = "Lat(us)"        # osu_bw: "BW(MB/s)"
    bw: bool = False


def title_line(test):
    """'# OSU-style nezha <test> Test v<version>' — OSU layout, without claiming to be OSU."""
    return f"# OSU-style nezha {test} Test v{__version__}"


def column_header(cols):
    """OSU column line: '# Size' in 10 left-aligned, then 20-wide right-aligned names."""
    line = f"{'# Size':<{SIZE_WIDTH}}{cols.metric:>{FIELD_WIDTH}}"
    if cols.full:
        line += f"{'Min Latency(us)':>{FIELD_WIDTH}}{'Max Latency(us)':>{FIELD_WIDTH}}"
        line += f"{'Iterations':>{ITER_WIDTH}}"
    if cols.validate:
        line += f"{'Validation':>{FIELD_WIDTH}}"
    for p in cols.percentiles:
        line += f"{f'P{p} Tail {cols.tail_unit}':>{FIELD_WIDTH}}"
    if cols.bw:
        line += f"{'algbw(GB/s)':>{FIELD_WIDTH}}{'busbw(GB/s)':>{FIELD_WIDTH}}"
    return line


def header_lines(test, extras, dtype, cols):
    """All lines before the data: blank, title, nezha '#' extras, datatype, column header."""
    return (["", title_line(test)] + [f"# {k}: {v}" for k, v in extras]
            + [f"# Datatype: {np.dtype(dtype).name}.", column_header(cols)])


def _f(x):
    return f"{x:>{FIELD_WIDTH}.{FLOAT_PRECISION}f}"


def data_row(cols, size, value, min_us=None, max_us=None, iterations=None, valid=None,
             tails=(), bw=None):
    """One OSU data line; bw is (algbw, busbw) for the optional --bw columns."""
    line = f"{size:<{SIZE_WIDTH}d}{_f(value)}"
    if cols.full:
        line += f"{_f(min_us)}{_f(max_us)}{iterations:>{ITER_WIDTH}d}"
    if cols.validate:
        line += f"{'Pass' if valid else 'Fail':>{FIELD_WIDTH}}"
    for t in tails:
        line += _f(t)
    if cols.bw:
        line += _f(bw[0]) + _f(bw[1])
    return line


def algorithm_summary(algorithm_for, sizes):
    """Compress per-size algorithm choices into 'ring 4..32768 B, tree 65536..1048576 B'."""
    runs = []
    for s in sizes:
        a = algorithm_for(s)
        if runs and runs[-1][0] == a:
            runs[-1][2] = s
        else:
            runs.append([a, s, s])
    if len(runs) == 1:
        return runs[0][0]
    return ", ".join(f"{a} {lo}..{hi} B" for a, lo, hi in runs)


# ---------------------------------------------------------------- measurement

def plan(world, step, barrier, iterations, warmup, budget):
    """Cap (iterations, warm-up) to about `budget` seconds; every rank gets the same answer.

    Two probe calls (counted as warm-up) estimate the cost; the faster one is kept because
    the first may include connection set-up. The slowest rank's estimate is shared with
    MPI MAX so all ranks run the same count (Gloo aborts otherwise).
    """
    if not budget:
        return iterations, warmup
    best = math.inf
    for _ in range(PROBE_CALLS):
        barrier()
        t0 = time.perf_counter()
        step()
        barrier()
        best = min(best, time.perf_counter() - t0)
    probe = world.allreduce(best, op=_mpi().MAX)
    iters = max(1, min(iterations, int(budget / probe)))
    # Keep OSU's ~10:1 iterations:warm-up ratio when capped; the probes were warm-ups too.
    warm = max(0, min(warmup, max(1, iters // 10)) - PROBE_CALLS)
    return iters, warm


def settle(world, step, barrier):
    """Before the first size: SETTLE_S of extra warm-up calls (same count on every rank).
    The first size is timed right after start-up, while the previous job's processes may
    still be exiting; without this its latency swung by up to 2x (nezha and Open MPI alike)."""
    iters, _ = plan(world, step, barrier, 1 << 30, 0, SETTLE_S)
    time_loop(step, barrier, 0, iters)


def time_loop(step, barrier, iterations, warmup, barrier_each=True, cpu=None, starts=None):
    """OSU loop: warm-up, then time each step; barrier after each call, outside the timer.
    cpu: a list that gets this process's (user, system) CPU seconds summed over the timed
    calls, read around each call outside the timer (warm-up and barriers excluded), then
    (user, system) over the whole timed loop (barriers and what threads did between calls).
    starts: a list that gets each timed call's start (perf_counter, s)."""
    for _ in range(warmup):
        step()
        if barrier_each:
            barrier()
    barrier()
    samples = np.empty(iterations)
    clock = time.perf_counter
    usage = loop_cpu_seconds if cpu is not None else None
    user = system = 0.0
    start = usage() if usage else None
    for i in range(iterations):
        if usage:
            u0, s0 = usage()
        t0 = clock()
        step()
        samples[i] = clock() - t0
        if starts is not None:
            starts.append(t0)
        if usage:
            u1, s1 = usage()
            user += u1 - u0
            system += s1 - s0
        if barrier_each:
            barrier()
    if cpu is not None:
        end = usage()
        cpu[:] = [user, system, end[0] - start[0], end[1] - start[1]]
    return samples


def summarize(world, samples):
    """OSU statistics (seconds): min/max/avg over ranks of each rank's mean, per-iteration means.

    The per-iteration times averaged over ranks are OSU's basis for tail percentiles.
    """
    MPI = _mpi()
    mean = float(samples.mean())
    per_iter = np.empty_like(samples)
    world.Allreduce(samples, per_iter, op=MPI.SUM)
    return dict(avg=world.allreduce(mean, op=MPI.SUM) / world.size,
                min=world.allreduce(mean, op=MPI.MIN),
                max=world.allreduce(mean, op=MPI.MAX),
                per_iter=per_iter / world.size)


def all_ok(world, ok):
    """True when `ok` holds on every rank."""
    return bool(world.allreduce(int(bool(ok)), op=_mpi().MIN))


def _mpi():
    # Imported late so the pure formatting helpers (and their tests) never initialise MPI.
    from mpi4py import MPI
    return MPI


# ---------------------------------------------------------------- drivers

class Case(NamedTuple):
    """One message size of a collective: the timed call, a validation pass, algbw bytes."""

    step: object    # () -> None, the timed operation
    check: object   # () -> bool, runs the op on known data and checks it locally
    nbytes: int     # nccl-tests "S" for algbw (total bytes of the larger buffer)


def write_json(path, doc):
    """Write doc as indented JSON, creating the folder."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=str)


def report_json(doc, path=None):
    """Print doc as indented JSON (what the small diagnostic benches give), and write it to
    path too when one is given."""
    print(json.dumps(doc, indent=1))
    if path:
        write_json(path, doc)


def _extras(be, args, algorithm):
    extras = [("Backend", f"{be.name} ({be.library})"),
              ("Rails", ", ".join(be.rails) or "none"),
              ("Ranks", str(be.size)),
              ("Algorithm", algorithm)]
    if args.time_budget:
        extras.append(("Time budget", f"{args.time_budget:g} s per size (caps iterations)"))
    return extras


def rank_calls(world, starts, raw):
    """Every rank's timed calls on one clock (perf_counter is CLOCK_MONOTONIC, one for all
    the lab's namespaces): {"start_us": per rank, each call's start after the earliest
    rank's first, "us": per rank, each call's time}, on rank 0. The row is the mean over
    ranks of their own times, each from its own barrier exit; nezha sim starts every rank
    at once, so these say how far apart the ranks began and ended (bench/rankskew.py)."""
    got = world.gather((list(starts), np.asarray(raw).tolist()), root=0)
    if got is None:
        return None
    base = min(s[0] for s, _ in got if s)
    return {"start_us": [[round((t - base) * 1e6, 1) for t in s] for s, _ in got],
            "us": [[round(x * 1e6, 1) for x in r] for _, r in got]}


def run_benchmark(test, collective, args, prepare, cols, measure=None, min_bytes=None):
    """Run every size of one benchmark, print OSU lines on rank 0, optionally write JSON.

    prepare(be, size, dtype, args) -> Case for one message size.
    measure(be, case, iterations, warmup) -> per-iteration seconds (default: the OSU loop).
    min_bytes(nranks, itemsize) -> smallest size that holds data (OSU skips smaller ones).
    """
    from _backends import make_backend

    be = make_backend(args)
    world, rank = be.world, be.rank
    cpu = starts = None
    if measure is None:
        cpu, starts = [], []

        def measure(be, case, iters, warm):
            starts.clear()
            return time_loop(case.step, be.barrier, iters, warm, cpu=cpu, starts=starts)

    def algorithm_for(nbytes):
        return "point-to-point" if collective == "pt2pt" else be.algorithm_for(nbytes, collective)

    floor = (min_bytes or (lambda n, item: item))(be.size, args.dtype.itemsize)
    sizes = [s for s in message_sizes(args.min_size, args.max_size) if s >= floor]
    if rank == 0:
        algo = algorithm_summary(algorithm_for, sizes) if sizes else "n/a"
        print("\n".join(header_lines(test, _extras(be, args, algo), args.dtype, cols)), flush=True)
    bandwidth = cols.metric.startswith("Bandwidth")
    results = []
    for i, size in enumerate(sizes):
        case = prepare(be, size, args.dtype, args)
        if i == 0 and args.time_budget:
            settle(world, case.step, be.barrier)
        iters, warm = plan(world, case.step, be.barrier, *default_counts(size, args.counts),
                           args.time_budget)
        valid = all_ok(world, case.check()) if cols.validate else None
        raw = measure(be, case, iters, warm)
        st = summarize(world, raw)
        calls = rank_calls(world, starts, raw) if starts else None
        lat_us = st["per_iter"] * 1e6
        if bandwidth:
            # osu_bw: MB/s with MB = 1e6; each iteration moves case.nbytes.
            value = case.nbytes / st["avg"] / 1e6
            tails = [osu_percentile(case.nbytes / st["per_iter"] / 1e6, p)
                     for p in cols.percentiles]
        else:
            value = st["avg"] * 1e6
            tails = [osu_percentile(lat_us, p) for p in cols.percentiles]
        ab = algbw(case.nbytes, st["avg"])
        bb = ab * BUSBW_FACTORS[collective](be.size)
        cpu_doc = {}
        if cpu:
            # every rank's CPU over its timed calls, summed; per GB of busbw bytes moved
            user = world.allreduce(cpu[0], op=_mpi().SUM)
            system = world.allreduce(cpu[1], op=_mpi().SUM)
            bus = case.nbytes * BUSBW_FACTORS[collective](be.size)
            loop = world.allreduce(cpu[2] + cpu[3], op=_mpi().SUM)
            cpu_doc = dict(cpu_user_s=user, cpu_sys_s=system, bus_bytes=bus,
                           cpu_s_per_gb=cpu_s_per_gb(user + system, be.size, iters, bus),
                           cpu_loop_s=loop,
                           cpu_loop_s_per_gb=cpu_s_per_gb(loop, be.size, iters, bus))
        if rank == 0:
            print(data_row(cols, size, value, st["min"] * 1e6, st["max"] * 1e6, iters, valid,
                           tails, (ab, bb)), flush=True)
            results.append(dict(
                size=size, nbytes=case.nbytes, avg_us=st["avg"] * 1e6, min_us=st["min"] * 1e6,
                max_us=st["max"] * 1e6, p50_us=osu_percentile(lat_us, 50),
                p99_us=osu_percentile(lat_us, 99), algbw_gbps=ab, busbw_gbps=bb,
                bandwidth_mbps=value if bandwidth else None, iterations=iters,
                warmup=warm + (PROBE_CALLS if args.time_budget else 0),
                algorithm=algorithm_for(size), validation=valid,
                samples_us=np.round(raw * 1e6, 3).tolist(),
                **({"rank_calls": calls} if calls else {}), **cpu_doc))
    stats = be.stats()
    if rank == 0 and args.json:
        write_json(args.json, dict(
            benchmark=test, collective=collective, version=__version__, backend=be.name,
            library=be.library, rails=be.rails, ranks=be.size, datatype=args.dtype.name,
            in_place=args.in_place, time_budget=args.time_budget, argv=sys.argv[1:],
            samples="samples_us: rank 0 time per timed iteration, us (one-way for latency)",
            stats=stats, results=results))
    be.close()
    return results


# ---------------------------------------------------------------- lab drivers

def add_lab_args(p, ina_help, json_name):
    """The lab drivers' (failover.py, soak.py) shared flags: rate, ranks per host, INA, JSON."""
    p.add_argument("--rate", default="400mbit")
    p.add_argument("--ranks-per-host", type=int, default=1,
                   help="ranks in each of the 4 hosts (shared memory between them)")
    p.add_argument("--ina", action="store_true", help=ina_help)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--json", default=os.path.join(root, "bench", "out", json_name))


def lab_from_args(args, name, up=True):
    """The lab of a driver's arguments (add_lab_args): 4 hosts, 2 rails at --rate,
    --ranks-per-host, an INA service on rail 1 with --ina; brought up (replacing a lab of
    the same name) unless up is False."""
    from nezha.lab import Lab, LabSpec
    lab = Lab(LabSpec(hosts=4, rails=2, rates=args.rate, name=name,
                      ranks_per_host=args.ranks_per_host, ina=(1,) if args.ina else ()))
    if up:
        lab.up(replace=True)
    return lab
