"""The soak (bench/soak.py) in short: random collectives, every result checked against numpy,
while rails are cut (down, blackhole), one flaps and one is slowed. About 40 s of injection in
its own lab (unique name, torn down even on failure). Asserts correctness only, never times."""
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = [pytest.mark.lab, pytest.mark.slow]


def _soak_module():
    spec = importlib.util.spec_from_file_location("nezha_bench_soak",
                                                  os.path.join(ROOT, "bench", "soak.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_soak_short(lab_factory, tmp_path):
    soak = _soak_module()
    # 2 ranks per host: shared memory inside a host, tcp over both rails between hosts
    lab = lab_factory(hosts=4, rails=2, rates="400mbit", ranks_per_host=2)
    s = soak.soak(lab, minutes=0.6, seed=int(os.environ.get("TEST_SOAK_SEED", "18")),
                  max_bytes=1 << 20, hang_s=60.0, tmp=str(tmp_path), log=lambda m: None)
    # which collectives were wrong, where and how (rank, index, what, details)
    report = (soak.table(s) + "\nwrong: " + json.dumps(s.get("wrong_list"))[:4000] + "\n"
              + s.get("output_tail", ""))
    assert s["wrong"] == 0, report
    assert not s["hangs"], report
    assert not s["errors"] and s["returncode"] == 0, report
    kinds = s["by_kind"]
    assert {"cut", "flap", "slow"} <= set(kinds), report  # every kind of trouble happened
    assert s["failures"] >= 5 and s["survived"] == s["failures"], report
    assert s["collectives"] > 50, report
