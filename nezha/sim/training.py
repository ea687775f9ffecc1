"""A data-parallel training step: DDP buckets, compute, overlap of allreduce with backward.

Forward takes f seconds, backward b; the gradients of a model of P bytes fill buckets of B
bytes in reverse layer order, bucket i ready at f + b (i+1)/n. Buckets are reduced one
after another (one communication stream), each as soon as it is ready and the previous
one is done; the step ends when backward and the last allreduce have (the optimizer step
is left out: it is the same for both). Allreduce times come from the flow simulator:
nezha's own schedules over R rail planes, against a ring on one rail (Gloo's algorithm
for large buffers) with Gloo's per-message cost.
"""
import sys

import numpy as np

from nezha.sim import fabric as F
from nezha.sim import nezha_sched as N
from nezha.sim import network as NW
from nezha.sim import textbook as TB


def step_time(model_bytes, bucket_bytes, fwd, bwd, allreduce_time):
    """(step seconds, exposed communication seconds) for allreduce_time(nbytes)."""
    nb = max(int(np.ceil(model_bytes / bucket_bytes)), 1)
    sizes = [bucket_bytes] * (nb - 1) + [model_bytes - bucket_bytes * (nb - 1)]
    cache = {}
    t = 0.0
    for i, s in enumerate(sizes):
        ready = fwd + bwd * (i + 1) / nb
        if s not in cache:
            cache[s] = allreduce_time(s)
        t = max(t, ready) + cache[s]
    step = max(fwd + bwd, t)
    return step, step - (fwd + bwd)


def allreduce_nezha(nodes, rates_gbps, alpha, latency):
    """nbytes -> seconds of nezha's allreduce on nodes hosts x len(rates) rails."""
    fab = F.MultiRail(nodes, len(rates_gbps), rates_gbps, latency)
    host_of = fab.place(nodes)
    pl = N.make_planner(nodes, host_of, len(rates_gbps), [r * 1e9 / 8 for r in rates_gbps])

    def t(nbytes):
        wl, _ = N.workload("allreduce", nbytes, pl)
        return NW.simulate(wl, fab, host_of, "rail", 1, alpha).time
    return t


def allreduce_ring_one_rail(nodes, rate_gbps, alpha, latency):
    """nbytes -> seconds of a textbook ring on one rail (Gloo's ring)."""
    fab = F.MultiRail(nodes, 1, rate_gbps, latency)
    host_of = fab.place(nodes)

    def t(nbytes):
        return NW.simulate(TB.ring(nodes, nbytes), fab, host_of, "rail", 1, alpha).time
    return t


def add_args(p):
    """Options of `nezha sim train`."""
    p.add_argument("--nodes", default="8,16,32,64,128")
    p.add_argument("--rates", default="100,100", help="Gb/s of nezha's rails (a,b,...)")
    p.add_argument("--gloo-rate", type=float, default=None,
                   help="Gb/s of Gloo's one rail (default: the first of --rates)")
    p.add_argument("--model-bytes", type=float, default=1.4e9,
                   help="gradient bytes per step (default: 350M fp32 parameters)")
    p.add_argument("--bucket", type=float, default=25e6, help="DDP bucket bytes")
    p.add_argument("--fwd-ms", type=float, default=40.0)
    p.add_argument("--bwd-ms", type=float, default=80.0)
    p.add_argument("--alpha", type=float, default=25e-6, help="nezha s per transfer")
    p.add_argument("--gloo-alpha", type=float, default=50e-6, help="Gloo s per transfer")
    p.add_argument("--latency", type=float, default=2e-6, help="s per link")
    p.add_argument("--csv")
    p.add_argument("--json")


def main(a):
    """`nezha sim train`: a table of step times, nezha vs Gloo, over node counts."""
    from nezha.sim.cli import table, write
    rates = [float(x) for x in a.rates.split(",")]
    gloo_rate = a.gloo_rate or rates[0]
    fwd, bwd = a.fwd_ms * 1e-3, a.bwd_ms * 1e-3
    rows = []
    for n in (int(x) for x in a.nodes.split(",")):
        tn, en = step_time(a.model_bytes, a.bucket, fwd, bwd,
                           allreduce_nezha(n, rates, a.alpha, a.latency))
        tg, eg = step_time(a.model_bytes, a.bucket, fwd, bwd,
                           allreduce_ring_one_rail(n, gloo_rate, a.gloo_alpha, a.latency))
        rows.append({"nodes": n, "nezha_step_ms": tn * 1e3, "nezha_exposed_ms": en * 1e3,
                     "gloo_step_ms": tg * 1e3, "gloo_exposed_ms": eg * 1e3,
                     "speedup": tg / tn})
    print(f"# model {a.model_bytes / 1e6:g} MB of gradients, buckets {a.bucket / 1e6:g} MB, "
          f"compute {a.fwd_ms:g}+{a.bwd_ms:g} ms; nezha on {'+'.join(map('{:g}'.format, rates))}"
          f" Gb/s, Gloo on {gloo_rate:g} Gb/s", file=sys.stdout)
    table(rows, [("nodes", "{}"), ("nezha_step_ms", "{:.1f}"), ("nezha_exposed_ms", "{:.1f}"),
                 ("gloo_step_ms", "{:.1f}"), ("gloo_exposed_ms", "{:.1f}"),
                 ("speedup", "{:.2f}")])
    write(rows, a)
    return 0
