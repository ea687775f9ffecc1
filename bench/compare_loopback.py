#!/usr/bin/env python
"""Allreduce on this host over TCP loopback: nezha vs Gloo vs MPI, side by side.

Runs bench/osu_allreduce.py under mpirun once per backend and repetition, interleaved
(each repetition runs every backend in turn, rotating the order) so that machine noise
hits all of them alike, then writes bench/out/compare_loopback.{json,md}.
"""
import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _common import __version__, busbw  # noqa: E402

# The TCP systems: over TCP on lo, nobody over shared memory. The -shm/-sm systems: the
# same host's shared memory (nezha's shm transport, Open MPI's sm BTL).
MPI_TCP_ONLY = ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
                "--mca", "pml", "ob1"]
MPI_SM = ["--mca", "btl", "sm,self", "--mca", "pml", "ob1"]
BACKEND_ENV = {"nezha": {"NEZHA_SOCKET_IFNAME": "lo", "NEZHA_RAILS": "tcp"},
               "nezha-shm": {"NEZHA_SOCKET_IFNAME": "lo", "NEZHA_RAILS": "tcp,shm"},
               "gloo": {"GLOO_SOCKET_IFNAME": "lo"},
               "mpi": {}, "mpi-sm": {}}
MPI_ARGS = {"mpi-sm": MPI_SM}  # every other system's launcher keeps the TCP-only flags


def library(system):
    """osu_allreduce.py's --backend for a system name (nezha-shm -> nezha)."""
    return system.split("-")[0]


def mpirun_cmd(np_, backend, args, json_path):
    """mpirun command line for one osu_allreduce run of `backend`."""
    mpirun = os.path.join(os.path.dirname(sys.executable), "mpirun")
    env = dict(BACKEND_ENV[backend], PYTHONPATH=ROOT)
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(np_),
           # 4 busy ranks on 2 cores: let idle ranks yield instead of spinning on a core.
           "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1",
           *MPI_ARGS.get(backend, MPI_TCP_ONLY)]
    for k, v in env.items():
        cmd += ["-x", f"{k}={v}"]
    cmd += [sys.executable, os.path.join(HERE, "osu_allreduce.py"), "--backend", library(backend),
            "-m", args.message_size, "-l", "-f", "--time-budget", str(args.time_budget),
            "--gloo-ifname", "lo", "--json", json_path]
    return cmd


def run_once(np_, backend, args, tmpdir, rep):
    """One benchmark run; returns (json document or None, error text)."""
    path = os.path.join(tmpdir, f"{backend}-{rep}.json")
    cmd = mpirun_cmd(np_, backend, args, path)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.run_timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {args.run_timeout:g} s"
    if proc.returncode != 0 or not os.path.exists(path):
        return None, f"exit {proc.returncode}: {_python_error(proc.stderr + proc.stdout)}"
    with open(path) as f:
        return json.load(f), ""


def _python_error(text):
    """Last Python exception line in a rank's output (mpirun's own epilogue says little)."""
    found = re.findall(r"^(?:[\w.]+(?:Error|Exception|Exit)\b.*)$", text, re.M)
    return found[-1] if found else (text.strip().splitlines() or ["no output"])[-1]


def summarize(runs, backends, nranks):
    """Per size and backend: median over repetitions of OSU avg latency, busbw from it."""
    table = {}
    for b in backends:
        for doc in runs.get(b, []):
            for r in doc["results"]:
                table.setdefault(r["size"], {}).setdefault(b, []).append((r["avg_us"], r["nbytes"]))
    rows = []
    for size in sorted(table):
        row = {"size": size}
        for b in backends:
            vals = table[size].get(b)
            if not vals:
                continue
            lat = statistics.median(v[0] for v in vals)
            row[b] = {"avg_us": lat, "reps": len(vals),
                      "busbw_gbps": busbw("allreduce", vals[0][1], lat * 1e-6, nranks)}
        rows.append(row)
    return rows


def _fmt(x, spec):
    return format(x, spec) if x is not None else "n/a"


