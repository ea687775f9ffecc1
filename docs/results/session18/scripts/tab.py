import json, sys
# usage: tab.py before/compare.json after/compare.json [systems...]
b, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
systems = sys.argv[3:] or ['nezha-all', 'mpi-all', 'mpi-rail0']
for coll in ['allreduce', 'allgather', 'reduce_scatter', 'broadcast']:
    sb, sa = b['summary'].get(coll, {}), a['summary'].get(coll, {})
    if not sb: continue
    print(f'## {coll}: nezha-all before / after (us), best mpi before / after, after/best-mpi')
    rows = lambda s, k: {r['nbytes']: r['avg_us'] for r in s.get(k, [])}
    nb, na = rows(sb, 'nezha-all'), rows(sa, 'nezha-all')
    mb = [rows(sb, k) for k in systems[1:]]; ma = [rows(sa, k) for k in systems[1:]]
    for n in sorted(na):
        bm = min(m.get(n, 1e18) for m in mb); am = min(m.get(n, 1e18) for m in ma)
        print(f'{n:>8} {nb.get(n, 0):9.1f} {na[n]:9.1f}  mpi {bm:9.1f} {am:9.1f}  best-mpi/nezha after {am / na[n]:.2f} before {bm / nb.get(n, 1):.2f}')
