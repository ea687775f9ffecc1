"""The small broadcast with failover: a lazy binomial tree whose root and inner ranks return
once their sends are handed to the rail, or, right after such a tree, an allreduce of zeros
(two early trees in a row would let ranks run two of them ahead of a rank stuck in the
first). Every result exact against numpy; every rank runs the same algorithm for each call
(tests/workers/bcast_seq_worker.py). Rail cuts under them: tests/test_loop_faults.py."""
import json
import os
import types

import pytest

from nezha._core import engine as _eng
from nezha.planner import ALGO_RD, ALGO_TREE, Plan, split_counts
from tests.spawn import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "workers", "bcast_seq_worker.py")


def test_the_early_algorithm_is_the_tree():
    assert _eng.RUN_EARLY_ALGO == ALGO_TREE


def test_a_lazy_tree_keeps_the_collective_before_it_too():
    """A lazy tree's root returns before any other rank entered it: the collective before
    stays kept with it, until the next lazy one (never such a tree) proves both finished."""
    st = _eng.RunState(10.0)
    req = types.SimpleNamespace(name="x")
    rd, tree = Plan([(0, 0, 1)], ALGO_RD), Plan([(0, 0, 1)], ALGO_TREE)
    st.ran(rd, rd, 0, req, True, True, "in0")
    assert st.kept(0)[4] == "in0" and not st.prev_early
    st.ran(tree, tree, 1, req, True, True, "in1")
    assert st.kept(0)[4] == "in0" and st.kept(1)[4] == "in1" and st.prev_early
    st.ran(rd, rd, 2, req, True, True, "in2")
    assert st.kept(0) is None and st.kept(1) is None and st.kept(2)[4] == "in2"
    assert not st.prev_early
    st.ran(tree, tree, 3, req, False, True, None)  # voted: every rank past it
    assert st.pending is None and st.pending_prev is None and not st.prev_early


@pytest.mark.parametrize("n,tree", [(1, ""), (2, ""), (3, ""), (4, ""), (5, ""), (8, ""),
                                    (3, "flat"), (4, "striped"), (4, "striped-flat"),
                                    (5, "striped-flat")])
def test_small_broadcasts_in_sequences_are_exact(n, tree):
    """Every root, sizes 0, 1, primes and the 4 B-16 KiB boundaries, two rails (failover):
    back to back (tree, allreduce, tree), after an allreduce and a barrier, queued, and on
    kept buffers (the fast path must run what the slow path would plan). tree: the tree
    striped over both rails and/or in one round (TEST_TREE, tests/_tree.py), as the lab's
    4 x 1 runs it by the model (Planner._tree_rails, Planner.flat_tree)."""
    env = {"NEZHA_RAILS": "loop", "NEZHA_TIMEOUT": "60", "TEST_TREE": tree}
    res = spawn(n, None, env=env, timeout=600, worker=WORKER)
    for rc, r, out in res:
        assert rc == 0 and r is not None, out[-3000:]
        assert r["wrong"] == [], (r["wrong"][:10], out[-2000:])
    _same_cuts(res)
    if n > 1:  # striped: some broadcast ran on both rails (TEST_TREE took)
        assert (2 in res[0][1]["rails"]) == ("striped" in tree), res[0][1]["rails"]
    algos = [[tuple(x) for x in r["algos"]] for _, r, _ in res]
    assert all(a == algos[0] for a in algos), "ranks ran different algorithms"
    if n > 1:
        assert {"tree", "rd"} <= {a for a, _ in algos[0]}, set(algos[0])
        # a lazy tree (some bytes) is never followed at once by another one; after anything
        # else a small one is a tree again
        seq = algos[0]
        for (a, x), (b, y) in zip(seq, seq[1:]):
            if a == "tree" and x > 0 and b == "tree":
                assert y == 0, seq
            if b == "rd":
                assert a == "tree" and x > 0, seq


def _same_cuts(res):
    """Every rank cut every broadcast alike, and a striped tree's pieces are split_counts'
    of the prior's shares (contiguous, covering the count, none empty)."""
    cuts = [r["cuts"] for _, r, _ in res]
    assert all(c == cuts[0] for c in cuts), "ranks cut a broadcast differently"
    striped = 0
    for count, slices, shares in cuts[0]:
        assert sum(x[2] for x in slices) == count and all(x[2] > 0 for x in slices) or count < 2
        if len(slices) > 1:
            striped += 1
            assert [x[2] for x in slices] == [c for c in split_counts(count, shares) if c], (
                count, slices, shares)
            assert [x[1] for x in slices] == [sum(y[2] for y in slices[:i])
                                              for i in range(len(slices))]
    return striped