def markdown(rows, backends, meta, ref="nezha"):
    """Markdown report: how each backend was kept on TCP over lo, then the table."""
    lines = [f"# nezha {__version__}: allreduce over TCP loopback, nezha vs Gloo vs MPI", "",
             f"Host `{meta['host']}`, {meta['cpus']} CPUs, {meta['ranks']} ranks "
             "(oversubscribed: `--bind-to none --mca mpi_yield_when_idle 1`), "
             f"{meta['dtype']} sum, in place (`-l`), sizes {meta['sizes']}.",
             "nezha, Gloo and MPI move data over **TCP on the loopback interface `lo`** "
             "(none uses shared memory); nezha-shm and mpi-sm use this host's shared memory:",
             "- nezha-shm: `NEZHA_SOCKET_IFNAME=lo NEZHA_RAILS=tcp,shm`; "
             f"mpi-sm: `{' '.join(MPI_SM)}`",
             "- nezha: `NEZHA_SOCKET_IFNAME=lo NEZHA_RAILS=tcp`"
             f" (rails reported: {meta['rails'].get('nezha', 'n/a')})",
             f"- Gloo ({meta['library'].get('gloo', 'torch')}): `GLOO_SOCKET_IFNAME=lo`",
             f"- MPI ({meta['library'].get('mpi', 'Open MPI')}): `{' '.join(MPI_TCP_ONLY)}`",
             f"Latency = OSU avg (µs, mean over ranks of each rank's mean), median of "
             f"{meta['reps']} interleaved repetitions; time budget {meta['budget']:g} s per size "
             "caps iterations. busbw = bytes/t × 2(n−1)/n (nccl-tests, GB = 1e9). "
             f"Ratio = other latency / {ref} latency (> 1: {ref} faster).", ""]
    for b, err in meta["errors"].items():
        lines.append(f"**{b} did not run:** {err}")
        lines.append("")
    head = (["Size (B)"] + [f"{b} (µs)" for b in backends]
            + [f"{b} busbw (GB/s)" for b in backends]
            + [f"{b}/{ref}" for b in backends if b != ref])
    lines += ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in rows:
        lat = {b: r[b]["avg_us"] if b in r else None for b in backends}
        cells = [str(r["size"])] + [_fmt(lat[b], ".2f") for b in backends]
        cells += [_fmt(r[b]["busbw_gbps"] if b in r else None, ".4f") for b in backends]
        for b in backends:
            if b != ref:
                ok = lat.get(ref) and lat[b]
                cells.append(_fmt(lat[b] / lat[ref] if ok else None, ".2f"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    """Entry point."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="nezha,gloo,mpi",
                   help="comma list of nezha, nezha-shm, gloo, mpi, mpi-sm")
    p.add_argument("--ref", default=None, help="system the ratios divide by (default: the first)")
    p.add_argument("-np", "--np", dest="np_", type=int, default=4, help="ranks")
    p.add_argument("-m", "--message-size", default="4:64M", help="OSU -m [MIN:]MAX")
    p.add_argument("--reps", type=int, default=3, help="interleaved repetitions")
    p.add_argument("--time-budget", type=float, default=1.0, help="seconds per size per run")
    p.add_argument("--run-timeout", type=float, default=300, help="seconds per mpirun")
    p.add_argument("--max-minutes", type=float, default=9.0,
                   help="skip repetitions that would end after this much wall time")
    p.add_argument("--out", default=os.path.join(HERE, "out"), help="output folder")
    args = p.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]

    t_start = time.monotonic()
    runs, errors, reps_done = {}, {}, 0
    with tempfile.TemporaryDirectory(prefix="nezha-cmp-") as tmpdir:
        for rep in range(args.reps):
            elapsed = time.monotonic() - t_start
            if rep and elapsed * (rep + 1) / rep > args.max_minutes * 60:   # next rep won't fit
                print(f"# stopping after {rep} repetitions (time limit)", file=sys.stderr)
                break
            k = rep % len(backends)
            for b in backends[k:] + backends[:k]:   # rotate so no backend always goes first
                if b in errors:
                    continue   # a backend that failed once (e.g. not importable) is not retried
                t0 = time.monotonic()
                doc, err = run_once(args.np_, b, args, tmpdir, rep)
                print(f"# rep {rep + 1}/{args.reps} {b:6s} {time.monotonic() - t0:6.1f} s"
                      + (f"  FAILED: {err}" if err else ""), file=sys.stderr, flush=True)
                if doc is None:
                    errors[b] = err
                else:
                    runs.setdefault(b, []).append(doc)
            reps_done = rep + 1
    first = {b: docs[0] for b, docs in runs.items()}
    meta = dict(host=socket.gethostname(), cpus=os.cpu_count(), ranks=args.np_,
                dtype=next(iter(first.values()))["datatype"] if first else "float32",
                sizes=args.message_size, reps=reps_done, budget=args.time_budget,
                rails={b: ", ".join(d["rails"]) for b, d in first.items()},
                library={b: d["library"] for b, d in first.items()}, errors=errors,
                python=platform.python_version(), wall_seconds=time.monotonic() - t_start)
    rows = summarize(runs, backends, args.np_)
    report = markdown(rows, backends, meta, args.ref or backends[0])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "compare_loopback.md"), "w") as f:
        f.write(report)
    with open(os.path.join(args.out, "compare_loopback.json"), "w") as f:
        json.dump(dict(meta=meta, mpirun_tcp_only=MPI_TCP_ONLY, backend_env=BACKEND_ENV,
                       summary=rows, runs=runs), f, indent=1)
    print(report)
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main())
