import sys, time, numpy as np
if sys.argv[1] == "off":
    np._core.multiarray._set_madvise_hugepage(False)
a = np.ones(4 << 20, np.float32)
out = []
for i in range(3):
    b = np.zeros(16 << 20, np.uint8).view(np.float32)
    t = time.perf_counter(); np.copyto(b, a); t1 = time.perf_counter()
    np.copyto(b, a); t2 = time.perf_counter()
    out.append(f"{1e3*(t1-t):.1f}/{1e3*(t2-t1):.1f}")
    del b
print(sys.argv[1], " ".join(out))
