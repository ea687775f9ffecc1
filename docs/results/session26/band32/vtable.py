"""Table of pieces.sh output: per collective and size, every variant's times (us, in run
order) and its mean over the first variant's mean (< 1: faster). usage: python vtable.py out.txt"""
import collections
import re
import sys


def parse(path):
    cur, extra = None, []
    data = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
    order = collections.defaultdict(list)
    for ln in open(path):
        ln = ln.strip()
        m = re.match(r"== (\S+) (\S+)$", ln)
        if m and m.group(1) != "model_report":
            cur = m.groups()
            if cur[1] not in order[cur[0]]:
                order[cur[0]].append(cur[1])
            continue
        if ln.startswith(("STEP", "RATES", "TABLE", "MODEL", "== model")) or "start" in ln or ln.endswith("end"):
            extra.append(ln)
            continue
        p = ln.split()
        if cur and len(p) == 2 and p[0].isdigit():
            data[cur[0]][int(p[0])][cur[1]].append(float(p[1]))
    return data, order, extra


def main():
    d, order, extra = parse(sys.argv[1])
    for x in extra:
        print(x)
    for coll in d:
        vs = order[coll]
        print(f"\n{coll}\n\n| size | " + " | ".join(vs) + " | " + " | ".join(f"{v}/{vs[0]}" for v in vs[1:]) + " |")
        print("|---" * (2 * len(vs)) + "|")
        for size in sorted(d[coll]):
            row = d[coll][size]
            mean = {v: sum(row[v]) / len(row[v]) for v in vs if row[v]}
            cells = [", ".join(f"{x:.0f}" for x in row[v]) for v in vs]
            rat = [f"{mean[v] / mean[vs[0]]:.2f}" if v in mean and vs[0] in mean else "" for v in vs[1:]]
            print(f"| {size} | " + " | ".join(cells) + " | " + " | ".join(rat) + " |")


if __name__ == "__main__":
    main()
