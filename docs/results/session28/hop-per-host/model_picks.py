#!/usr/bin/env python3
"""The model offline from each B run's agreed samples (rate probe, 8 B step, rd 4/16/64 KiB):
rd and hier prices and the pick at 4-64 KiB, against what the run picked and took.
Usage: PYTHONPATH=<tree> python model_picks.py DIR"""
import os, sys, json
sys.path.insert(0, os.environ['PYTHONPATH'])
from nezha.config import Config
from nezha.costmodel import alpha_of_small
from nezha.planner import layout_planner, ALGO_NAMES
import glob
for f in sorted(glob.glob(os.path.join(sys.argv[1], '*-B*.json'))):
    d = json.load(open(f))
    for r in d['runs']:
        if r['system'] != 'nezha-all': continue
        st = r['probe']; hop = st['step']['hop']; mbps = list(st['mbps'].values())
        hosts = [0]*4+[1]*4 if '2x4' in f else [0,0,1,1,2,2,3,3]
        p = layout_planner(Config.load({}, environ={}), hosts, None, 2, 1, True)
        p.set_hosts(hosts, crowding=4); p.set_rail_rates(mbps, ring_payload=True)
        p.set_step_latency(alpha_of_small(hosts, hop["small_ns"] * 1e-9), "test"); p.set_hop_samples(hop)
        real = {x['size']>>10: (x['algorithm'], round(x['avg_us'])) for x in r['results']}
        row = []
        for kb in (4, 8, 16, 32, 64):
            ft = p.flat_times("allreduce", kb<<10)
            row.append(f"{kb}K rd {ft['rd']*1e6:.0f} hier {p._hier_time('allreduce', kb<<10):.0f} -> {ALGO_NAMES[p.algorithm('allreduce', kb<<10)]} real {real.get(kb)}")
        print(f.split('/')[-1], r['rep'], p.switch_points('allreduce'), '\n   ' + '\n   '.join(row))
