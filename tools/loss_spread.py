"""How far per-step loss files (examples/train_ddp.py --losses, tools/loss_reference.py
--out) are from the first one: the first step where each differs, and the largest relative
difference over steps [0, 10), [10, 20), ... (one column each).

    python tools/loss_spread.py REF.json A.json B.json ...
"""
import json
import sys


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def main(paths, block=10):
    runs = []
    for p in paths:
        with open(p) as f:
            runs.append(json.load(f))
    ref = runs[0]
    n = min(len(r) for r in runs)
    cols = [(i, min(i + block, n)) for i in range(0, n, block)]
    print(f"reference {paths[0]} ({n} steps); largest relative difference per block of steps")
    print(f"{'file':40s} {'first diff':>10s} " + " ".join(f"{f'{a}-{b - 1}':>9s}"
                                                        for a, b in cols))
    for p, r in zip(paths[1:], runs[1:]):
        first = next((i for i in range(n) if r[i] != ref[i]), None)
        worst = [max(rel(r[i], ref[i]) for i in range(a, b)) for a, b in cols]
        print(f"{p[-40:]:40s} {'-' if first is None else first:>10} "
              + " ".join(f"{w:9.2e}" for w in worst))


if __name__ == "__main__":
    main(sys.argv[1:])
