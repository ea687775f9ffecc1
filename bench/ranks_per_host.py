#!/usr/bin/env python
"""Several ranks per host: allreduce in a lab of H hosts x L ranks, nezha against Open MPI and Gloo.

Builds its own lab (`Lab(hosts=H, rails=R, rate=..., ranks_per_host=L)`, a unique name, always
removed, also on errors, Ctrl-C and SIGTERM), then runs bench/osu_allreduce.py (float32 sum, the
given sizes only; --collective allgather, reduce_scatter or broadcast: bench/osu_allgather.py,
osu_reduce_scatter.py or osu_bcast.py, with OSU's sizes: per rank, whole send buffer, the buffer) once per system and
repetition, H x L ranks, systems interleaved and rotated by one each repetition. The rail byte counters are read around every run and must show the
system's bytes on the rails it claims and at least half the inter-host lower bound there (so no
system can bypass the shaped rails over mgmt or shared memory between lab hosts).

    python bench/ranks_per_host.py [--hosts 2] [--ranks-per-host 4] [--rails 2] [--rate 400mbit]
        [--sizes 4,1K,64K,1M,16M | -m MIN:MAX] [--reps 2] [--time-budget 0.3] [--systems a,b]
        [--collective allreduce|allgather|reduce_scatter|broadcast] [--in-place] [--validate] [--quick]
        [--out FILE.md] [--json FILE.json]
    python bench/ranks_per_host.py --worker --sizes 4,1024 [--check-locality] SCRIPT ARGS...
                                                                   (one rank; internal)

Open MPI and shared memory: under the lab's usual launch (one mpirun, one PRRTE daemon) Open MPI
sees every rank on one node, so its `sm` BTL would carry the traffic *between* lab hosts through
memory, past the shaped rails. `mpi-best-default` therefore starts one PRRTE daemon per lab host
(a hostfile of the hosts' mgmt addresses and a plm_ssh_agent that starts the daemon inside that
host's namespace with its own UTS hostname): Open MPI then sees H nodes of L ranks and uses sm
only within a lab host, TCP on the rails between hosts. The worker verifies that MPI's view of
locality (MPI_COMM_TYPE_SHARED, processor names) matches the lab hosts before it measures; the
byte counters verify the rest.
"""
import argparse
import dataclasses
import datetime
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
if ROOT not in sys.path:
    sys.path.insert(1, ROOT)
import compare as cmp  # noqa: E402  (bench/ is not a package)
from _common import __version__, message_sizes, parse_range, parse_size  # noqa: E402

MTU_GOODPUT = 8948 / 9014   # TCP payload per MTU-9000 frame (timestamps on) / bytes on the wire
REFERENCE = "nezha-all"
NEZHA_ENV = (("NEZHA_SOCKET_IFNAME", "{ifnames}"),)
DEFAULT_SIZES = "4,1K,64K,1M,16M"
QUICK_SIZES = "4,64K"

