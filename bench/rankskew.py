"""How far apart the ranks of a compare run began and ended each timed call.

    python bench/rankskew.py COMPARE.json[.gz] [--system nezha-all] [--max-size 4M]

Reads the rank_calls that bench/_common.py records (every rank's call starts and times on
one clock). Per size, means over the timed calls (µs):
  row      the bench's number: the mean over ranks of each rank's own mean time;
  slowest  the slowest rank's mean (max_us);
  span     last rank's end minus first rank's start: the collective as one clock sees it,
           which is what nezha sim predicts (it starts every rank at once);
  lag      mean over ranks of a rank's start after the first rank's;
  end      mean over ranks of a rank's end before the last rank's.
row = span - lag - end, exactly, call by call.
"""
import argparse
import gzip
import json

import numpy as np


def load(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        return json.load(f)


def skew(calls):
    """Per call: (row, span, lag, end) in µs, from one result's rank_calls."""
    s = np.asarray(calls["start_us"], float)   # ranks x calls
    d = np.asarray(calls["us"], float)
    e = s + d
    span = e.max(axis=0) - s.min(axis=0)
    lag = (s - s.min(axis=0)).mean(axis=0)
    end = (e.max(axis=0) - e).mean(axis=0)
    return d.mean(axis=0), span, lag, end


def table(doc, system, max_size):
    out = []
    for run in doc.get("runs") or []:
        if run.get("system") != system or not run.get("doc"):
            continue
        for r in run["doc"]["results"]:
            if r["nbytes"] < 64 << 10 or r["nbytes"] > max_size or "rank_calls" not in r:
                continue
            row, span, lag, end = skew(r["rank_calls"])
            out.append((run.get("rep"), r["nbytes"], row.mean(), r["max_us"], span.mean(),
                        lag.mean(), end.mean(), len(row)))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path")
    p.add_argument("--system", default="nezha-all")
    p.add_argument("--max-size", type=lambda x: int(float(x[:-1]) * {"K": 1 << 10, "M": 1 << 20}[x[-1]]) if x[-1] in "KM" else int(x), default=4 << 20)
    a = p.parse_args(argv)
    print(f"# {a.path}: {a.system}, means over the timed calls (us)")
    print(f"{'rep':>3} {'nbytes':>9} {'row':>9} {'slowest':>9} {'span':>9} {'lag':>7} {'end':>7} "
          f"{'span-row':>8} {'calls':>5}")
    for rep, nb, row, slow, span, lag, end, n in table(load(a.path), a.system, a.max_size):
        print(f"{rep!s:>3} {nb:>9} {row:9.1f} {slow:9.1f} {span:9.1f} {lag:7.1f} {end:7.1f} "
              f"{100 * (span / row - 1):+7.1f}% {n:>5}")


if __name__ == "__main__":
    main()
