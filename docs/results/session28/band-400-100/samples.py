"""The agreed start-up samples (8 B, rd 4/16/64 KiB ns) and probed rates of every nezha job in
compare runs. usage: python samples.py /tmp/h39/diag-u1 [...]"""
import json
import sys

for path in sys.argv[1:]:
    d = json.load(open(f"{path}/compare.json"))
    print(path, d.get("tree", {}).get("path", d.get("tree")))
    for r in d["runs"]:
        if r["system"].startswith("nezha") and r.get("doc"):
            st = r["doc"]["stats"]
            pr = st.get("probe", {})
            step = pr.get("step", {})
            hop = step.get("hop", {})
            print(f"  {r['system']:16s} {r['collective']:10s} rep {r['rep']} mbps {list(pr.get('mbps', {}).values())}"
                  f" small {hop.get('small_ns')} ns {hop.get('ns')}")
