"""Back to back: 20 warm-up then 200 broadcasts of SIZE bytes from root 0, no barrier between
them; per rank: time per call, votes held, algorithm. usage: probe.py SIZE [SIZE...]"""
import sys
import time

import numpy as np

import nezha

comm = nezha.Communicator()
for size in map(int, sys.argv[1:]):
    buf = np.ones(size // 4, np.float32)
    for _ in range(20):
        comm.broadcast(buf, 0)
    v0 = comm.stats()["votes"]
    comm.barrier()
    t = time.perf_counter()
    for _ in range(200):
        comm.broadcast(buf, 0)
    dt = (time.perf_counter() - t) / 200
    votes = comm.stats()["votes"] - v0
    print(f"PROBE size {size} rank {comm.rank} per_call_us {dt * 1e6:.0f} votes {votes} "
          f"algo {comm.algorithm_for(size, 'broadcast')}", flush=True)
comm.close()
