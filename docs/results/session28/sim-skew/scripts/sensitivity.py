"""How the row prediction moves with the skew constant: each fit of skew_fit.py (K, µs),
every nezha-all run-row of the eight stored runs: (replay_tbf - K) / row - 1, % (the
replay's own JSON, `nezha sim lab FILE --json`; row_of_span never clips here).
usage: sensitivity.py DIR"""
import json
import sys

runs = ["het-1", "het-2", "het-3", "eq-1", "eq-2", "eq-3", "compare-400mbit",
        "compare-400mbit-100mbit-session13"]
d = sys.argv[1]
fits = [("0 (span)", 0.0), ("274 (s26, the constant)", 274.1), ("281 (s21 nezha-all)", 280.8),
        ("304 (s27 ina)", 304.2), ("319 (s21 rail0/1)", 319.3)]
print("| K (µs, fitted on) | rows > 10 % | 64 KiB min … max | 128 KiB | 256 KiB | 512 KiB–64 MiB |")
print("|---|---|---|---|---|---|")
for label, K in fits:
    e = {}
    for n in runs:
        for r in json.load(open(f"{d}/{n}.json"))["rows"]:
            if r["system"] == "nezha-all":
                e.setdefault(r["nbytes"], []).append(100 * ((r["replay_tbf_us"] - K) / r["measured_us"] - 1))
    miss = sum(abs(x) > 10 for v in e.values() for x in v)
    big = [x for nb, v in e.items() if nb >= 512 << 10 for x in v]
    f = lambda v: f"{min(v):+.1f} … {max(v):+.1f}"
    print(f"| {label} | {miss} of {sum(map(len, e.values()))} | {f(e[64 << 10])} | {f(e[128 << 10])} | "
          f"{f(e[256 << 10])} | {f(big)} |")
