"""The comparison suite's baselines run where they say they run (bench/compare.py).

A misconfigured baseline (Gloo or MPI on the wrong interface, on the unshaped mgmt network,
MPTCP without subflows) would make nezha look good, so every row of the systems table is run
briefly in the session lab (4 hosts x 2 rails, 400mbit) with messages >= 1 MiB, and the per-rail
byte counters must show its bytes on exactly the rails it claims. Counters and exit codes only,
never timings.
"""
import dataclasses
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import compare  # noqa: E402  (bench/ is not a package)

MiB = 1 << 20
# Short runs: two sizes >= 1 MiB so the bytes show up clearly, one timed call or so each.
OPTS = compare.Options(collectives=("allreduce",), min_size=MiB, max_size=2 * MiB, reps=1,
                       time_budget=0.05, run_timeout=240, validate=True, latency_floor=False)
SINGLE = [s.name for s in compare.SYSTEMS if s.rails != "all" and not s.mptcp and s.when == "always"]
MULTI = [s.name for s in compare.SYSTEMS if s.rails == "all" and not s.mptcp and s.when == "multi"]


def _system(name):
    return next(s for s in compare.SYSTEMS if s.name == name)


def _run(lab, system, tmp_path, collective="allreduce"):
    rec = compare.run_system(lab, system, collective, OPTS, str(tmp_path))
    assert rec["returncode"] == 0, "\n".join([rec.get("error", "")] + rec.get("stderr_tail", []))
    assert rec["doc"] and rec["doc"]["results"], rec["stdout"][-2000:]
    assert all(r["validation"] for r in rec["doc"]["results"]), rec["stdout"][-2000:]
    return rec


def _bytes(rec):
    pl = rec["placement"]
    return pl["tx_bytes"], sum(pl["tx_bytes"].values()), pl


# ---------------------------------------------------------------- pure: the checker itself

def test_placement_flags_wrong_rail_and_mgmt():
    exp = 100 * MiB
    ok = compare.placement([0], {"rail0": 120 * MiB, "rail1": 4096}, 10_000, exp)
    assert ok["ok"], ok["why"]
    wrong = compare.placement([0], {"rail0": 4096, "rail1": 120 * MiB}, 10_000, exp)
    assert not wrong["ok"] and any("not claimed" in w for w in wrong["why"])
    mgmt = compare.placement([0], {"rail0": 1 * MiB, "rail1": 0}, 120 * MiB, exp)
    assert not mgmt["ok"] and any("expected" in w for w in mgmt["why"])
    one_of_two = compare.placement([0, 1], {"rail0": 120 * MiB, "rail1": 1024}, 0, exp, largest=64 * MiB)
    assert not one_of_two["ok"]
    # small messages only: a multi-rail system may keep them on one rail
    small = compare.placement([0, 1], {"rail0": 120 * MiB, "rail1": 1024}, 0, exp, largest=64 << 10)
    assert small["ok"], small["why"]


def test_the_suite_names_the_tree_it_ran(monkeypatch, tmp_path):
    """`cd B && PYTHONPATH=A python -m nezha bench compare` runs B (python -m puts the current
    directory first): the document records the tree every worker ran and says so."""
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    tree = compare.code_tree()
    assert tree["path"] == compare.ROOT and tree["shadowed"] == str(tmp_path)
    assert "NOT the PYTHONPATH's" in compare._tree_text(tree)
    monkeypatch.setenv("PYTHONPATH", compare.ROOT + os.pathsep + str(tmp_path))
    tree = compare.code_tree()
    assert tree["shadowed"] is None and compare.ROOT in compare._tree_text(tree)
    assert "NOT" not in compare._tree_text(tree)


