"""Per case: ups sooner than NEZHA_READMIT (0.3 s) after their down (flaps), and downs in
the window after a heal (before the next cut): totals over every rank's RESULT events."""
import json, sys, glob, os
tot = dict(cases=0, cases_flap=0, flaps=0, cases_postheal=0, postheal=0)
for d in sorted(x for x in glob.glob(sys.argv[1] + "/**/driver.log", recursive=True) if "current" not in x):
    dd = os.path.dirname(d); tot["cases"] += 1
    marks = [(float(l.split()[0]), l.split()[1]) for l in open(d)]
    win = [(t, next((t2 for t2, w2 in marks[i:] if w2 == "cut"), 1e20))
           for i, (t, w) in enumerate(marks) if w == "heal"]
    f = p = 0
    for r in range(4):
        txt = open(os.path.join(dd, f"rank{r}.log")).read()
        res = [json.loads(l.split("RESULT ", 1)[1]) for l in txt.splitlines() if "RESULT " in l]
        for e in res[-1]["events"]:
            if e["event"] == "up" and e.get("down_s") is not None and e["down_s"] < 0.3:
                f += 1
            if e["event"] == "down" and any(a < e["time"] < b for a, b in win):
                p += 1
    tot["flaps"] += f; tot["postheal"] += p
    tot["cases_flap"] += f > 0; tot["cases_postheal"] += p > 0
print(sys.argv[1], tot)