@pytest.mark.parametrize("n", [3, 4])
def test_striped_trees_on_400_plus_100_are_exact_and_cut_by_split_counts(n):
    """The striped tree with the prior of 400 + 100 (4:1, alike on every rank): every
    result exact (sizes 0, 1, primes, not divisible), every rank the same slices, each
    striped one split_counts' cut (the old int(count x share) gave the 100 the rest: 4096
    B as 3276/820, not 3296/800; fails there)."""
    env = {"NEZHA_RAILS": "loop", "NEZHA_TIMEOUT": "60", "TEST_TREE": "striped",
           "TEST_TREE_PRIOR": "[4, 1]"}
    res = spawn(n, None, env=env, timeout=600, worker=WORKER)
    for rc, r, out in res:
        assert rc == 0 and r is not None, out[-3000:]
        assert r["wrong"] == [], (r["wrong"][:10], out[-2000:])
    assert _same_cuts(res) > 20
    assert any(s[1][2] < 0.21 * c and s[1][2] > 0.19 * c
               for c, s, _ in res[0][1]["cuts"] if len(s) == 2 and c >= 4096)


KEEP_WORKER = os.path.join(ROOT, "tests", "workers", "bcast_keep_worker.py")


@pytest.mark.parametrize("layout", ["4x1", "2x2"])
def test_lazy_broadcasts_keep_no_copy_of_the_zeros(layout):
    """A lazy broadcast (tree, the allreduce of zeros after one, hierarchical up to 256 KiB
    at 2 x 2) keeps its input for a re-run. On a rank other than the root that input is the
    library's zeros, which nothing writes: it keeps them as they are, on the slow path and
    the fast path, where it copied up to 256 KiB a call (session 29's lazy hier; fails on
    that code: "copy"). The root keeps a copy apart from its buffer; every result exact.
    Re-runs from what is kept, through rail faults: tests/test_loop_faults.py."""
    env = {"NEZHA_RAILS": "loop,shm" if layout == "2x2" else "loop", "NEZHA_TIMEOUT": "60"}
    rank_env = ({q: {"NEZHA_HOST_ID": f"h{q // 2}"} for q in range(4)} if layout == "2x2"
                else None)
    res = spawn(4, None, env=env, rank_env=rank_env, timeout=600, worker=KEEP_WORKER)
    for rc, r, out in res:
        assert rc == 0 and r is not None, out[-3000:]
        assert r["wrong"] == [], r["wrong"][:10]
    algos = set()
    for _, r, _ in res:
        for nbytes, root, rep, algo, fast, kind in r["kept"]:
            if kind == "none":  # not lazy (voted: a large chain; nothing kept)
                assert nbytes > 8192, (nbytes, algo)
                continue
            algos.add((algo, nbytes > 8192))
            want = "zeros" if r["rank"] != root else "copy"
            assert kind == want, (r["rank"], nbytes, root, rep, algo, fast, kind)
    assert {("tree", False), ("rd", False)} <= algos, algos
    if layout == "2x2":  # lazy hier ones up to 256 KiB
        assert ("hier", True) in algos, algos
    fast = [x for _, r, _ in res for x in r["kept"] if x[4] and x[5] != "none"]
    assert fast, "no lazy broadcast ran through the fast path"


CHAIN_WORKER = os.path.join(ROOT, "tests", "workers", "bcast_chain_worker.py")


@pytest.mark.parametrize("mbps", [[257.0, 257.0], [251.0, 62.5]])
def test_the_split_chain_is_exact_around_where_the_model_splits_it(mbps):
    """The planner as the lab's 4 x 1 sees 400 + 400 and 400 + 100 (probed rates, a 16 us
    step; tests/workers/bcast_chain_worker.py): the chain broadcast's rails by the model
    (Planner.CHAIN_SLICE). Every root, uint8 and float32, 16/32 KiB and one byte either side
    of where the chain goes over both rails: every result exact, every rank the same plan,
    the slices covering the payload once. On 400 + 400 32 KiB runs on both rails and 16
    KiB on one; on 400 + 100 32 KiB stays on one. Fails on main (32 KiB on one rail)."""
    env = {"NEZHA_RAILS": "loop", "NEZHA_TIMEOUT": "60", "TEST_CHAIN_ALPHA": "16e-6",
           "TEST_CHAIN_MBPS": json.dumps(mbps)}
    res = spawn(4, None, env=env, timeout=600, worker=CHAIN_WORKER)
    for rc, r, out in res:
        assert rc == 0 and r is not None, out[-3000:]
        assert r["model"] and r["wrong"] == [], (r["wrong"][:10], r["piece"])
    plans = [r["plans"] for _, r, _ in res]
    assert all(pl == plans[0] for pl in plans), "ranks planned a broadcast differently"
    assert res[0][1]["split_at"] is not None
    rails = {}
    for nbytes, algo, slices in plans[0]:
        assert algo == "chain", (nbytes, algo)
        count = sum(c for _, _, c in slices)
        assert [o for _, o, _ in slices] == [sum(c for _, _, c in slices[:i])
                                             for i in range(len(slices))]
        assert count in (nbytes, nbytes // 4) and all(c > 0 for _, _, c in slices)
        rails[nbytes] = len({ch for ch, _, _ in slices})
    at = res[0][1]["split_at"]
    assert rails[at - 1] == 1 and rails[at] == rails[at + 1] == 2, (at, rails)
    assert rails[16384] == 1
    assert rails[32768] == (2 if mbps[0] == mbps[1] else 1), rails
