import json,sys,numpy as np
d=json.load(open(sys.argv[1]))
print(d['options'].get('max_size'), [ (r['system'], r.get('error')) for r in d['runs'] if r.get('error')][:3])
for r in d['runs']:
    doc=r['doc']
    if not doc: continue
    for res in doc['results']:
        if res['size'] not in (2048,4096,8192,16384): continue
        rc=res.get('rank_calls')
        if not rc: continue
        st=np.array(rc['start_us'][0]); us=np.array(rc['us'][0])
        cyc=np.median(np.diff(st)); call=np.median(us)
        print(f"{r['system']:16s} rep{r['rep']} {res['size']:6d} {res['algorithm'][:28]:28s} avg {res['avg_us']:6.1f} med-call {call:6.1f} cycle {cyc:6.1f} gap {cyc-call:6.1f} iters {res['iterations']}")
