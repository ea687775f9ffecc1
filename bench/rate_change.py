#!/usr/bin/env python
"""Split convergence after a rail changes speed mid-run (issue: within 20 collectives).

Driver: builds a 4-host 2-rail lab (or uses --lab), runs back-to-back allreduces on both
rails, slows rail 1 with `nezha lab rate` after --change-at seconds, and prints the time of
every collective, its split, and after how many collectives the split settled.
    python bench/rate_change.py [--size 16M] [--count 60] [--from 400mbit] [--to 100mbit]
"""
import argparse
import json
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def worker(args):
    """One rank: timed allreduces, one JSON line per collective on rank 0."""
    import numpy as np

    import nezha
    comm = nezha.Communicator()
    a = np.ones(args.size // 4, np.float32)
    for i in range(args.count):
        comm.barrier()
        t0 = time.time()
        comm.allreduce(a)
        t1 = time.time()
        if comm.rank == 0:
            st = comm.stats()
            plan = comm._st.last_plan
            shares = {}  # a channel's slice may be cut into pieces (failover): add them up
            for c, _, cnt in plan.slices:
                name = comm._mesh.chan_name(c)
                shares[name] = shares.get(name, 0) + cnt / a.size
            print("ROW " + json.dumps(dict(i=i, start=t0, ms=(t1 - t0) * 1e3, shares=shares,
                                           rates=st["model"]["rates_mbps"])), flush=True)
    comm.close()


def main():
    """Driver."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--size", default="16M")
    p.add_argument("--count", type=int, default=60)
    p.add_argument("--from", dest="rate_from", default="400mbit")
    p.add_argument("--to", dest="rate_to", default="100mbit")
    p.add_argument("--change-at", type=float, default=8.0, help="seconds after the start")
    p.add_argument("--lab", default=None, help="use this running lab")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = args.size.upper()
    args.size = int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)
    if args.worker:
        return worker(args)

    from nezha.lab import Lab, LabSpec
    lab = Lab.attach(args.lab) if args.lab else Lab(LabSpec(hosts=4, rails=2,
                                                            rates=args.rate_from, name="nzrc"))
    if not args.lab:
        lab.up(replace=True)
    lab.rate(1, args.rate_from)
    out = {}
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--size", str(args.size),
           "--count", str(args.count)]
    env = dict(os.environ, PYTHONPATH=ROOT, NEZHA_SOCKET_IFNAME="rail0,rail1")

    def job():
        out["res"] = lab.run(cmd, env=env, timeout=1800, capture=True)

    try:
        t = threading.Thread(target=job)
        start = time.time()
        t.start()
        time.sleep(args.change_at)
        changed = time.time()
        lab.rate(1, args.rate_to)
        t.join()
    finally:
        if not args.lab:
            lab.down()
    res = out["res"]
    rows = [json.loads(line[4:]) for line in (res.stdout or "").splitlines()
            if line.startswith("ROW ")]
    if res.returncode != 0 or not rows:
        print((res.stdout or "") + (res.stderr or ""), file=sys.stderr)
        return 1
    final = rows[-1]["shares"]
    first_after = next((r["i"] for r in rows if r["start"] >= changed), None)
    settled = None
    if first_after is not None:
        for r in rows[first_after:]:
            if all(abs(r["shares"].get(k, 0) - v) <= 0.02 for k, v in final.items()):
                settled = r["i"]
                break
    print(f"# rate change: rail1 {args.rate_from} -> {args.rate_to} at {changed - start:.1f} s "
          f"(during collective {first_after}); {len(rows)} allreduces of {args.size} B, 4 ranks")
    print(f"{'# i':<5}{'ms':>10}  split")
    for r in rows:
        mark = " <- rate changed" if r["i"] == first_after else (
            " <- settled" if r["i"] == settled else "")
        split = ", ".join(f"{k} {100 * v:.1f}%" for k, v in r["shares"].items())
        print(f"{r['i']:<5}{r['ms']:>10.1f}  {split}{mark}")
    if settled is None or first_after is None:
        print("# the split did not settle")
    else:
        print(f"# settled {settled - first_after} collectives after the change "
              f"(final split {', '.join(f'{k} {100 * v:.1f}%' for k, v in final.items())})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, changed=changed, first_after=first_after, settled=settled),
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
