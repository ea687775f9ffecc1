"""Small allreduces whole on the INA rail (NEZHA_INA_SMALL): the route the planner picks
(the same on every rank, from shared inputs only), exact results over every dtype and op
the service does, one datagram up and one down per rank, and the service lost during one:
every rank ends with bitwise the same result."""
import threading

import pytest

from nezha._core import ina as _ina
from nezha.config import Config
from nezha.costmodel import INA_SMALL_BYTES
from nezha.planner import Planner
from tests.test_ina_rail import run_ranks, service  # noqa: F401 - service is a fixture

pytestmark = pytest.mark.timeout(300)
WORKER = "tests/workers/ina_small_rank.py"


def planner(hosts, mode="auto", failover=True, rails=2):
    p = Planner(rails, Config.load({}, environ={}), ranks=len(hosts), nominal=[400.0] * rails)
    p.set_hosts(hosts)
    p.set_failover(failover)
    p.set_offload(1 << 20, mode, 0)
    return p


@pytest.mark.parametrize("hosts,tiny,full", [
    ([0, 1], False, False), ([0, 1, 2, 3], False, False),  # rd: 1, 2 steps against 2 hops
    ([0, 1, 2], True, True), ([0, 1, 2, 3, 4], True, True),  # rd folds: 1 + 2, 2 + 2 steps
    (list(range(8)), True, True), (list(range(16)), True, True),  # 3, 4 steps
    # 4 hosts x 2: rd runs as rd_hosts (shm to the host's first rank, 2 steps between hosts
    # with one payload each, shm back: 128 us at 1432 B), while two ranks share a host's INA
    # link (185 us): as with one rank per host, no INA (session 28, hop-per-host)
    ([0, 0, 1, 1, 2, 2, 3, 3], False, False),
    ([0] * 8, False, False),  # one host: shared memory beats any network hop
])
def test_auto_route_follows_the_cost_model(hosts, tiny, full):
    p = planner(hosts)
    for nbytes in (1, 4):
        assert p.ina_small(nbytes) is tiny, nbytes
    assert p.ina_small(INA_SMALL_BYTES) is full
    assert p.ina_small(0) is False and p.ina_small(INA_SMALL_BYTES + 1) is False
    # not recoverable (no failover): auto keeps them on TCP; on forces, off never
    assert p.ina_small(INA_SMALL_BYTES, recoverable=False) is False
    assert planner(hosts, "on").ina_small(4, recoverable=False) is True
    assert planner(hosts, "off").ina_small(4) is False


def test_route_uses_shared_inputs_only():
    """Learned per-rank state (the split's rates, a bucket's shares) does not move it."""
    p = planner(list(range(8)))
    before = [p.ina_small(n) for n in (4, 64, 1024)]
    p.offload.learn("allreduce", 1 << 20, 10 ** 6, 1 << 20, 10 ** 9)  # INA looked slow
    p.model.record(("allreduce", 1, 20), [1 << 20, 0], [10 ** 6, 0])
    assert [p.ina_small(n) for n in (4, 64, 1024)] == before
    # NEZHA_INA_CHUNK sets the largest small one
    q = Planner(2, Config.load({}, environ={}), ranks=8, nominal=[400.0] * 2)
    q.set_hosts(list(range(8)))
    q.set_failover(True)
    q.set_offload(1 << 20, "auto", 512)
    assert q.ina_small(512) and not q.ina_small(513)