S = cmp.System
SYSTEMS = [
    S("nezha-all", "nezha on all rails, shared memory between a host's ranks (defaults: "
      "hierarchical allreduce picked automatically)", "nezha", "all", env=NEZHA_ENV),
    S("nezha-flat", "nezha on all rails + shm, flat ring over all ranks (NEZHA_ALGO=ring)",
      "nezha", "all", env=NEZHA_ENV + (("NEZHA_ALGO", "ring"),)),
    S("nezha-hier-aligned", "nezha, hierarchical allreduce, rail-aligned: local rank i carries "
      "its cross-host share on rail i mod R only (NEZHA_ALGO=hier NEZHA_HIER_RAILS=aligned)",
      "nezha", "all", env=NEZHA_ENV + (("NEZHA_ALGO", "hier"), ("NEZHA_HIER_RAILS", "aligned"))),
    S("nezha-hier-striped", "nezha, hierarchical allreduce, every local rank on every rail "
      "(NEZHA_ALGO=hier NEZHA_HIER_RAILS=striped)", "nezha", "all",
      env=NEZHA_ENV + (("NEZHA_ALGO", "hier"), ("NEZHA_HIER_RAILS", "striped"))),
    S("nezha-all-tcp", "nezha on all rails, no shared memory (NEZHA_RAILS=tcp)", "nezha", "all",
      env=NEZHA_ENV + (("NEZHA_RAILS", "tcp"),)),
    S("mpi-best-default", "Open MPI, btl sm,tcp,self (sm within a lab host only: one PRRTE daemon "
      "per host), TCP on all rails, pml ob1, coll tuned default", "mpi", "all",
      mca=(("btl", "sm,tcp,self"),)),
    S("mpi-all", "Open MPI, btl tcp,self on all rails (no sm), coll tuned default", "mpi", "all"),
    S("mpi-all-ring", "Open MPI, btl tcp,self on all rails (no sm), ring allreduce forced",
      "mpi", "all", mca=cmp.MPI_RING),
    S("gloo-rail0", "torch.distributed Gloo, GLOO_SOCKET_IFNAME=rail0", "gloo", "rail0"),
    S("gloo-all", "Gloo, GLOO_SOCKET_IFNAME=all rails (one device per rail, whole operations "
      "rotate over devices)", "gloo", "all"),
] + [s for s in cmp.SYSTEMS if s.name in ("nezha-ina", "nezha-ina-small")]  # named, with --ina
PER_HOST_DAEMONS = {"mpi-best-default"}   # systems launched with one PRRTE daemon per lab host
MPI_SM_NOTE = (
    "Open MPI's sm BTL: with the lab's plain launch (one mpirun) Open MPI believes all ranks share "
    "one node, and sm would carry the traffic between lab hosts through memory, bypassing the "
    "shaped rails. mpi-best-default is launched with one PRRTE daemon per lab host (hostfile of the "
    "hosts' mgmt addresses, a plm_ssh_agent that starts each daemon in its host's namespace under its "
    "own UTS hostname), so Open MPI sees H nodes of L ranks and uses sm only within a lab host; each "
    "run checks MPI_COMM_TYPE_SHARED against the lab hosts and the rail counters against the "
    "inter-host lower bound. mpi-all and mpi-all-ring use no sm at all (btl tcp,self).")


# ---------------------------------------------------------------- sizes and the floor

def parse_sizes(text):
    """'4,1K,64K' -> sorted distinct byte counts (float32: multiples of 4, >= 4)."""
    sizes = sorted({parse_size(x) for x in text.split(",") if x.strip()})
    bad = [s for s in sizes if s < 4 or s % 4]
    if not sizes or bad:
        raise ValueError(f"sizes {text!r}: float32 sizes must be multiples of 4 bytes, >= 4 "
                         f"(bad: {bad})")
    return sizes


def goodput_bytes(rate_bps):
    """TCP goodput of a rail in bytes/s at MTU 9000: rate x 8948/9014 / 8."""
    return rate_bps * MTU_GOODPUT / 8


def floor_us(size, hosts, rates, collective="allreduce", ranks_per_host=1):
    """Inter-host floor of a collective of OSU size `size` (µs): every host must send
    2(H-1)/H x S over its rails for an allreduce, at the sum of its rails' goodputs; (H-1)/H
    x T for allgather and reduce_scatter, T the whole result (allgather: H x L x the per-rank
    size) or send buffer (reduce_scatter): a host receives, or sends, the other hosts' part of
    it. None for one host."""
    if hosts < 2:
        return None
    total = size * hosts * ranks_per_host if collective == "allgather" else size
    if collective == "broadcast":   # every host but the root's receives S once
        return size / sum(goodput_bytes(r) for r in rates) * 1e6
    per_host = (2 if collective == "allreduce" else 1) * (hosts - 1) / hosts * total
    return per_host / sum(goodput_bytes(r) for r in rates) * 1e6


# ---------------------------------------------------------------- Open MPI, one daemon per host

AGENT = """#!/bin/sh
# plm_ssh_agent for lab {name}: start PRRTE's daemon for <host> (a lab host's mgmt address) inside
# that host's network namespace, with its own hostname, so Open MPI sees one node per lab host.
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
case "$1" in
{cases}
  *) echo "nezha lab agent: unknown host $1" >&2; exit 1 ;;
esac
shift
exec {ip} netns exec "$ns" {unshare} --uts /bin/sh -c "hostname $ns && $*"
"""


