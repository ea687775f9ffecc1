"""How crowded the machines under a job are: ranks per CPU they may run on.

A step of a collective waits for its partner to run. With more ranks than CPUs on one
machine (the lab's namespaces share one machine's cores; containers on one node too), a
partner is often not running, and every step waits while the others run: measured on 2
cores, a recursive-doubling step cost ~4 µs within a host and ~17 µs across with 4 ranks,
and ~27 µs on average with 8. The cost model's step latencies are set at 2 ranks per CPU;
costmodel.Layout scales them by (crowding - 1) above that; bytes are not scaled (a link's
rate does not depend on who runs)."""
from __future__ import annotations

import collections
import os


def boot_id() -> str | None:
    """The kernel's boot id: the same in every network namespace of one machine (None if
    unreadable)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def machine_facts() -> dict:
    """This rank's machine (its boot id) and how many CPUs it may run on."""
    boot = boot_id()  # None: counted as a machine of its own
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return {"machine": boot, "cpus": cpus}


def crowding(peers: list[dict]) -> float:
    """Ranks per CPU on the most crowded machine, at least 1: the same number on every rank
    (peers is the bootstrap's allgather). A rank without facts counts alone."""
    ranks, cpus = collections.Counter(), {}
    for i, p in enumerate(peers):
        m, c = p.get("machine"), p.get("cpus")
        m = m if isinstance(m, str) and m else f"?{i}"
        c = c if type(c) is int and 0 < c < 1 << 20 else 1  # what a sane peer sends
        ranks[m] += 1
        cpus[m] = max(cpus.get(m, 1), c)
    return max([1.0] + [ranks[m] / cpus[m] for m in ranks])
