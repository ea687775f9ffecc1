"""A rank of test_planner's split-agreement test: allreduces over two loop rails, this
rank's own time on rail 1 scaled by (1 + rank) before the model records it (each rank times
the rails differently), and after every sync the split of every bucket as exact hex floats.
The results are checked against numpy."""
import numpy as np

import nezha
from tests._result import report

c = nezha.Communicator()
m = c.planner.model
record, apply = m.record, m.apply
splits = []


fed = [0, 0]   # records given, records learned from (the cold call dropped or not)


def skewed_record(key, chan_bytes, chan_ns):
    before = m.pending_count
    record(key, chan_bytes, [t * (1 + c.rank) if i == 1 else t for i, t in enumerate(chan_ns)])
    fed[0] += 1
    fed[1] += m.pending_count > before


def logged_apply(keys, summed, nranks):
    apply(keys, summed, nranks)
    splits.append({f"{k[0]}:{k[1]}": [float(s).hex() for s in b.shares]
                   for k, b in sorted(m.buckets.items()) if b.shares is not None})


m.record, m.apply = skewed_record, logged_apply
rng = np.random.default_rng(1234)
bad = 0
for i in range(24):
    n = (1 << 20) + 4096 * i            # 4 MiB and up: one bucket, striped
    parts = [rng.integers(-1000, 1000, n).astype(np.int32) for _ in range(c.size)]
    x = parts[c.rank].copy()
    c.allreduce(x)
    bad += int(not np.array_equal(x, np.sum(parts, axis=0, dtype=np.int32)))
report({"bad": bad, "splits": splits, "syncs": m.syncs, "records": fed[0], "learned": fed[1],
        "probed": c.stats()["probe"]["probed"]})
c.close()