def per_host_launch(lab, tmpdir):
    """Environment that makes mpirun start one PRRTE daemon per lab host (agent + hostfile)."""
    from nezha.lab import netns as _nn
    agent = os.path.join(tmpdir, "lab-agent.sh")
    hostfile = os.path.join(tmpdir, "lab-hosts")
    cases = "\n".join(f"  {lab.mgmt_addr(h)}) ns={lab.host_ns(h)} ;;" for h in range(lab.hosts))
    unshare = shutil.which("unshare", path="/usr/bin:/bin:/usr/sbin:/sbin") or "unshare"
    with open(agent, "w") as f:
        f.write(AGENT.format(name=lab.name, cases=cases, ip=_nn.tool("ip"), unshare=unshare))
    os.chmod(agent, 0o755)
    with open(hostfile, "w") as f:
        f.writelines(f"{lab.mgmt_addr(h)} slots={lab.ranks_per_host}\n" for h in range(lab.hosts))
    boot = "mgmt" if lab.spec.mgmt else "rail0"
    return {"PRTE_MCA_plm_ssh_agent": agent, "PRTE_MCA_prte_default_hostfile": hostfile,
            "PRTE_MCA_prte_if_include": boot, "PRTE_MCA_plm_ssh_no_tree_spawn": "1"}


# ---------------------------------------------------------------- running

@dataclasses.dataclass
class Options:
    """What to measure (besides the lab)."""

    sizes: tuple = (4, 1 << 10, 64 << 10, 1 << 20, 16 << 20)
    systems: tuple = ()
    reps: int = 2
    time_budget: float = 0.3
    in_place: bool = False
    validate: bool = False
    run_timeout: float = 900.0
    min_share: float = 0.05
    max_other_share: float = 0.02
    max_mgmt_share: float = 0.05       # mgmt may carry at most max(4 MiB, this x rail bytes)
    quick: bool = False
    collective: str = "allreduce"      # or allgather, reduce_scatter, broadcast (compare.OSU_SCRIPTS)


def select(names=None):
    """The systems to run, in table order (reference first)."""
    known = [s.name for s in SYSTEMS]
    if names:
        bad = [n for n in names if n not in known]
        if bad:
            raise ValueError(f"unknown systems {bad}; known: {', '.join(known)}")
    # the INA rows need a service in the lab (--ina RAIL): only when named
    return [s for s in SYSTEMS if (s.name in names if names else s.when != "ina")]


def worker_cmd(system, lab, opts, json_path):
    """(argv, env, mca) of one run: compare.py's worker command, run through this file's worker
    (explicit sizes, locality check)."""
    copts = cmp.Options(collectives=(opts.collective,), min_size=min(opts.sizes),
                        max_size=max(opts.sizes), time_budget=opts.time_budget,
                        validate=opts.validate)
    argv, env, mca = cmp.worker_cmd(system, opts.collective, lab, copts, json_path)
    k = argv.index("--worker")
    mine = [os.path.abspath(__file__), "--worker", "--sizes", ",".join(map(str, opts.sizes))]
    if system.name in PER_HOST_DAEMONS:
        mine.append("--check-locality")
    return argv[:k - 1] + mine + argv[k + 1:] + (["-l"] if opts.in_place else []), env, mca


def _locality(stdout):
    """The '# mpi-locality {json}' line rank 0 printed, as a dict (or None)."""
    for line in stdout.splitlines():
        if line.startswith("# mpi-locality "):
            try:
                return json.loads(line[len("# mpi-locality "):])
            except ValueError:
                return None
    return None


