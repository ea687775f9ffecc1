"""`nezha sim ethereal`: Ethereal's comparison (seeds §3.6, §7.3) as one sweep.

256 GPUs on a 16 x 16 leaf-spine (400 Gb/s, 0.5 us per link); all-to-all, halving-doubling,
ring and double binary tree; sizes in decimal MB per rank; ECMP, ideal packet spraying and
Ethereal's split-and-assign; with no failure and with the first leaf's first uplink
(leaf0->spine0, both directions as one link each way) failed at 1 us. Flows on the failed link
move after the scheme's own reroute delay: ECMP waits for routing convergence (100 ms, the
artifact's failover table), spraying and Ethereal for one retransmission timeout (100 us).
"""
import sys
import time

import numpy as np

from nezha.sim import fabric as F
from nezha.sim import network as NW
from nezha.sim import textbook as TB

ALGOS = ("alltoall", "halving_doubling", "ring", "dbtree")
SCHEMES = ("ecmp", "spray", "ethereal")
DELAY = {"ecmp": 100e-3, "spray": 100e-6, "ethereal": 100e-6}


def run(leaves=16, spines=16, hpl=16, rate=400.0, latency=0.5e-6, sizes=(1e6, 16e6, 256e6),
        algos=ALGOS, schemes=SCHEMES, fail="leaf0->spine0", fail_at=1e-6, tol=1e-2, seed=0,
        delays=None, log=sys.stderr):
    """Rows: one per (failure or not, algorithm, size, scheme)."""
    delays = dict(DELAY, **(delays or {}))
    fab = F.LeafSpine(leaves, spines, hpl, rate, latency)
    n = fab.hosts
    host_of = fab.place(n)
    rows = []
    for failed in ((False, True) if fail else (False,)):
        for algo in algos:
            for nb in sizes:
                wl = TB.build(algo, n, int(nb))
                key = np.arange(wl.ntasks)
                for scheme in schemes:
                    fails = ([NW.Failure(fail_at, fab.find_link(fail), delays[scheme])]
                             if failed else [])
                    t0 = time.perf_counter()
                    r = NW.simulate(wl, fab, host_of, scheme, 1, 0.0, fails, tol, seed,
                                    flow_key=key)
                    rows.append({"failed_link": fail if failed else "", "algo": algo,
                                 "nbytes": int(nb), "scheme": scheme, "time_us": r.time * 1e6,
                                 "flows": r.flows, "events": r.events,
                                 "wall_s": round(time.perf_counter() - t0, 2)})
                    if log:
                        print(f"# {rows[-1]}", file=log, flush=True)
    return fab, rows


def pivot(rows):
    """One row per (failure, algorithm, size): the schemes' times side by side."""
    out = {}
    for r in rows:
        k = (r["failed_link"], r["algo"], r["nbytes"])
        out.setdefault(k, {"failed_link": r["failed_link"] or "-", "algo": r["algo"],
                           "MB": r["nbytes"] / 1e6})[r["scheme"] + "_us"] = r["time_us"]
    for v in out.values():
        if "ethereal_us" in v and "spray_us" in v:
            v["eth_vs_spray"] = v["ethereal_us"] / v["spray_us"] - 1
        if "ethereal_us" in v and "ecmp_us" in v:
            v["eth_vs_ecmp"] = v["ethereal_us"] / v["ecmp_us"] - 1
    return list(out.values())


