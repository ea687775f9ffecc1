import statistics as st, sys, glob
d = sys.argv[1]
def load(f):
    out = {}
    for l in open(f):
        if l.startswith('#') or not l.strip(): continue
        x = l.split()
        try: out[int(x[0])] = dict(rail0=float(x[1]), rail1=float(x[2]), all=float(x[3]), nofo=float(x[4]), mpi=float(x[5]))
        except ValueError: pass
    return out
n = len(glob.glob(f'{d}/before-*.txt'))
B = [load(f'{d}/before-{i}.txt') for i in range(1, n + 1)]
A = [load(f'{d}/after-{i}.txt') for i in range(1, n + 1)]
print(f'# {n} interleaved pairs (ABBA), median over pairs; all = two rails with failover; ratio = after/before')
print(f'{"size":>6} {"all before":>11} {"all after":>10} {"after/before":>13} {"paired med":>11} {"all/mpi before":>15} {"all/mpi after":>14}')
for s in sorted(B[0]):
    b = [x[s]['all'] for x in B]; a = [x[s]['all'] for x in A]
    pr = [y / x for x, y in zip(b, a)]
    nb = [x[s]['all'] / x[s]['mpi'] for x in B]; na = [x[s]['all'] / x[s]['mpi'] for x in A]
    print(f'{s:>6} {st.median(b):11.1f} {st.median(a):10.1f} {st.median(a)/st.median(b):13.3f} {st.median(pr):11.3f} {st.median(nb):15.3f} {st.median(na):14.3f}')
