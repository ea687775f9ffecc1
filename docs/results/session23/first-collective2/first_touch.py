import mmap, time, numpy as np, sys, warnings
warnings.simplefilter('ignore')
N=int(sys.argv[2])<<20; H=2<<20
def smaps_huge():
    return sum(int(l.split()[1]) for l in open('/proc/self/smaps') if l.startswith('AnonHugePages:'))
src = np.ones(N, np.uint8)
kind = sys.argv[1]
h0 = smaps_huge()
if kind == 'nh':
    np._core.multiarray._set_madvise_hugepage(False); a = np.zeros(N, np.uint8)
elif kind == 'np':
    a = np.zeros(N, np.uint8)
else:
    m = mmap.mmap(-1, N + H, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS); b = np.frombuffer(m, np.uint8); off = (-b.ctypes.data) % H
    a = b[off:off + N]; mmap.mmap.madvise(m, mmap.MADV_HUGEPAGE, off, N)
t=time.perf_counter(); np.copyto(a, src); t1=time.perf_counter()-t
print(kind, N>>20, '%.2f'%(t1*1e3), (smaps_huge()-h0)>>10)
