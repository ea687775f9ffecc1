"""The engine's op trace (Engine.trace_ops / op_times, include/nezha/nezha_engine.h), the
measurement hook behind docs/results/session27/hier-floor: with it on, a hierarchical
allreduce over loop + shm (2 hosts x 2 ranks) stays exact, and the trace holds the last
run of at least min_ops ops, each finished (ns after the run's start, within it), with
ops to this host's and to the other host's ranks; runs below min_ops leave it alone, and
off it records nothing."""
import os

from tests.spawn import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "workers", "trace_worker.py")


def test_op_trace_of_a_hierarchical_allreduce():
    host = [0, 0, 1, 1]
    env = {"NEZHA_RAILS": "loop,shm", "NEZHA_LOOP_RAILS": "2", "NEZHA_ALGO": "hier",
           "NEZHA_TIMEOUT": "30", "NEZHA_HIER_CHUNK": "64k"}
    res = spawn(4, None, env, {r: {"NEZHA_HOST_ID": f"h{host[r]}", "LOCAL_RANK": str(r % 2),
                                   "LOCAL_WORLD_SIZE": "2"} for r in range(4)},
                timeout=180, worker=WORKER)
    for r, (rc, doc, out) in enumerate(res):
        assert rc == 0 and doc is not None and doc["error"] is None, out[-3000:]
        assert doc["wrong"] == [], doc["wrong"]
        tr = doc["traces"]
        big = tr["100003"]
        assert len(big["ops"]) >= 50 and big["t0"] > 0
        # the small ones have fewer than 50 ops: they left the trace of the run before
        assert tr["0"] == tr["1"] == tr["7"] and len(tr["7"]["ops"]) < len(big["ops"])
        peers = {p for _, p, _, _, _, _, _ in big["ops"] if p >= 0}
        assert peers & {q for q in range(4) if host[q] == host[r] and q != r}  # shm
        assert peers & {q for q in range(4) if host[q] != host[r]}              # rails
        t = [o[6] for o in big["ops"]]
        assert all(x >= 0 for x in t), "an op of a finished run not marked finished"
        assert max(t) < 30e9
        # the trace stopped where it was turned off
        assert doc["after_off"] == {"t0": 0, "ops": []}
