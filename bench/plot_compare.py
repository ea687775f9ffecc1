#!/usr/bin/env python
"""PNG plots of a comparison run (bench/compare.py's compare.json), made with matplotlib (Agg).

Per collective: busbw_<collective>.png (busbw vs size) and latency_<collective>.png (latency vs
size); log axes, one line per system, the physical limit as a black line (busbw: the sum of the
rail rates; latency: max(one-way floor, bytes x busbw factor / sum of rates)).

    python bench/plot_compare.py bench/out/compare-400mbit/compare.json [--out DIR]
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from _common import BUSBW_FACTORS

COLORS = {"nezha": ("#c0392b", "#e67e22", "#f1c40f"), "gloo": ("#2471a3", "#5dade2"),
          "mpi": ("#1e8449", "#52be80", "#7d3c98", "#a569bd", "#117864"), "mptcp": ("#6e2c00",)}


def _size_label(x, _pos=None):
    x = round(x)
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if x >= 1 << shift:
            return f"{x >> shift}{unit}"
    return str(x)


def _styles(doc):
    """{system: (colour, linestyle, marker)}: colour family per library, solid = all rails."""
    used, out = {}, {}
    for name, m in doc["systems"].items():
        fam = m.get("family", m["backend"])
        pal = COLORS.get(fam, ("#555555",))
        k = used.get(fam, 0)
        used[fam] = k + 1
        multi = len(m["rails"]) > 1
        ls = "-" if multi else "--"
        marker = {"nezha": "o", "gloo": "s", "mpi": "^", "mptcp": "D"}.get(fam, "x")
        out[name] = (pal[k % len(pal)], ls, marker, 2.2 if name == doc.get("reference") else 1.3)
    return out


def _x_sizes(rows):
    return [r["size"] for r in rows]


def plot(doc, out_dir):
    """Write the PNGs for every collective in doc['summary']; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    st = _styles(doc)
    lab, lim = doc["lab"], doc["limits"]
    n = lab["hosts"]
    title_lab = f"{lab['hosts']} hosts × {lab['rails']} rails ({', '.join(lab['rates'])})"
    paths = []
    for coll, per_sys in doc["summary"].items():
        sizes = sorted({r["size"] for rows in per_sys.values() for r in rows})
        nbytes = {r["size"]: r["nbytes"] for rows in per_sys.values() for r in rows}
        if not sizes:
            continue
        for metric in ("busbw", "latency"):
            fig, ax = plt.subplots(figsize=(10, 6.2), dpi=110)
            for name in doc["systems"]:
                rows = per_sys.get(name)
                if not rows:
                    continue
                c, ls, mk, lw = st[name]
                ys = [r["busbw_gbps"] * 1e3 if metric == "busbw" else r["avg_us"] for r in rows]
                ax.plot(_x_sizes(rows), ys, color=c, linestyle=ls, marker=mk, markersize=3.5,
                        linewidth=lw, label=name)
            B = lim["busbw_all_gbps"]
            if metric == "busbw":
                ax.plot(sizes, [B * 1e3] * len(sizes), color="black", linewidth=1.6,
                        label=f"limit, all rails ({B * 1e3:.0f} MB/s)")
                for r, b in enumerate(lim["busbw_per_rail_gbps"]):
                    ax.plot(sizes, [b * 1e3] * len(sizes), color="gray", linewidth=1.0,
                            linestyle=":", label=f"limit, rail{r} ({b * 1e3:.0f} MB/s)")
                ax.set_ylabel("busbw (MB/s, nccl-tests definition)")
            else:
                L = lim.get("latency_floor_us") or 0.0
                f = BUSBW_FACTORS[coll](n)
                ys = [max(L, nbytes[s] * f / (B * 1e9) * 1e6) for s in sizes]
                ax.plot(sizes, ys, color="black", linewidth=1.6,
                        label=f"limit: max({L:.0f} µs floor, bytes / {B * 1e3:.0f} MB/s)")
                ax.set_ylabel("latency (µs, OSU average)")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(_size_label))
            ax.set_xlabel("message size (bytes" + (", per rank)" if coll == "allgather" else ")"))
            ax.set_title(f"{coll} {metric} — {title_lab}, nezha {doc['version']}, {doc['started'][:10]}")
            ax.grid(True, which="major", alpha=0.35)
            ax.grid(True, which="minor", alpha=0.12)
            ax.legend(fontsize=7.5, loc="upper left", ncol=2)
            fig.tight_layout()
            path = os.path.join(out_dir, f"{metric}_{coll}.png")
            fig.savefig(path)
            plt.close(fig)
            paths.append(path)
    return paths


def main(argv=None):
    """CLI: plot a compare.json."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json", help="compare.json written by bench/compare.py")
    p.add_argument("--out", help="folder for the PNGs (default: next to the JSON)")
    a = p.parse_args(argv)
    with open(a.json) as f:
        doc = json.load(f)
    for path in plot(doc, a.out or os.path.dirname(os.path.abspath(a.json))):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
