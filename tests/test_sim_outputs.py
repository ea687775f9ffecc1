"""`nezha sim run` writes what issue 16 asks for: a table, CSV and JSON with the same rows
(one per algorithm, scheme and size), and PNG plots (completion time by scheme and size, the
uplinks' load as a heat map)."""
import csv
import json

import pytest

from nezha.sim import cli


def test_csv_json_and_plots(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plots"
    assert cli.main(["run", "--fabric", "leafspine", "--leaves", "2", "--spines", "2",
                     "--hosts-per-leaf", "2", "--algo", "ring,alltoall",
                     "--scheme", "ecmp,ethereal", "--sizes", "64K,1M",
                     "--csv", str(tmp_path / "r.csv"), "--json", str(tmp_path / "r.json"),
                     "--plot", str(out)]) == 0
    table = [ln.split() for ln in capsys.readouterr().out.splitlines()
             if ln.split()[:1] in (["ring"], ["alltoall"])]
    with open(tmp_path / "r.csv") as f:
        rows = list(csv.DictReader(f))
    doc = json.load(open(tmp_path / "r.json"))
    want = {(a, s, n) for a in ("ring", "alltoall") for s in ("ecmp", "ethereal")
            for n in (65536, 1048576)}
    assert {(r["algo"], r["scheme"], int(r["nbytes"])) for r in rows} == want
    assert len(rows) == len(doc["rows"]) == len(table) == len(want)
    for r, j in zip(rows, doc["rows"]):
        assert float(r["time_us"]) == pytest.approx(j["time_us"]) and j["time_us"] > 0
    # the table prints the same times (to 0.1 us)
    assert [float(t[3]) for t in table] == [round(j["time_us"], 1) for j in doc["rows"]]
    for name in ("time_by_scheme.png", "uplink_load.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
