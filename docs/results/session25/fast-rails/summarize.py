"""Per-run rows of a `nezha bench compare` JSON: % of the limit, CPU s/GB (user/sys) and
iterations per system, size and repetition, plus the raw TCP check's own CPU s/GB (the
stream workers' CPU over the GB they sent; same bytes as the collectives' busbw bytes:
what each host sends).   python summarize.py compare.json [min_size]"""
import json
import sys

d = json.load(open(sys.argv[1]))
lo = int(sys.argv[2]) if len(sys.argv) > 2 else 0
lim = d["limits"]["busbw_all_gbps"]
rates = d["lab"]["rates_bps"] if "rates_bps" in d["lab"] else None
for c in d["lab_checks"]:
    if "pct" not in c:
        continue
    ncpu = 2
    # goodput of all streams (bits/s) from % of the rate: rates per rail from the limit
    per_rail = d["limits"]["busbw_per_rail_gbps"]
    sent = sum(p / 100 * per_rail[f[2]] * 1e9 for p, f in zip(c["pct"], c["streams"]))  # B/s
    cpu = c["streams_cpu_pct"] / 100 * ncpu
    print(f"raw TCP rep {c['rep'] + 1}: min {c['min_pct']:.1f}% median {c['median_pct']:.1f}%, "
          f"machine busy {c['cpu_busy_pct']:.0f}%, streams' own CPU {c['streams_cpu_pct']:.0f}% "
          f"of 2 CPUs = {cpu / (sent / 1e9):.3f} CPU s/GB sent")
print(f"{'system':<18}{'rep':>4}{'size':>10}{'%lim':>7}{'CPU s/GB':>10}{'usr':>7}{'sys':>7}{'iters':>6}")
for r in sorted(d["runs"], key=lambda r: (r["system"], r["rep"])):
    for x in (r["doc"] or {}).get("results", []):
        if x["size"] < lo:
            continue
        moved = x["cpu_s_per_gb"] and (x["cpu_user_s"] + x["cpu_sys_s"]) / x["cpu_s_per_gb"]
        print(f"{r['system']:<18}{r['rep'] + 1:>4}{x['size']:>10}{100 * x['busbw_gbps'] / lim:>7.1f}"
              f"{x['cpu_s_per_gb'] or 0:>10.3f}{x['cpu_user_s'] / moved if moved else 0:>7.3f}"
              f"{x['cpu_sys_s'] / moved if moved else 0:>7.3f}{x['iterations']:>6}")
