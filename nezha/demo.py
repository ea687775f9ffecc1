"""`nezha demo` (`make demo`): a 4-host, 2-rail lab; allreduce on one rail, then on both.

Prints the two OSU-style tables, then the ratio per size and how close each run comes to
the physical limit (busbw = sum of the rates of the rails used), and takes the lab down.
"""
import argparse
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rate_bps(text):
    text = text.strip().lower()
    for suffix, mult in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * mult
    return float(text)


def main(argv=None):
    """Build the lab, run both benchmarks, print tables and ratios, tear down."""
    p = argparse.ArgumentParser(prog="nezha demo", description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--rate", default="400mbit", help="rate of every rail (tbf)")
    p.add_argument("-m", "--max-size", default="64M", help="largest message (OSU -m)")
    p.add_argument("--time-budget", type=float, default=1.0, help="seconds per size and run")
    p.add_argument("--keep", action="store_true", help="leave the lab up afterwards")
    a = p.parse_args(argv)

    from nezha.benchcli import need_bench
    from nezha.lab import Lab, LabSpec, available
    from nezha.lab.launch import find_mpirun
    script, _ = need_bench("nezha demo", "osu_allreduce.py", "_common.py")
    try:
        find_mpirun()  # the ranks run under Open MPI: say what is missing before building a lab
    except Exception as e:  # noqa: BLE001 - LabError: its message says what to install
        print(f"nezha demo: {e}", file=sys.stderr)
        return 1
    ok, why = available()
    if not ok:
        print(f"nezha demo: cannot build the lab here: {why}", file=sys.stderr)
        return 1
    lab = Lab(LabSpec(hosts=a.hosts, rails=2, rates=a.rate, name="nzdemo"))
    print(f"# nezha demo: lab of {a.hosts} hosts x 2 rails at {a.rate} each (tbf, MTU 9000)",
          flush=True)
    lab.up(replace=True)
    runs = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for label, ifnames in (("one rail", "rail0"), ("both rails", "rail0,rail1")):
                out = os.path.join(tmp, label.replace(" ", "_") + ".json")
                cmd = [sys.executable, script,
                       "--backend", "nezha", "-m", f"4:{a.max_size}", "-f", "--bw",
                       "--time-budget", str(a.time_budget), "--json", out]
                env = dict(os.environ, PYTHONPATH=ROOT, NEZHA_SOCKET_IFNAME=ifnames)
                print(f"\n## nezha allreduce on {label} ({ifnames}), {a.hosts} ranks, one per host",
                      flush=True)
                res = lab.run(cmd, np=a.hosts, env=env, timeout=1800)
                if res.returncode != 0:
                    print(f"nezha demo: the {label} run failed (exit {res.returncode})",
                          file=sys.stderr)
                    return res.returncode or 1
                with open(out) as f:
                    runs[label] = json.load(f)
    finally:
        if not a.keep:
            lab.down()
    rate = _rate_bps(a.rate) / 8 / 1e9  # GB/s per rail
    one, two = runs["one rail"]["results"], runs["both rails"]["results"]
    print("\n## both rails vs one rail (same lab, same run)")
    print(f"# physical limit: busbw {rate:.4f} GB/s on one rail, {2 * rate:.4f} GB/s on two")
    print(f"{'# Size':<10}{'1 rail (us)':>14}{'2 rails (us)':>14}{'speed-up':>10}"
          f"{'busbw 1 (GB/s)':>16}{'busbw 2 (GB/s)':>16}{'% limit 2':>11}")
    for r1, r2 in zip(one, two):
        print(f"{r1['size']:<10}{r1['avg_us']:>14.2f}{r2['avg_us']:>14.2f}"
              f"{r1['avg_us'] / r2['avg_us']:>10.2f}{r1['busbw_gbps']:>16.4f}"
              f"{r2['busbw_gbps']:>16.4f}{100 * r2['busbw_gbps'] / (2 * rate):>10.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
