"""One rank of the "left behind" scenario (tests/test_failover.py): the driver makes host 3
deaf on the rail of the small allreduces, then every rank runs one more. Ranks 0 and 2
finish it (recursive doubling: 2 hears 3, 0 hears 2) and return; 1 and 3 cannot. Ranks 0 and
2 then close at once ("close"), compute for a while ("idle"), or wait in a recv from rank 1
and 3 ("p2p"); either way 1 and 3 must get an exact result, from a re-run the ranks ahead
take part in.

    behind_worker.py DIR close|idle|p2p      prints RESULT {json}
"""
import os
import sys
import time

import numpy as np

import nezha
from tests._result import report


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.01)


def main(d, mode):
    comm = nezha.Communicator()
    r, n = comm.rank, comm.size
    a = np.zeros(5, np.int64)
    for i in range(50):  # warm up; every rank plans the same channel
        a[:] = i + r
        comm.allreduce(a)
    if r == 0:
        with open(os.path.join(d, "ready.tmp"), "w") as f:
            f.write(comm.stats()["last_plan"])
        os.rename(os.path.join(d, "ready.tmp"), os.path.join(d, "ready"))
    wait_for(os.path.join(d, "go"))
    a = np.arange(5, dtype=np.int64) * (r + 1)
    comm.allreduce(a)
    returned = time.time()
    want = np.arange(5, dtype=np.int64) * (n * (n + 1) // 2)
    woke, got = None, None
    if mode == "idle" and r in (0, 2):
        time.sleep(3)  # the caller computes; the rank behind must not wait for it
        woke = time.time()
    if mode == "p2p":  # 0 and 2 wait for a message that 1 and 3 send once they finish
        msg = np.zeros(3, np.int32)
        if r in (0, 2):
            comm.recv(msg, r + 1)
            got = msg.tolist()
        else:
            comm.send(np.array([r, 7, r * r], np.int32), r - 1)
    comm.close()  # "close": the re-run happens in here
    events = comm.stats()["events"]
    report(dict(rank=r, exact=bool(np.array_equal(a, want)), returned=returned, woke=woke,
                got=got, events=events))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