def test_systems_table_is_complete():
    names = {s.name for s in compare.SYSTEMS}
    for want in ("nezha-rail0", "nezha-rail1", "nezha-all", "gloo-rail0", "gloo-all", "mpi-rail0",
                 "mpi-rail0-ring", "mpi-all", "mpi-all-ring", "mpi-all-tuned", "gloo-mptcp"):
        assert want in names
    assert compare.REFERENCE in names


def test_ina_row_only_in_an_ina_lab_with_tcp_on_the_other_rails(tmp_path):
    """nezha-ina exists only where the lab runs an INA service (--ina RAIL) and is given the
    rails without the service as its TCP rails; the other rows stay."""
    import types
    spec = types.SimpleNamespace(rates=[400e6, 400e6], ina=())
    lab = types.SimpleNamespace(rails=2, hosts=4, spec=spec)
    assert "nezha-ina" not in [s.name for s in compare.select_systems(lab)]
    spec.ina = [1]
    names = [s.name for s in compare.select_systems(lab)]
    assert "nezha-ina" in names and "nezha-all" in names and "gloo-mptcp" in names
    _, env, _ = compare.worker_cmd(_system("nezha-ina"), "allreduce", lab, OPTS,
                                   str(tmp_path / "x.json"))
    assert env["NEZHA_SOCKET_IFNAME"] == "rail0" and env["NEZHA_RAILS"] == "tcp,shm,ina"
    _, env, _ = compare.worker_cmd(_system("nezha-all"), "allreduce", lab, OPTS,
                                   str(tmp_path / "y.json"))
    assert env["NEZHA_SOCKET_IFNAME"] == "rail0,rail1" and "NEZHA_RAILS" not in env


# ---------------------------------------------------------------- lab: every baseline

@pytest.mark.lab
@pytest.mark.parametrize("name", SINGLE)
def test_single_rail_system_stays_on_its_rail(lab, tmp_path, name):
    s = _system(name)
    rec = _run(lab, s, tmp_path)
    per, total, pl = _bytes(rec)
    mine = s.rails
    other = [r for r in per if r != mine]
    assert per[mine] >= pl["expected_min_bytes"] * 0.5 > 0, pl      # the data crossed its rail
    for r in other:                                                    # and nothing else
        assert per[r] <= max(MiB, 0.01 * total), (name, per)
    assert pl["ok"], pl["why"]
    # MPI's own rail is the BTL's; everyone else keeps MPI on mgmt
    if s.backend == "mpi":
        assert ["btl_tcp_if_include", mine] in rec["mca"]
    else:
        assert not any(k == "btl_tcp_if_include" for k, _ in rec["mca"])


@pytest.mark.lab
@pytest.mark.parametrize("name", MULTI)
def test_multi_rail_system_uses_every_rail(lab, tmp_path, name):
    s = _system(name)
    rec = _run(lab, s, tmp_path)
    per, total, pl = _bytes(rec)
    assert total >= pl["expected_min_bytes"] * 0.5 > 0, pl
    for r in ("rail0", "rail1"):   # equal rails: each carries a substantial share
        assert per[r] >= 0.25 * total, (name, per)
    assert pl["ok"], pl["why"]
    # every backend's ranks are charged CPU for their timed calls (bench/_cpu.py)
    assert all(r["cpu_s_per_gb"] > 0 and r["cpu_user_s"] + r["cpu_sys_s"] > 0
               for r in rec["doc"]["results"]), rec["doc"]["results"]


@pytest.mark.lab
def test_zero_copy_row_uses_every_rail_and_engages(lab, tmp_path):
    """nezha-all-zc (only when named): exact (OSU -c), on both rails, and its ranks handed
    sends to the kernel without a copy, none left in flight (over veth the kernel may still
    copy at delivery: counted, not asserted)."""
    rec = _run(lab, _system("nezha-all-zc"), tmp_path)
    per, total, pl = _bytes(rec)
    assert pl["ok"], pl["why"]
    assert rec["env"]["NEZHA_ZEROCOPY"] == "on"
    z = rec["doc"]["stats"]["zerocopy"]
    assert z["sends"] > 0 and z["in_flight"] == 0 and 0 <= z["copied"] <= z["sends"], z


