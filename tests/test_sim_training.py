"""The training-step model of `nezha sim train` (issue 16): buckets reduced in order as
backward makes them ready, against hand-computed steps and the ring's bandwidth term."""
import pytest

from nezha.sim import cli
from nezha.sim import training as T


def test_step_time_by_hand():
    # 100 B of gradients in 40 B buckets: 40, 40, 20, ready at 1 + 3 * (i + 1) / 3 = 2, 3, 4;
    # each takes bytes / 10 s, one after another: 2 + 4 = 6, 6 + 4 = 10, 10 + 2 = 12
    step, exposed = T.step_time(100, 40, 1.0, 3.0, lambda s: s / 10)
    assert step == pytest.approx(12.0) and exposed == pytest.approx(8.0)
    # communication shorter than backward hides behind it but the last bucket
    step, exposed = T.step_time(100, 40, 1.0, 3.0, lambda s: s / 1000)
    assert step == pytest.approx(4.02) and exposed == pytest.approx(0.02)


def test_allreduce_times_are_the_rings_bandwidth_terms():
    # no alpha, no latency: a ring moves 2 (N - 1) / N of S over each link; nezha splits S
    # over two equal rails, so it takes half the one-rail ring's time
    n, s, gbps = 4, 64 << 20, 100.0
    ring = 2 * (n - 1) / n * s / (gbps * 1e9 / 8)
    assert T.allreduce_ring_one_rail(n, gbps, 0.0, 0.0)(s) == pytest.approx(ring, rel=0.02)
    assert T.allreduce_nezha(n, [gbps, gbps], 0.0, 0.0)(s) == pytest.approx(ring / 2, rel=0.02)


def test_train_command_prints_a_speedup_per_node_count(capsys):
    assert cli.main(["train", "--nodes", "4,8", "--model-bytes", "64e6", "--bucket", "16e6",
                     "--fwd-ms", "0", "--bwd-ms", "0", "--alpha", "0", "--gloo-alpha", "0",
                     "--latency", "0"]) == 0
    rows = [ln.split() for ln in capsys.readouterr().out.splitlines()
            if ln.split()[:1] in (["4"], ["8"])]
    # no compute, no per-message cost: two rails against one is 2x, whatever the count
    assert [r[0] for r in rows] == ["4", "8"]
    assert [float(r[-1]) for r in rows] == pytest.approx([2.0, 2.0], rel=0.03)
