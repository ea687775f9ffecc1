"""The tail of a call (BD_PROF=1 runs of breakdown.py): per rank, on the common clock (ms
after the last rank's last engine op): its own last engine op, its vote's start and end,
agree's end, the call's end."""
import glob, json, sys

for d in sys.argv[1:]:
    R = sorted((json.load(open(f)) for f in glob.glob(d + "/rank*.json")), key=lambda x: x["rank"])
    print("==", d)
    for i, _ in enumerate(R[0]["sep"]):
        last = max(x["sep"][i]["ops"]["t0"] + max(o[6] for o in x["sep"][i]["ops"]["ops"]) for x in R)
        ms = lambda t: (t - last) / 1e6
        rows = []
        for x in R:
            c = x["sep"][i]; el = c["ops"]["t0"] + max(o[6] for o in c["ops"]["ops"])
            v = [p for p in x["prof"].get("_vote", []) if c["t0"] <= p[0] <= c["t1"]]
            a = [p for p in x["prof"].get("agree", []) if c["t0"] <= p[0] <= c["t1"]]
            fm = [p for p in x["prof"].get("_feed_model", []) if c["t0"] <= p[0] <= c["t1"]]
            rows.append(f"r{x['rank']}: eng {ms(el):6.2f} vote {ms(v[0][0]):6.2f}..{ms(v[-1][1]):6.2f}"
                        f"({len(v)}) agree-end {ms(a[-1][1]):6.2f} feed {ms(fm[0][0]):5.2f}..{ms(fm[-1][1]):5.2f} end {ms(c['t1']):6.2f}")
        print(f"call {i}:\n  " + "\n  ".join(rows))