def run_one(lab, system, opts, tmpdir, rep, order, log):
    """One run of one system: counters around it, its OSU JSON, where its bytes went."""
    path = os.path.join(tmpdir, f"{rep}-{system.name}.json")
    if os.path.exists(path):
        os.unlink(path)
    argv, env, mca = worker_cmd(system, lab, opts, path)
    launch = "mpirun in the lab (Lab.run), rank r in host r // L"
    if system.name in PER_HOST_DAEMONS:
        env = dict(env, **per_host_launch(lab, tmpdir))
        launch += "; one PRRTE daemon per lab host (plm_ssh_agent into the host namespace)"
    rec = {"system": system.name, "collective": opts.collective, "rep": rep, "order": order,
           "argv": argv, "env": env, "mca": [list(x) for x in mca], "launch": launch,
           "claimed_rails": [f"rail{r}" for r in cmp.system_rails(system, lab)],
           "loadavg_before": os.getloadavg()[0]}
    c0 = cmp.read_counters(lab)
    t0 = time.monotonic()
    res = lab.run(argv, np=lab.slots, env=env, mca=mca, timeout=opts.run_timeout, capture=True)
    rec["wall_s"] = time.monotonic() - t0
    c1 = cmp.read_counters(lab)
    rec.update(counters_before=c0, counters_after=c1, returncode=res.returncode,
               timed_out=res.timed_out, stdout=cmp._clean_out(res.stdout),
               loadavg_after=os.getloadavg()[0])
    if system.name in PER_HOST_DAEMONS:
        rec["mpi_locality"] = _locality(res.stdout)
    doc = None
    if res.returncode == 0 and os.path.exists(path):
        with open(path) as f:
            doc = json.load(f)
    else:
        out = cmp._clean_out(res.stdout + "\n" + res.stderr)
        rec["error"] = (f"timed out after {opts.run_timeout:g} s" if res.timed_out else
                        f"exit {res.returncode}: {cmp._python_error(out)}")
        rec["stderr_tail"] = out.splitlines()[-40:]
    rec["doc"] = doc
    per_rail, mgmt = cmp.tx_delta(c0, c1)
    # The lower bound is between hosts (2(H-1) x S per call, compare's bound with H ranks; (H-1)
    # x S for the others): a host's ranks may combine their data over shared memory or
    # loopback, which no rail sees.
    exp = (cmp.expected_bytes(opts.collective, dict(doc, ranks=lab.hosts), opts.validate)
           if doc else 0)
    largest = max((r["size"] for r in doc["results"]), default=0) if doc else None
    pl = cmp.placement(cmp.system_rails(system, lab), per_rail, mgmt, exp, opts.min_share,
                       opts.max_other_share, largest)
    rail_total = sum(per_rail.values())
    if mgmt > max(4 << 20, opts.max_mgmt_share * rail_total):
        pl["why"].append(f"mgmt carried {mgmt} B (> max(4 MiB, {100 * opts.max_mgmt_share:g}% "
                         f"of the {rail_total} B on the rails))")
        pl["ok"] = False
    if doc and opts.validate and not all(r.get("validation") for r in doc["results"]):
        pl["why"].append("wrong results (OSU -c validation failed)")
        pl["ok"] = False
    rec["placement"] = pl
    split = " ".join(f"{k}={100 * v:.0f}%" for k, v in sorted(pl["share"].items()))
    state = "ok" if pl["ok"] else "REJECTED: " + "; ".join(pl["why"])
    log(f"rep {rep + 1} {system.name:<17} {rec['wall_s']:6.1f} s  tx {rail_total / 1e6:8.1f} MB "
        f"[{split}] mgmt {mgmt / 1e6:.2f} MB  " + (f"FAILED: {rec['error']}" if "error" in rec else state))
    return rec


def run_all(lab, opts, log):
    """Every system once per repetition, order rotated by one each repetition. Returns
    (systems, runs, repetitions done, interrupted)."""
    systems = select(list(opts.systems) or None)
    runs, failed, reps_done, interrupted = [], set(), 0, False
    with tempfile.TemporaryDirectory(prefix="nezha-rph-") as tmpdir:
        try:
            for rep in range(opts.reps):
                k = rep % len(systems)
                for order, s in enumerate(systems[k:] + systems[:k]):
                    if s.name in failed:
                        continue                       # a failed system is not retried
                    rec = run_one(lab, s, opts, tmpdir, rep, order, log)
                    runs.append(rec)
                    if "error" in rec:
                        failed.add(s.name)
                reps_done = rep + 1
        except KeyboardInterrupt:
            interrupted = True
            log("# interrupted: writing what was measured")
    return systems, runs, reps_done, interrupted


# ---------------------------------------------------------------- the document

