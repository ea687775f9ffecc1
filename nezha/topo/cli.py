"""`nezha topo [--xml FILE] [--json]`: packages, NUMA nodes, NICs, GPUs and their nearest NICs."""
from __future__ import annotations

import argparse
import json
import sys

from nezha.topo import probe


def _cpus(cpus) -> str:
    """[0,1,2,5] -> '0-2,5'."""
    out, run = [], []
    for c in sorted(cpus or ()):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out) or "-"


def _na(v) -> str:
    return "-" if v is None else str(v)


def summary(t) -> str:
    """The one-screen text form."""
    m = t.machine
    what = " ".join(filter(None, (m.get("DMISysVendor"), m.get("DMIProductName")))) \
        or m.get("CPUModel") or ""
    lines = [f"topology: {t.source}" + (f"  ({what})" if what else ""),
             f"  {len(t.packages)} packages, {len(t.numa_nodes)} NUMA nodes, {t.cores} cores, "
             f"{t.pus} PUs, {len(t.nics)} NICs, {len(t.gpus)} GPUs"]
    for n in t.numa_nodes:
        lines.append(f"  numa {n.index:<3} package {_na(n.package):<3} cpus {_cpus(n.cpus)}")
    if t.numa_distances:
        d = t.numa_distances
        if len(d["nodes"]) <= 8:   # larger matrices: --json
            lines.append("  numa distances: " + "  ".join(
                f"{a}:[{' '.join(map(str, row))}]" for a, row in zip(d["nodes"], d["values"])))
        else:
            lines.append(f"  numa distances: {len(d['nodes'])}x{len(d['nodes'])} (see --json)")
    lines.append("nics:" if t.nics else "nics: none")
    for n in t.nics:
        devs = ",".join(n.netdevs + n.ofdevs)
        speed = f"{n.speed_mbps} Mb/s" if n.speed_mbps else ""
        lines.append(f"  {n.name:<12} {_na(n.busid):<13} numa {_na(n.numa_node):<3} "
                     f"{n.kind:<11} {devs:<20} {speed}".rstrip())
    lines.append("gpus:" if t.gpus else "gpus: none")
    for g in t.gpus:
        near = ",".join(g.nearest_nics) or "-"
        hops = f" ({g.nic_hops} hops)" if g.nic_hops is not None else ""
        lines.append(f"  {g.name:<18} {_na(g.busid):<13} numa {_na(g.numa_node):<3} "
                     f"nearest {near}{hops}")
    for note in t.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def main(argv=None) -> int:
    """Print the topology of this machine, or of an hwloc XML export."""
    parser = argparse.ArgumentParser(prog="nezha topo", description=__doc__)
    parser.add_argument("--xml", metavar="FILE",
                        help="read this hwloc XML export (lstopo --of xml) instead of this machine")
    parser.add_argument("--json", action="store_true", help="print JSON for programs")
    args = parser.parse_args(argv)
    try:
        t = probe.load(args.xml)
    except probe.TopologyError as e:
        print(f"nezha topo: {e}", file=sys.stderr)
        return 2
    print(json.dumps(t.to_json(), indent=2) if args.json else summary(t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
