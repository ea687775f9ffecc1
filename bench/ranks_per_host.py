#!/usr/bin/env python
"""Allreduce with several ranks per host in the lab: nezha (shared memory within a host,
hierarchical across hosts) against its flat ring, itself without shm, and Open MPI on the
same rails, interleaved; plus the inter-host floor 2(H-1)/H * S / (a host's rail goodput).

    python bench/ranks_per_host.py --hosts 2 --ranks-per-host 4 --reps 2

Open MPI runs over its TCP BTL on the rails only: in the lab it takes every rank for one
node, so its sm BTL would carry the traffic between lab hosts and bypass the network.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
GOODPUT = 8948 / 9014  # TCP payload per byte on the wire at MTU 9000
MPI_TCP = ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "rail0,rail1"]
SYSTEMS = {  # name: (nezha lab run arguments, osu_allreduce backend)
    "nezha-all": ([], "nezha"),
    "nezha-flat": (["-x", "NEZHA_ALGO=ring"], "nezha"),
    "nezha-all-tcp": (["-x", "NEZHA_RAILS=tcp"], "nezha"),
    "mpi-all": (MPI_TCP, "mpi"),
    "mpi-all-ring": (MPI_TCP + ["--mca", "coll_tuned_use_dynamic_rules", "1",
                                "--mca", "coll_tuned_allreduce_algorithm", "4"], "mpi"),
}


def lab_cli(*args, **kw):
    return subprocess.run([PY, "-m", "nezha", "lab", *args], capture_output=True, text=True, **kw)


def run_system(name, lab, args, rep, tmp):
    extra, backend = SYSTEMS[name]
    path = os.path.join(tmp, f"{name}-{rep}.json")
    cmd = ["run", "--name", lab, "--timeout", "600", "-x", "NEZHA_SOCKET_IFNAME=rail0,rail1",
           *extra, "--", PY, os.path.join(HERE, "osu_allreduce.py"), "--backend", backend,
           "-m", args.message_size, "-l", "--time-budget", str(args.time_budget), "--json", path]
    t0 = time.time()
    r = lab_cli(*cmd, timeout=900)
    ok = os.path.exists(path)
    print(f"# rep {rep + 1} {name:14s} {time.time() - t0:6.1f} s"
          + ("" if ok else "  FAILED: " + (r.stdout + r.stderr)[-600:]), file=sys.stderr, flush=True)
    if not ok:
        return None
    with open(path) as f:  # tolerate an empty sample slot
        return json.loads(re.sub(r",(\s*,)+", ",", f.read()))


def table(runs, hosts, rate_bps):
    systems = [s for s in SYSTEMS if s in runs]
    lat = {}
    for s in systems:
        for doc in runs[s]:
            for r in doc["results"]:
                lat.setdefault((s, r["size"]), []).append(r["avg_us"])
    host_goodput = 2 * rate_bps / 8 * GOODPUT
    head = ["Size", "floor (µs)", "nezha-all (µs)", "nezha-all / floor"] + [
        f"{s} / nezha-all" for s in systems if s != "nezha-all"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for size in sorted({sz for _, sz in lat}):
        med = {s: statistics.median(lat[(s, size)]) for s in systems if (s, size) in lat}
        floor = 2 * (hosts - 1) / hosts * size / host_goodput * 1e6
        n = med.get("nezha-all")
        cells = [str(size), f"{floor:.1f}", f"{n:.1f}" if n else "n/a",
                 f"{n / floor:.2f}" if n else "n/a"]
        cells += [f"{med[s] / n:.2f}" if n and s in med else "n/a"
                  for s in systems if s != "nezha-all"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    """Entry point."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--ranks-per-host", type=int, default=4)
    p.add_argument("--rate", default="400mbit", help="per rail (2 rails)")
    p.add_argument("-m", "--message-size", default="4:16M")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--time-budget", type=float, default=0.5)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rate_bps = float(args.rate.lower().replace("mbit", "e6").replace("gbit", "e9"))
    lab = f"rph{os.getpid() % 10000}"
    tmp = os.path.join(ROOT, "bench", "out", lab)
    os.makedirs(tmp, exist_ok=True)
    runs = {}
    up = lab_cli("up", "--name", lab, "--hosts", str(args.hosts), "--rails", "2",
                 "--ranks-per-host", str(args.ranks_per_host), "--rate", args.rate)
    if up.returncode:
        sys.exit(f"lab up failed: {up.stderr[-2000:]}")
    try:
        names = list(SYSTEMS)
        for rep in range(args.reps):
            k = rep % len(names)
            for s in names[k:] + names[:k]:  # rotate: no system always goes first
                doc = run_system(s, lab, args, rep, tmp)
                if doc is not None:
                    runs.setdefault(s, []).append(doc)
    finally:
        lab_cli("down", "--name", lab)
    print(f"# {' '.join(sys.argv)}  ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    print(f"# {args.hosts} hosts x {args.ranks_per_host} ranks, 2 rails at {args.rate}; latency ="
          " OSU avg (µs), median over repetitions; ratio > 1: nezha-all faster")
    print(table(runs, args.hosts, rate_bps))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f)
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main())