def build_document(lab, systems, opts, runs, reps, wall, started, command, interrupted=False):
    """JSON: lab, systems (with where their bytes went), summary, floor, every run and sample."""
    rates = list(lab.spec.rates)
    meta = {}
    for s in systems:
        rails = cmp.system_rails(s, lab)
        mine = [r for r in runs if r["system"] == s.name]
        tx, mgmt, algos = {}, 0, {}
        for r in mine:
            if "error" in r:
                continue
            for rail, x in r["placement"]["tx_bytes"].items():
                tx[rail] = tx.get(rail, 0) + x
            mgmt += r["placement"]["mgmt_tx_bytes"]
            for row in r["doc"]["results"]:
                algos.setdefault(row["size"], row.get("algorithm"))
        tot = sum(tx.values())
        meta[s.name] = {
            "label": s.label, "backend": s.backend, "family": s.fam,
            "rails": [f"rail{r}" for r in rails], "env": dict(s.env),
            "mca": [list(x) for x in (s.mca(lab) if callable(s.mca) else s.mca)],
            "per_host_daemons": s.name in PER_HOST_DAEMONS,
            "limit_gbps": cmp.limit_gbps(rates, rails),
            "runs": len(mine), "failed": sum("error" in r for r in mine),
            "ok": sum(1 for r in mine if "error" not in r and r["placement"]["ok"]),
            "tx_bytes": tx, "share": {k: (x / tot if tot else 0.0) for k, x in sorted(tx.items())},
            "mgmt_tx_bytes": mgmt, "algorithm": algos,
            "library": next((r["doc"].get("library") for r in mine if r.get("doc")), None)}
    ok_runs = [r for r in runs if "error" not in r and r["placement"]["ok"]]
    summary = cmp.summarize(ok_runs, meta, lab.slots).get(opts.collective, {})
    return {
        "suite": "bench/ranks_per_host.py", "version": __version__, "command": command,
        "started": started.isoformat(timespec="seconds"), "wall_seconds": wall,
        "repetitions": reps, "interrupted": interrupted, "options": dataclasses.asdict(opts),
        "host": {"hostname": socket.gethostname(), "cpus": os.cpu_count(),
                 "kernel": platform.release(), "python": platform.python_version()},
        "lab": {"name": lab.name, "hosts": lab.hosts, "ranks_per_host": lab.ranks_per_host,
                "ranks": lab.slots, "rails": lab.rails, "rates_bps": rates,
                "rates": [cmp._rate_text(b) for b in rates], "mtu": lab.spec.mtu,
                "gso": lab.spec.gso, "burst_us": lab.spec.burst_us},
        "floor_us": {str(size): floor_us(size, lab.hosts, rates, opts.collective,
                                         lab.ranks_per_host) for size in opts.sizes},
        "floor_how": ("2(H-1)/H x S" if opts.collective == "allreduce" else
                      "(H-1)/H x T (T: the gathered result)" if opts.collective == "allgather" else
                      "S (every host but the root's receives it)" if opts.collective == "broadcast"
                      else "(H-1)/H x S")
                     + " / (sum of one host's rail goodputs), goodput = rate x 8948/9014 "
                     "(TCP payload per MTU-9000 frame) in bytes/s",
        "reference": REFERENCE, "systems": meta, "summary": summary,
        "mpi_sm_note": MPI_SM_NOTE, "runs": runs,
        "notes": "latency = OSU average (mean over ranks of each rank's mean), median over "
                 "repetitions; runs[].doc.results[].samples_us are rank 0's per-iteration times; "
                 "counters_before/after are every host's rail and mgmt tx/rx bytes around the run",
    }


def _f(x, spec):
    return "n/a" if x is None else format(x, spec)


