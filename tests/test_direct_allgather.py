"""The direct allgather (NEZHA_ALGO=direct, session 29): one step, this rank's slice sent
straight to every other rank and every other rank's received straight from it; nothing
forwarded, so no receive waits on another rank's receive. Exactness over two channels at
the split's unit boundaries: tests/test_split_rounding.py (rounding_worker.py)."""
import numpy as np
import pytest

from nezha._core import engine as _eng
from nezha.algorithms import slices
from nezha.config import Config
from nezha.planner import ALGO_DIRECT, ALGO_NAMES, layout_planner
from nezha.types import DType, ReduceOp
from tests.test_rd_blocks import RECV, SEND, _data_ops


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("count,off,cnt", [(7, 0, 7), (10, 4, 6)])
def test_direct_posts_one_send_and_one_receive_per_peer(n, count, off, cnt):
    for r in range(n):
        s = _eng.Schedule(r, n, 1, _eng.COLL_ALLGATHER, 1, int(DType.INT32),
                          int(ReduceOp.SUM), count, -1, ALGO_DIRECT, 0)
        a = np.zeros(count + 1, np.int32)
        o = np.zeros(n * count + 1, np.int32)
        slices.allgather(s, ALGO_DIRECT, 0, o.ctypes.data, a.ctypes.data, count, off, cnt,
                         list(range(n)))
        ops = _data_ops(s)
        sends = [(ep, nb) for kind, ep, nb in ops if kind == SEND]
        recvs = [(ep, nb) for kind, ep, nb in ops if kind == RECV]
        assert sends == [((r + k) % n, cnt * 4) for k in range(1, n)]
        assert recvs == [((r - k) % n, cnt * 4) for k in range(1, n)]
        # nothing is forwarded: no send waits for any other op
        assert all(d0 < 0 and d1 < 0 for kind, _, _, d0, d1, _ in s.ops_list()
                   if kind == SEND)


def test_direct_is_forced_only():
    """auto never picks it (its price is not measured); NEZHA_ALGO=direct forces it for
    allgather on every rank alike, and leaves the other collectives to the model."""
    auto = layout_planner(Config.load({}, environ={}), [0, 1, 2, 3], [400, 100], 2)
    forced = [layout_planner(Config.load({"ALGO": "direct"}, environ={}), [0, 1, 2, 3],
                             [400, 100], 2) for _ in range(4)]
    for kb in (1, 4, 8, 16, 64, 1024):
        nbytes = 4 * (kb << 10)
        assert auto.algorithm("allgather", nbytes) != ALGO_DIRECT
        assert {p.algorithm("allgather", nbytes) for p in forced} == {ALGO_DIRECT}
        assert ALGO_NAMES[forced[0].algorithm("allreduce", nbytes)] == \
            ALGO_NAMES[auto.algorithm("allreduce", nbytes)]
