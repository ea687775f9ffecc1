"""A rank whose INA part failed leaves the service before it agrees with the others
(offload.InaOffload.finish): its heartbeats would otherwise keep it "heard", and ranks still
waiting for a result it sends no more data for would take it for late until NEZHA_TIMEOUT
(60 s; seen as a hang in test_small_allreduce_on_ina_exact[5] on a loaded machine)."""
import threading
import types

import numpy as np

from nezha.rails.ina.offload import InaOffload


class _Client:
    def __init__(self):
        self.closed = False

    def close(self):
        self.closed = True


def _offload(client, seen):
    off = object.__new__(InaOffload)
    off.addr = ("10.0.0.1", 17017)
    off.client, off.alive, off.failures, off.kept, off.offloads, off.since_fail = \
        client, True, 0, 0, 0, 0
    off.model = types.SimpleNamespace(forget=lambda: None, learn=lambda *a: None)

    def agree(arr, name, op):
        seen.append((name, client.closed, int(arr[0])))
        arr[0] = 1  # some rank failed: every rank re-runs

    off.comm = types.SimpleNamespace(_internal_allreduce=agree, _fast={}, size=1)
    return off


def _job(err, n=10, k=4):
    t = threading.Thread(target=lambda: None)
    t.start()
    return {"kind": "allreduce", "k": k, "n": n, "err": err, "t0": 0, "t1": 1, "done": 0,
            "thread": t, "snap": None, "a": np.arange(n, dtype=np.int64)}


def test_a_rank_whose_ina_part_failed_leaves_before_the_agreement():
    client, seen, reruns = _Client(), [], []
    off = _offload(client, seen)
    out = np.zeros(10, np.int64)
    off.finish(_job(RuntimeError("rank 3 not heard")), out, 5, lambda lo, hi: reruns.append((lo, hi)))
    assert seen == [("ina agreement", True, 1)]  # closed before it agreed
    assert reruns == [(4, 10)] and off.client is None and not off.alive
    assert list(out[4:]) == list(range(4, 10))  # the input back where INA left nothing


def test_a_rank_whose_ina_part_went_well_stays_until_the_agreement_says_otherwise():
    client, seen, reruns = _Client(), [], []
    off = _offload(client, seen)
    off.finish(_job(None), np.zeros(10, np.int64), 5, lambda lo, hi: reruns.append((lo, hi)))
    assert seen == [("ina agreement", False, 0)]  # still registered while it agreed
    assert client.closed and off.client is None  # another rank failed: all leave after
