"""PNG plots of `nezha sim run`: completion time by scheme and size, per-link load heat map."""
import os

import numpy as np


def run_plots(fab, rows, outdir):
    """Write the plots into outdir; returns a line saying what was written (or why not)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "nezha sim: matplotlib is not installed; no plots (pip install matplotlib)"
    os.makedirs(outdir, exist_ok=True)
    written = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key in sorted({(r["algo"], r["scheme"]) for r in rows}):
        rs = [r for r in rows if (r["algo"], r["scheme"]) == key]
        ax.plot([r["nbytes"] for r in rs], [r["time_us"] for r in rs], marker="o",
                label=f"{key[0]} / {key[1]}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per rank")
    ax.set_ylabel("completion time (us)")
    ax.set_title(fab.describe(), fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    p = os.path.join(outdir, "time_by_scheme.png")
    fig.savefig(p, dpi=110, bbox_inches="tight")
    plt.close(fig)
    written.append(p)
    # heat map of leaf->spine (or edge->agg) uplink bytes for the largest size per scheme
    up = getattr(fab, "lup", None)
    if up is None:
        up = getattr(fab, "eup", None)
    if up is not None and up.size:
        big = max(r["nbytes"] for r in rows)
        rs = [r for r in rows if r["nbytes"] == big]
        fig, axes = plt.subplots(1, len(rs), figsize=(3.2 * len(rs), 3), squeeze=False)
        vmax = max(r["_link_bytes"][up].max() for r in rs) or 1
        for ax, r in zip(axes[0], rs):
            im = ax.imshow(r["_link_bytes"][up] / 1e6, vmin=0, vmax=vmax / 1e6, cmap="viridis")
            ax.set_title(f"{r['algo']} / {r['scheme']}", fontsize=8)
            ax.set_xlabel("uplink")
            ax.set_ylabel("switch")
        fig.colorbar(im, ax=axes[0].tolist(), label="MB carried")
        p = os.path.join(outdir, "uplink_load.png")
        fig.savefig(p, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(p)
    return "wrote " + ", ".join(written)


__all__ = ["run_plots", "np"]