@pytest.mark.lab
def test_lab_check_measures_every_stream(lab):
    """The raw TCP ring check: one stream per host and rail, each with a goodput."""
    opts = dataclasses.replace(OPTS, lab_check_seconds=1.0)
    rec = compare.run_lab_check(lab, opts)
    assert "error" not in rec, rec["error"]
    assert len(rec["pct"]) == lab.hosts * lab.rails and all(p > 0 for p in rec["pct"])
    assert set(rec["rail_min_pct"]) == {"rail0", "rail1"}
    assert compare.lab_reach([rec])["min_pct"] == rec["min_pct"]


@pytest.mark.lab
def test_gloo_over_mptcp_uses_both_rails_and_cleans_up(lab, tmp_path):
    s = _system("gloo-mptcp")
    assert os.path.exists(compare.ensure_shim())
    mp = compare.Mptcp(lab)
    before = mp.endpoints()
    with mp:
        eps = mp.endpoints()
        assert all("dev rail1" in eps[h] and "signal" in eps[h] and "port" in eps[h]
                   for h in range(lab.hosts)), eps
        rec = _run(lab, s, tmp_path)
    assert mp.endpoints() == before            # ours and the kernel's implicit ones are gone
    assert "LD_PRELOAD=" + compare.SHIM_LIB in rec["argv"]
    assert "--gloo-ifname" in rec["argv"] and rec["argv"][rec["argv"].index("--gloo-ifname") + 1] == "rail0"
    per, total, pl = _bytes(rec)
    # Gloo was only given rail0: every byte on rail1 went through an MPTCP subflow
    for r in ("rail0", "rail1"):
        assert per[r] >= 0.2 * total, per
    joins = rec["mptcp_counters"].get("MPJoinAckRx", 0) + rec["mptcp_counters"].get("MPJoinSynAckRx", 0)
    assert joins > 0, rec["mptcp_counters"]
    assert pl["ok"], pl["why"]


@pytest.mark.lab
def test_misconfigured_baselines_are_caught(lab, tmp_path):
    # claims rail0, really on rail1
    wrong = dataclasses.replace(_system("mpi-rail0"), name="mpi-wrong",
                                mca=(("btl_tcp_if_include", "rail1"),))
    rec = compare.run_system(lab, wrong, "allreduce", OPTS, str(tmp_path))
    assert rec["returncode"] == 0
    assert not rec["placement"]["ok"]
    assert any("not claimed" in w for w in rec["placement"]["why"]), rec["placement"]
    # claims rail0, really on the unshaped mgmt network (the LAB.md trap)
    mgmt = dataclasses.replace(_system("mpi-rail0"), name="mpi-mgmt",
                               mca=(("btl_tcp_if_include", "mgmt"),))
    rec = compare.run_system(lab, mgmt, "allreduce", OPTS, str(tmp_path))
    assert rec["returncode"] == 0
    assert not rec["placement"]["ok"]
    assert rec["placement"]["mgmt_tx_bytes"] > rec["placement"]["expected_min_bytes"] * 0.5


@pytest.mark.lab
def test_latency_floor_runs_on_rail0(lab, tmp_path):
    rec = compare.run_latency_floor(lab, OPTS, str(tmp_path))
    assert rec["returncode"] == 0, rec.get("error")
    b, a = rec["counters_before"]["rails"], rec["counters_after"]["rails"]
    tx = {(h, r): a[h][r][0] - b[h][r][0] for h in a for r in a[h]}
    assert tx[("h0", "rail0")] > 100_000 and tx[("h1", "rail0")] > 100_000, tx
    assert tx[("h0", "rail1")] < 100_000 and tx[("h2", "rail0")] < 100_000, tx
    assert compare.floor_us([rec]) > 0