def test_offload_split_in_the_cost_model():
    """The TCP/INA split of large collectives: half each cold, then by agreed rates, the
    INA share at least min_bytes unless TCP alone finishes first (costmodel.OffloadModel)."""
    p = planner(list(range(4)))
    m = p.offload
    assert p.offload_split("allreduce", 1000, 1, 1 << 20) == 500
    m.learn("allreduce", 3 << 20, 10 ** 9, 1 << 20, 10 ** 9)  # TCP 3x the INA rate
    k = p.offload_split("allreduce", 1 << 22, 1, 4)
    assert k == 3 << 20
    # the rates give INA 256 KiB of 1 MiB, under min_bytes; the floor (all of it on INA)
    # takes 1 s against 1/3 s for TCP alone: TCP alone (k = count; session 27)
    assert p.offload_split("allreduce", 1 << 20, 1, 1) == 1 << 20
    m.forget()
    assert p.offload_split("allreduce", 1000, 1, 1 << 20) == 500


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_small_allreduce_on_ina_exact(service, tmp_path, n):
    """NEZHA_INA_SMALL=on: float32, float16, bfloat16, float64, int32, int64 x SUM, MIN, MAX
    (AVG of the floats) x 0, 1, primes, one datagram's worth, in place and not: exact, and
    whole on INA exactly when 1 element .. one datagram (PROD and one element more go to the
    TCP rails, exact too); then large ones split over TCP + INA between small ones, exact;
    every rank took the same route; the service added each rank's datagram of a chunk once
    and sent one result per chunk (counters)."""
    before = service.stats()
    # 5 ranks and the service on 2 cores (CI): a rank can go unheard for 0.15 s (the INA
    # timeout), which fails the rail rightly but leaves fewer offloads than counted below
    res = run_ranks(n, "matrix", service.port, tmp_path, worker=WORKER,
                    extra={"NEZHA_INA_SMALL": "on", "NEZHA_INA_TIMEOUT": "2",
                           "NEZHA_INA_MIN_BYTES": "16k"})  # every large one split
    for r in res:
        assert r["wrong"] == 0, res
    assert len({(r["runs"], r["ina"], r["route"], r["offloads"]) for r in res}) == 1, res
    after = service.stats()
    ina = res[0]["ina"]
    if n == 1:  # one rank: no communicator rail at all
        assert ina == 0
        return
    # the 6 large ones (1 MiB + 3 elements) split over TCP + INA; their chunks on INA are
    # the results beyond the small ones'
    assert ina > 0 and res[0]["offloads"] == 6, res
    results = after["results"] - before["results"]
    assert results > ina
    # every chunk's result took exactly one datagram of each rank (a resend never counted)
    assert after["data_added"] - before["data_added"] == n * results
    assert after["bad_meta"] == before["bad_meta"]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_small_allreduce_fast_path_exact(service, tmp_path, n):
    """The same buffers called again: from the 2nd call on, a small INA allreduce runs on
    the fast path (one C call without the GIL, FastPath._call_ina). Every INA dtype x op x
    0, 1, primes up to 1 KiB (at most one datagram), in place and not, 4 calls each with new
    values: exact; every call of 1 element or more went whole to INA, 3 of each 4 on the
    fast path, alike on every rank; the service added one datagram per rank per result."""
    before = service.stats()
    res = run_ranks(n, "fast", service.port, tmp_path, worker=WORKER,
                    extra={"NEZHA_INA_SMALL": "on"})
    after = service.stats()
    for r in res:
        assert r["wrong"] == 0, res
    assert len({(r["runs"], r["ina"], r["fast_ina"], r["route"]) for r in res}) == 1, res
    # (4 float dtypes x SUM MIN MAX AVG + 2 int x SUM MIN MAX) x 9 sizes > 0 x 2 x 4 calls
    ina = (4 * 4 + 2 * 3) * 9 * 2 * 4
    assert res[0]["ina"] == ina and res[0]["fast_ina"] == ina * 3 // 4, res
    assert after["results"] - before["results"] == ina
    assert after["data_added"] - before["data_added"] == n * ina
    assert after["bad_meta"] == before["bad_meta"]


@pytest.mark.parametrize("n,same", [(2, False), (3, False), (2, True), (3, True)])
def test_lost_and_duplicated_datagrams_never_double_count(service, tmp_path, n, same):
    """Every rank drops every (3+rank)-th datagram, sends every 2nd twice and loses every
    (4+rank)-th result: every small SUM exact, each rank's contribution added once per
    collective (data_added), the duplicates seen and answered or dropped, never added.
    same: the calls reuse 12 pairs of buffers, so most run on the fast path."""
    before = service.stats()
    res = run_ranks(n, "faults", service.port, tmp_path, worker=WORKER,
                    extra={"NEZHA_INA_SMALL": "on", "NEZHA_INA_TIMEOUT": "2",
                           "TEST_SAME_BUF": str(int(same))})
    after = service.stats()
    for r in res:
        assert r["wrong"] == 0 and r["ina"] == r["runs"] == 180, res
        assert r["dropped"] > 0 and r["duplicated"] > 0 and r["results_dropped"] > 0, res
        assert r["retrans"] > 0, res
        assert not same or r["fast"] == 180 - 12, res  # all but each shape's first call
    assert after["data_added"] - before["data_added"] == n * 180
    assert after["results"] - before["results"] == 180
    assert after["dup_pending"] + after["dup_resent"] > before["dup_pending"] + before["dup_resent"]


@pytest.mark.parametrize("n,same", [(3, False), (4, False), (3, True)])
def test_service_dies_during_small_allreduce_all_rerun(service, tmp_path, n, same):
    """The service dies at the first datagram of the 5th small allreduce: no rank has its
    result, every rank re-runs it on the TCP rails from its input; the INA rail is left out
    on every rank alike; integers exact, every rank's results bitwise the same. same: one
    buffer, so the 2nd to 5th run on the fast path (the 5th fails there)."""
    service.die_at(5, 0)
    res = run_ranks(n, "kill", service.port, tmp_path, worker=WORKER,
                    extra={"NEZHA_INA_SMALL": "on", "TEST_ITERS": "12",
                           "TEST_SAME_BUF": str(int(same))})
    for r in res:
        assert r["wrong"] == 0, res
        assert r["small"] == 5 and r["small_failures"] == 1 and not r["alive"], res
        assert not same or r["fast"] >= 4, res
    assert len({r["digest"] for r in res}) == 1, res


