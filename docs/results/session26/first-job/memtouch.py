"""First touch of fresh anonymous memory after a free and an idle gap, on this VM.

Per trial: map, touch and unmap SIZE MiB (the pages go back to the guest's free lists), stay
idle GAP s, then map and touch SIZE MiB again, timed (the kernel gives out free pages; those
its free page reporting handed to the hypervisor meanwhile fault on the host too). 4 KiB
pages and transparent huge pages; gaps interleaved, REPS trials each. Also the KiB the guest
reported during the gap (/sys/module/page_reporting/parameters/reported_kib).
    python memtouch.py [SIZE_MIB] [REPS]"""
import mmap
import statistics
import sys
import time

import numpy as np

SIZE = int(sys.argv[1]) << 20 if len(sys.argv) > 1 else 256 << 20
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
GAPS = (0.0, 0.5, 1.0, 2.0, 3.0, 5.0)


def reported():
    try:
        with open("/sys/module/page_reporting/parameters/reported_kib") as f:
            return int(f.read())
    except OSError:
        return 0


def touch(huge):
    m = mmap.mmap(-1, SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
    v = np.frombuffer(m, np.uint8)
    t = time.perf_counter()
    v[::4096] = 1
    dt = (time.perf_counter() - t) * 1e3
    del v
    m.close()
    return dt


res = {}
for rep in range(REPS):
    order = GAPS if rep % 2 == 0 else GAPS[::-1]
    for huge in (False, True):
        for gap in order:
            touch(huge)
            r0 = reported()
            time.sleep(gap)
            r1 = reported()
            res.setdefault((huge, gap), []).append((touch(huge), (r1 - r0) >> 10))
print(f"# first touch of {SIZE >> 20} MiB fresh memory after touch+free and an idle gap; "
      f"{REPS} trials; ms (MiB reported to the host during the gap)")
print(f"{'pages':<6}{'gap s':>6}{'median ms':>11}  trials")
for (huge, gap), v in sorted(res.items()):
    print(f"{'2M' if huge else '4K':<6}{gap:>6.1f}{statistics.median(x for x, _ in v):>11.1f}  "
          + ", ".join(f"{x:.1f} ({m})" for x, m in v))
