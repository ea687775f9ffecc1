"""One rank of an INA job in the lab (lab run --env-rendezvous): checked allreduces over the
service at NEZHA_INA_ADDR; prints 'OK <collectives> <retransmissions>' or raises."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from nezha.rails.ina import InaClient  # noqa: E402

rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20
c = InaClient(os.environ["NEZHA_INA_ADDR"].split(",")[0], secret=bytes.fromhex(os.environ["NEZHA_JOB_SECRET"]),
              rank=rank, size=n, timeout=10.0, window=16)
done = 0
for i in range(iters):
    for count in (1, 1000, 200_003):
        buf = (np.arange(count, dtype=np.float32) % 97) + rank + i
        want = (np.arange(count, dtype=np.float32) % 97) * n + n * i + n * (n - 1) / 2
        c.allreduce(buf)
        assert np.array_equal(buf, want), f"rank {rank}: wrong result at {i}, count {count}"
        done += 1
print(f"OK {done} {c.stats()['retrans']}", flush=True)
c.close()