def table_lines(doc):
    """The main table: latency per system, baseline / reference, the inter-host floor."""
    summ = doc["summary"]
    names = [n for n in doc["systems"] if n in summ]
    ref = doc["reference"]
    has_ref = ref in summ
    others = [n for n in names if n != ref]
    lat = {n: {r["size"]: r["avg_us"] for r in summ[n]} for n in names}
    head = (["Size"] + [f"{n} (µs)" for n in names]
            + ([f"{n} / {ref}" for n in others] if has_ref else [])
            + ["inter-host floor (µs)"] + ([f"{ref} / floor"] if has_ref else []))
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for size in doc["options"]["sizes"]:
        cells = [cmp.fmt_size(size)] + [_f(lat[n].get(size), ".1f") for n in names]
        r = lat[ref].get(size) if has_ref else None
        if has_ref:
            cells += [_f(lat[n][size] / r, ".2f") if r and size in lat[n] else "n/a" for n in others]
        fl = doc["floor_us"].get(str(size))
        cells.append(_f(fl, ".1f" if fl is None or fl >= 1 else ".3f"))
        if has_ref:
            cells.append(_f(r / fl, ".2f") if r and fl else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(doc):
    """The report: header (command, date), lab, the table, where every system's bytes went."""
    lab, o = doc["lab"], doc["options"]
    gp = [goodput_bytes(b) / 1e6 for b in lab["rates_bps"]]
    coll = o.get("collective", "allreduce")
    lines = [f"# {coll.capitalize()} with several ranks per host: {lab['hosts']} hosts x "
             f"{lab['ranks_per_host']} ranks, {lab['rails']} rails at {', '.join(lab['rates'])}", "",
             f"Command: `{doc['command']}`  ",
             f"Date: {doc['started'].replace('T', ' ')}; {doc['repetitions']} interleaved "
             f"repetition(s) (order rotated each repetition), {doc['wall_seconds'] / 60:.1f} min "
             f"wall time, time budget {o['time_budget']:g} s per size and run"
             + ("; **interrupted**" if doc.get("interrupted") else "") + ".", "",
             f"- Lab `{lab['name']}`: {lab['hosts']} hosts (network namespaces) x "
             f"{lab['ranks_per_host']} ranks = {lab['ranks']} ranks, rank r on host r // "
             f"{lab['ranks_per_host']}; the ranks of a host share its rails and tbf shapers; MTU "
             f"{lab['mtu']}; unshaped mgmt network for bootstrap only. Machine "
             f"`{doc['host']['hostname']}`, {doc['host']['cpus']} CPUs, kernel "
             f"{doc['host']['kernel']}; nezha {doc['version']}.",
             f"- bench/osu_{coll}.py, float32 sum, {'in place' if o['in_place'] else 'out of place'}; "
             "latency = OSU average (µs), median over repetitions. Ratios: baseline / nezha-all "
             "(> 1: nezha-all faster).",
             f"- Inter-host floor = {doc['floor_how']}: one host's rails give "
             f"{sum(gp):.2f} MB/s ({' + '.join(f'{x:.2f}' for x in gp)}).",
             "- Small sizes can beat the floor: after an idle gap a full tbf bucket (≈ 88 KB) "
             "passes unshaped; sizes ≥ 1 MiB are clean.",
             f"- {doc['mpi_sm_note']}", ""]
    lines += table_lines(doc)
    lines += ["", "## Systems and where their bytes went", "",
              "Tx share per rail over the system's runs (host counters before/after each run). A "
              "run counts only if the rails carried at least half the inter-host lower bound "
              "(2(H-1) x S per call), every claimed rail its share (≥ "
              f"{100 * o['min_share']:g}% when ≥ 1 MiB messages ran), an unclaimed rail ≤ "
              f"{100 * o['max_other_share']:g}%, and mgmt ≤ max(4 MiB, "
              f"{100 * o['max_mgmt_share']:g}% of the rail bytes).", "",
              "| system | what | library | runs ok | tx share per rail | rail MB | mgmt MB | "
              "algorithm (nezha) |", "|---|---|---|---|---|---:|---:|---|"]
    for name, m in doc["systems"].items():
        share = ", ".join(f"{k} {100 * v:.1f}%" for k, v in m["share"].items()) or "n/a"
        algo = ""
        if m["backend"] == "nezha" and m["algorithm"]:
            algo = ", ".join(f"{cmp.fmt_size(s)}: {a}" for s, a in sorted(
                (int(k), v) for k, v in m["algorithm"].items()))
        lines.append(f"| {name} | {m['label']} | {m['library'] or 'n/a'} | {m['ok']}/{m['runs']} | "
                     f"{share} | {sum(m['tx_bytes'].values()) / 1e6:.1f} | "
                     f"{m['mgmt_tx_bytes'] / 1e6:.2f} | {algo} |")
    loc = [r for r in doc["runs"] if r.get("mpi_locality")]
    if loc:
        lines += ["", f"Open MPI's locality under the per-host launch (last run): "
                      f"{loc[-1]['mpi_locality'].get('summary')}."]
    bad = [r for r in doc["runs"] if "error" in r or not r["placement"]["ok"]]
    if bad:
        lines += ["", "**Problems** (these runs are left out of the table):", ""]
        for r in bad:
            lines.append(f"- rep {r['rep'] + 1} {r['system']}: "
                         f"{r.get('error') or '; '.join(r['placement']['why'])}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- worker (one rank)

def check_locality():
    """Every rank: MPI_COMM_TYPE_SHARED must group exactly the ranks of one lab host, and every
    lab host must be one node (processor name) of its own. SystemExit on every rank otherwise;
    rank 0 prints '# mpi-locality {json}'."""
    from mpi4py import MPI
    w = MPI.COMM_WORLD
    shared = w.Split_type(MPI.COMM_TYPE_SHARED)
    me = (os.environ.get("NEZHA_LAB_HOST"), shared.size, MPI.Get_processor_name())
    shared.Free()
    allv = w.allgather(me)
    per_host, names = {}, {}
    for h, _, name in allv:
        per_host[h] = per_host.get(h, 0) + 1
        names.setdefault(h, set()).add(name)
    flat = [n for v in names.values() for n in v]
    ok = (all(size == per_host[h] for h, size, _ in allv)
          and all(len(v) == 1 for v in names.values()) and len(set(flat)) == len(flat))
    summ = (f"{len(set(flat))} nodes ({', '.join(sorted(set(flat)))}), shared-memory groups of "
            f"{sorted({size for _, size, _ in allv})} ranks: "
            + ("one node per lab host" if ok else "NOT one node per lab host"))
    if w.rank == 0:
        print("# mpi-locality " + json.dumps({"ok": ok, "summary": summ, "ranks": allv}), flush=True)
    if not ok:
        raise SystemExit(f"MPI locality does not match the lab hosts: {summ}")


def worker(argv):
    """--worker --sizes A,B [--check-locality] SCRIPT ARGS...: compare.py's worker (Gloo device
    rotation, early-stopping probes) with OSU's size doubling replaced by the given sizes."""
    sizes, check, i = None, False, 0
    while i < len(argv) and argv[i].startswith("--"):      # our options come before SCRIPT
        if argv[i] == "--sizes" and i + 1 < len(argv):
            sizes = [int(x) for x in argv[i + 1].split(",")]
            i += 2
        elif argv[i] == "--check-locality":
            check, i = True, i + 1
        else:
            raise SystemExit(f"ranks_per_host.py --worker: bad option {argv[i]}")
    if sizes is None or i >= len(argv):
        raise SystemExit("usage: ranks_per_host.py --worker --sizes A,B [--check-locality] SCRIPT ARGS...")
    import _common
    _common.message_sizes = lambda lo, hi: [s for s in sizes if lo <= s <= hi]
    if check:
        check_locality()
    return cmp.worker(argv[i:])


# ---------------------------------------------------------------- main

def _unique_name():
    """'rph' + pid in base 36: a lab name of our own ([a-z][a-z0-9]{0,9})."""
    b36, n, s = "0123456789abcdefghijklmnopqrstuvwxyz", os.getpid(), ""
    while True:
        n, d = divmod(n, 36)
        s = b36[d] + s
        if not n:
            return f"rph{s}"


def _parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=2, help="lab hosts (default 2)")
    p.add_argument("--ranks-per-host", type=int, default=4, help="ranks per host (default 4)")
    p.add_argument("--rails", type=int, default=None, help="rails (default 2, or one per --rate entry)")
    p.add_argument("--rate", default="400mbit", help="rail rate, or a comma list per rail (default 400mbit)")
    p.add_argument("--sizes", default=None, help=f"message sizes (default {DEFAULT_SIZES}; --quick {QUICK_SIZES})")
    p.add_argument("-m", "--message-size", default=None, metavar="MIN:MAX",
                   help="instead of --sizes: OSU's doubling from MIN to MAX")
    p.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 2; --quick 1)")
    p.add_argument("--time-budget", type=float, default=None,
                   help="seconds per size and run, caps OSU iterations (default 0.3; --quick 0.05)")
    p.add_argument("--systems", default="", help="comma list (default all): " + ",".join(s.name for s in SYSTEMS))
    p.add_argument("--collective", default="allreduce",
                   choices=("allreduce", "allgather", "reduce_scatter", "broadcast"),
                   help="what to measure (default allreduce)")
    p.add_argument("-l", "--in-place", action="store_true", help="in-place allreduce (OSU -l)")
    p.add_argument("--validate", action="store_true", help="also check every size's result (OSU -c)")
    p.add_argument("--run-timeout", type=float, default=900.0, help="seconds per run before it is killed")
    p.add_argument("--json", default=None, help="JSON output (default: the --out path with .json)")
    p.add_argument("--out", default=None,
                   help="markdown output (default bench/out/ranks_per_host-<H>x<L>-<rates>[-quick].md)")
    p.add_argument("--quick", action="store_true", help="a functional check: 2 small sizes, 1 repetition")
    p.add_argument("--ina", type=int, default=None, metavar="RAIL",
                   help="run an INA service on that rail's switch (for --systems nezha-ina, "
                        "nezha-ina-small: TCP on the other rails plus the INA rail)")
    return p


