"""Replays each nezha-all run's recorded probe (rates, step, hop samples) through the planner of the
tree on PYTHONPATH: the broadcast plan it picks at 8-64 KiB (argv: ab-<tree>-<pair> names)."""
import gzip, json, sys
from nezha.config import Config
from nezha.planner import layout_planner, ALGO_NAMES
for t in sys.argv[1:]:
    d=json.load(gzip.open(f"ab-{t}/compare.json.gz"))
    for r in d['runs']:
        if r.get('system')!='nezha-all': continue
        pr=r['doc']['stats']['probe']; st=pr['step']
        mb=[pr['mbps']['rail0'], pr['mbps']['rail1']]
        p=layout_planner(Config.load({}, environ={}), [0,1,2,3], mb, failover=True)
        p.set_rail_rates(mb, ring_payload=True); p.set_step_latency(st['alpha_us']*1e-6,"x")
        p.set_hop_samples(st['hop'])
        ch=[]
        for kb in (8,16,32,64):
            pl=p.broadcast(kb<<10,1); ch.append(f"{kb}k:{ALGO_NAMES[pl.algo]}{len(set(pl.chans))}")
        print(t, mb, st['alpha_us'], " ".join(ch))
