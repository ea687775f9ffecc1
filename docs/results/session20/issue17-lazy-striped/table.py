"""Collect nezha-all's µs per size from compare.md copies (cmp.sh) and ranks_per_host .md
files (rph.sh): one row per size, one column per run, in the order given."""
import re
import sys


def tables(path):
    """{(collective, size): µs} of the file's first µs table per collective."""
    out, coll = {}, None
    for line in open(path):
        m = re.match(r"#+ .*?(Allreduce|Broadcast|allreduce|broadcast)", line)
        if m and coll != m.group(1).lower() and "latency" in line.lower():
            coll = m.group(1).lower()
        m = re.match(r"\| (\d+ [KM]iB) \| ([\d.]+) \|", line)
        if m and (coll or "rph") and (coll or "allreduce", m.group(1)) not in out:
            out[(coll or "allreduce", m.group(1))] = float(m.group(2))
    return out


if __name__ == "__main__":
    runs = [(p.split("/")[-1].rsplit(".", 1)[0], tables(p)) for p in sys.argv[1:]]
    keys = sorted({k for _, t in runs for k in t},
                  key=lambda k: (k[0], float(k[1].split()[0]) * (1024 if "M" in k[1] else 1)))
    print("| collective | size | " + " | ".join(n for n, _ in runs) + " |")
    print("|---|---:|" + "---:|" * len(runs))
    for k in keys:
        print(f"| {k[0]} | {k[1]} | " + " | ".join(f"{t.get(k, float('nan')):.0f}" for _, t in runs)
              + " |")