@pytest.mark.parametrize("n,same", [(2, False), (3, False), (4, False), (3, True)])
def test_result_sent_to_a_rank_that_has_none(service, tmp_path, n, same):
    """Rank 0 loses the result of the 4th small allreduce (its client drops it), and the
    service dies at the 5th: the other ranks returned from the 4th with it (lazy), rank 0
    gets it from them (broadcast by the first rank that has it), not from a re-run, so all
    hold the same bits; the 5th fails everywhere and is re-run on TCP. same: one buffer
    (the 4th fails on rank 0's fast path; the others keep its result there)."""
    service.die_at(5, 0)
    res = run_ranks(n, "kill", service.port, tmp_path, worker=WORKER,
                    extra={"NEZHA_INA_SMALL": "on", "TEST_ITERS": "10",
                           "RANK0_DROP": "4", "TEST_SAME_BUF": str(int(same))})
    for r in res:
        assert r["wrong"] == 0, res
        assert r["small"] == 5 and not r["alive"], res
        assert not same or r["fast"] >= 3, res
    assert res[0]["small_failures"] == 2, res   # the 4th (no result) and the 5th
    assert all(r["small_failures"] == 1 for r in res[1:]), res
    assert len({r["digest"] for r in res}) == 1, res


@pytest.mark.parametrize("same", [False, True])
def test_without_failover_a_lost_service_is_a_clear_error(service, tmp_path, same):
    """One TCP rail (no failover), NEZHA_INA_SMALL=on: the service dies at the 3rd small
    allreduce; no rank can recover it, so each says so (naming the service) instead of
    hanging or returning something. same: the 2nd and 3rd on the fast path."""
    service.die_at(3, 0)
    res = run_ranks(3, "kill", service.port, tmp_path, worker=WORKER,
                    extra={"NEZHA_INA_SMALL": "on", "TEST_ITERS": "6", "NEZHA_LOOP_RAILS": "1",
                           "TEST_SAME_BUF": str(int(same))})
    for r in res:
        assert r["runs"] == 3 and r["wrong"] == 0, res
        assert "without failover" in r["error"] and f":{service.port}" in r["error"], res
        assert not same or r["fast"] == 2, res  # (fresh buffers may reuse an address)


@pytest.mark.parametrize("same", [False, True])
def test_rail_left_out_by_a_small_allreduce_is_readmitted(tmp_path, same):
    """The service dies at the 5th small allreduce (re-run on TCP, rail left out); a new one
    starts on the same port; small allreduces count toward re-admission, so after
    READMIT_EVERY of them the rail is back and the next small ones run on it again. Every
    result exact, bitwise the same on every rank. same: one buffer; the fast path forgets
    the dead service's client and, re-admitted, runs on the new one."""
    from nezha.rails.ina.offload import READMIT_EVERY
    old = _ina.Server("127.0.0.1", 0, slots=256, quota=64, job_timeout=30.0)
    port = old.port
    old.die_at(5, 0)
    t = threading.Thread(target=old.serve, daemon=True)
    t.start()
    new = []

    def restart():
        t.join(60)  # serve() returns once it died
        old.close()
        srv = _ina.Server("127.0.0.1", port, slots=256, quota=64, job_timeout=30.0)
        nt = threading.Thread(target=srv.serve, daemon=True)
        nt.start()
        new.append((srv, nt))

    iters = 5 + 3 * READMIT_EVERY
    try:
        res = run_ranks(3, "kill", port, tmp_path, worker=WORKER, during=restart,
                        extra={"NEZHA_INA_SMALL": "on", "TEST_ITERS": str(iters),
                               "TEST_PAUSE": "0.01", "TEST_SAME_BUF": str(int(same))})
    finally:
        for srv, nt in new:
            srv.stop()
            nt.join(5)
            srv.close()
    for r in res:
        assert r["wrong"] == 0 and r["alive"], res
        assert r["small_failures"] == 1 and r["small"] > 5, res  # back on INA after re-admission
        # the 2nd to 5th call (the 5th failed there), and after re-admission every call on
        # the new client but its first (no TCP call meanwhile: they count toward it)
        assert not same or r["fast"] == r["small"] - 2, res
    assert len({(r["digest"], r["small"]) for r in res}) == 1, res