def _sizes(a):
    if a.message_size:
        lo, hi = parse_range(a.message_size, 4)
        return [s for s in message_sizes(lo, hi if hi is not None else 16 << 20) if s >= 4 and s % 4 == 0]
    return parse_sizes(a.sizes or (QUICK_SIZES if a.quick else DEFAULT_SIZES))


def main(argv=None):
    """Entry point: build the lab, run, write markdown + JSON, remove the lab."""
    argv = sys.argv[1:] if argv is None else list(argv)
    a = _parser().parse_args(argv)
    from nezha.benchcli import _sigterm, lab_down
    from nezha.lab import Lab, LabSpec, available
    try:
        opts = Options(sizes=tuple(_sizes(a)),
                       systems=tuple(x.strip() for x in a.systems.split(",") if x.strip()),
                       reps=a.reps if a.reps is not None else (1 if a.quick else 2),
                       time_budget=a.time_budget if a.time_budget is not None else (0.05 if a.quick else 0.3),
                       in_place=a.in_place, validate=a.validate, run_timeout=a.run_timeout, quick=a.quick,
                       collective=a.collective)
        if not opts.sizes or opts.reps < 1:
            raise ValueError("need at least one size and one repetition")
        if a.in_place and a.collective != "allreduce":
            raise ValueError("--in-place: allreduce only")
        if any(x.when == "ina" for x in select(list(opts.systems) or None)) and a.ina is None:
            raise ValueError("the nezha-ina rows need an INA service: give --ina RAIL")
        rails = a.rails or max(2, len(a.rate.split(",")))
        lab = Lab(LabSpec(hosts=a.hosts, rails=rails, rates=a.rate, name=_unique_name(),
                          ranks_per_host=a.ranks_per_host,
                          ina=() if a.ina is None else (a.ina,)))
    except Exception as e:  # noqa: BLE001 - bad arguments: one line, no traceback
        print(f"ranks_per_host.py: {e}", file=sys.stderr)
        return 2
    ok, why = available()
    if not ok:
        print(f"ranks_per_host.py: cannot use a lab here: {why}", file=sys.stderr)
        return 1
    rates = lab.spec.rates
    tag = "-".join(cmp._rate_text(b) for b in rates) if len(set(rates)) > 1 else cmp._rate_text(rates[0])
    out = a.out or os.path.join(HERE, "out", f"ranks_per_host-{lab.hosts}x{lab.ranks_per_host}-{tag}"
                                + ("" if a.collective == "allreduce" else f"-{a.collective}")
                                + ("-quick" if a.quick else "") + ".md")
    jpath = a.json or os.path.splitext(out)[0] + ".json"
    command = "python bench/ranks_per_host.py " + " ".join(shlex.quote(x) for x in argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    started = datetime.datetime.now().astimezone()
    t0 = time.monotonic()
    old = {s: signal.signal(s, _sigterm) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        log(f"# building lab {lab.name}: {lab.hosts} hosts x {lab.ranks_per_host} ranks, "
            f"{lab.rails} rails at {', '.join(cmp._rate_text(b) for b in rates)}")
        lab.up(owner="bench/ranks_per_host.py")
        log(f"# systems: {', '.join(s.name for s in select(list(opts.systems) or None))}; sizes "
            f"{', '.join(cmp.fmt_size(s) for s in opts.sizes)}; {opts.reps} repetition(s)")
        systems, runs, reps, interrupted = run_all(lab, opts, log)
        doc = build_document(lab, systems, opts, runs, reps, time.monotonic() - t0, started,
                             command, interrupted)
    except KeyboardInterrupt:
        log("# interrupted")
        return 130
    finally:
        lab_down(lab, log)
        for s, h in old.items():
            signal.signal(s, h)
    for p in (out, jpath):
        os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
    with open(jpath, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    text = markdown(doc)
    with open(out, "w") as f:
        f.write(text)
    log(f"# wrote {out} and {jpath}")
    print(text)
    bad = [r for r in runs if "error" in r or not r["placement"]["ok"]]
    return 130 if interrupted else (0 if runs and not bad else 1)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        sys.exit(worker(sys.argv[2:]))
    sys.exit(main())
