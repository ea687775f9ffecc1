"""One rank of tests/test_hier_rails.py: hierarchical collectives on odd sizes against numpy,
and the bytes this rank sent to other hosts on each rail (allreduce and broadcast, then
allgather and reduce_scatter); prints RESULT {json}."""
import numpy as np

import nezha
from nezha.planner import ALGO_HIER
from tests._result import report

SIZES = (0, 1, 2, 7, 1009, 100003)  # primes; 100003 int64 is split over every rail


def cross_sent(comm):
    """Bytes this rank sent to ranks on other hosts, per rail (data channels only)."""
    out = [0] * len(comm.rails)
    hosts, n = comm.planner.hosts, comm.size
    for i, (sent, _) in enumerate(comm._engine.endpoint_bytes()):
        if hosts[i % n] != hosts[comm.rank]:
            out[(i // n) // comm._mesh.nconns] += sent
    return out


def main():
    comm = nezha.Communicator()
    r, n = comm.rank, comm.size
    wrong = []
    hier = [comm.planner.algorithm(c, 1 << 20) == ALGO_HIER for c in
            ("allreduce", "broadcast", "allgather", "reduce_scatter")]
    before = cross_sent(comm)
    for cnt in SIZES:
        for dt in (np.int64, np.float32):
            base = (np.arange(cnt) % 97).astype(dt)
            a = base + r
            comm.allreduce(a)
            if not np.array_equal(a, base * n + n * (n - 1) // 2):
                wrong.append(f"allreduce {cnt} {np.dtype(dt).name}")
            root = cnt % n
            b = base * 3 if r == root else np.zeros(cnt, dt)
            comm.broadcast(b, root)
            if not np.array_equal(b, base * 3):
                wrong.append(f"broadcast {cnt} {np.dtype(dt).name} root {root}")
    after = cross_sent(comm)  # allreduce and broadcast
    for cnt in SIZES:
        for dt in (np.int64, np.float32, np.int32):
            name = np.dtype(dt).name
            send = (np.arange(cnt) % 89 + 5 * r).astype(dt)
            got = np.zeros(cnt * n, dt)
            comm.allgather(send, got)
            want = np.concatenate([(np.arange(cnt) % 89 + 5 * q).astype(dt)
                                   for q in range(n)])
            if not np.array_equal(got, want):
                wrong.append(f"allgather {cnt} {name}")
            full = (np.arange(cnt * n) % 83 + r).astype(dt)
            mine = np.full(cnt, -1, dt)
            comm.reduce_scatter(full, mine)
            tot = ((np.arange(cnt * n) % 83) * n + n * (n - 1) // 2).astype(dt)
            if not np.array_equal(mine, tot[r * cnt:(r + 1) * cnt]):
                wrong.append(f"reduce_scatter {cnt} {name}")
    last = cross_sent(comm)  # allgather and reduce_scatter
    owners = [comm.planner.rail_owners(c) for c in range(comm.nchan)]
    report({"error": None, "wrong": wrong, "hier": hier, "local": comm.local_rank,
            "cross": [x - y for x, y in zip(after, before)],
            "cross_blocks": [x - y for x, y in zip(last, after)], "owners": owners,
            "rails": comm.planner.describe_rails(comm.rails), "syncs": comm.planner.model.syncs})
    comm.close()


if __name__ == "__main__":
    main()