def plot(rows, path, title):
    """Completion time by size, one panel per (failure, algorithm), a line per scheme."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "nezha sim: matplotlib is not installed; no plot"
    fails = sorted({r["failed_link"] for r in rows})
    algos = list(dict.fromkeys(r["algo"] for r in rows))
    fig, axes = plt.subplots(len(fails), len(algos), figsize=(3.3 * len(algos),
                                                              3.0 * len(fails)),
                             squeeze=False, sharex=True)
    style = {"ecmp": ("tab:red", "s"), "spray": ("tab:blue", "o"),
             "ethereal": ("tab:green", "^")}
    for i, fl in enumerate(fails):
        for j, algo in enumerate(algos):
            ax = axes[i][j]
            for scheme in dict.fromkeys(r["scheme"] for r in rows):
                rs = sorted((r for r in rows if r["failed_link"] == fl and r["algo"] == algo
                             and r["scheme"] == scheme), key=lambda r: r["nbytes"])
                if rs:
                    c, m = style.get(scheme, (None, "x"))
                    ax.plot([r["nbytes"] / 1e6 for r in rs], [r["time_us"] / 1e3 for r in rs],
                            marker=m, color=c, label=scheme, alpha=0.8)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.set_title(f"{algo}{', ' + fl + ' failed' if fl else ''}", fontsize=8)
            if i == len(fails) - 1:
                ax.set_xlabel("MB per rank")
            if j == 0:
                ax.set_ylabel("completion time (ms)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return f"wrote {path}"


def add_args(p):
    """Options of `nezha sim ethereal`."""
    p.add_argument("--leaves", type=int, default=16)
    p.add_argument("--spines", type=int, default=16)
    p.add_argument("--hosts-per-leaf", type=int, default=16)
    p.add_argument("--rate", type=float, default=400.0, help="Gb/s of every link")
    p.add_argument("--latency", type=float, default=0.5e-6, help="s per link")
    p.add_argument("--algo", default=",".join(ALGOS))
    p.add_argument("--scheme", default=",".join(SCHEMES))
    p.add_argument("--sizes", default="1e6,16e6,256e6", help="bytes per rank (decimal MB)")
    p.add_argument("--fail", default="leaf0->spine0",
                   help="link failed at --fail-at in the second half ('' for none)")
    p.add_argument("--fail-at", type=float, default=1e-6)
    p.add_argument("--ecmp-delay", type=float, default=DELAY["ecmp"],
                   help="s until ECMP reroutes (routing convergence)")
    p.add_argument("--rto", type=float, default=DELAY["ethereal"],
                   help="s until Ethereal and spraying move off the failed link")
    p.add_argument("--tol", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--csv")
    p.add_argument("--json")
    p.add_argument("--plot", help="PNG file")


def main(a, table, write):
    """Run the sweep and print the side-by-side table."""
    fab, rows = run(a.leaves, a.spines, a.hosts_per_leaf, a.rate, a.latency,
                    [float(x) for x in a.sizes.split(",")], a.algo.split(","),
                    a.scheme.split(","), a.fail, a.fail_at, a.tol, a.seed,
                    {"ecmp": a.ecmp_delay, "spray": a.rto, "ethereal": a.rto})
    print(f"# {fab.describe()}; {fab.hosts} ranks; reroute after {a.ecmp_delay * 1e3:g} ms "
          f"(ECMP), {a.rto * 1e6:g} us (spraying, Ethereal)")
    piv = pivot(rows)
    cols = [("failed_link", "{}"), ("algo", "{}"), ("MB", "{:g}")]
    cols += [(s + "_us", "{:.1f}") for s in a.scheme.split(",")]
    pct = lambda v: f"{v:+.1%}"  # noqa: E731
    cols += [(c, pct) for c in ("eth_vs_spray", "eth_vs_ecmp") if c in piv[0]]
    table(piv, cols)
    print(f"# wall: {sum(r['wall_s'] for r in rows):.1f} s for {len(rows)} runs")
    write(rows, a)
    if a.plot:
        print(plot(rows, a.plot, f"{fab.describe()}; {fab.hosts} ranks"))
    return 0


def speed(cases=("ring", "alltoall"), log=sys.stderr):
    """Wall time against hosts and flows: nezha's ring allreduce of 1 GiB on a k=16 fat-tree
    (ECMP), 64..512 ranks; a textbook all-to-all of 16 MB per rank on leaf-spines of 16..256
    hosts (Ethereal and ECMP: the flows grow as n^2, ECMP's collisions add rate levels)."""
    from nezha.sim import nezha_sched as N
    rows = []
    if "ring" in cases:
        fab = F.FatTree(16, rate_gbps=400.0)
        for n in (64, 128, 256, 512):
            t0 = time.perf_counter()
            host_of = fab.place(n)
            pl = N.make_planner(n, host_of, 1, [fab.rate * 1e9 / 8], 1, {"ALGO": "ring"})
            wl, _ = N.workload("allreduce", 1 << 30, pl)
            t1 = time.perf_counter()
            r = NW.simulate(wl, fab, host_of, "ecmp", 1, 0.0)
            rows.append({"case": "nezha ring 1 GiB, fat-tree k=16, ecmp", "hosts": n,
                         "tasks": r.tasks, "flows": r.flows, "events": r.events,
                         "rate_solves": r.rate_solves, "build_s": t1 - t0, "sim_s": r.wall,
                         "wall_s": time.perf_counter() - t0})
            if log:
                print(f"# {rows[-1]}", file=log, flush=True)
    if "alltoall" in cases:
        for leaves, scheme in ((2, "ethereal"), (4, "ethereal"), (8, "ethereal"),
                               (16, "ethereal"), (2, "ecmp"), (4, "ecmp"), (8, "ecmp")):
            fab = F.LeafSpine(leaves, 16, 16, 400.0, 0.5e-6)
            n = fab.hosts
            t0 = time.perf_counter()
            wl = TB.build("alltoall", n, int(16e6))
            t1 = time.perf_counter()
            r = NW.simulate(wl, fab, fab.place(n), scheme, 1, 0.0, flow_key=np.arange(wl.ntasks))
            rows.append({"case": f"all-to-all 16 MB, leaf-spine x16x16, {scheme}", "hosts": n,
                         "tasks": r.tasks, "flows": r.flows, "events": r.events,
                         "rate_solves": r.rate_solves, "build_s": t1 - t0, "sim_s": r.wall,
                         "wall_s": time.perf_counter() - t0})
            if log:
                print(f"# {rows[-1]}", file=log, flush=True)
    return rows
