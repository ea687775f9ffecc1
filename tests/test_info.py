"""`python -m nezha info` in a subprocess: every setting, interfaces, and no crash on bad input."""
import json
import os
import subprocess
import sys

from nezha.config import PARAMS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_info(*args, **env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NEZHA_")}
    clean.update(PYTHONPATH=ROOT, **env)
    p = subprocess.run([sys.executable, "-m", "nezha", "info", *args], env=clean, cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p


def test_text_lists_every_setting_and_interfaces():
    out = run_info(NEZHA_SEGMENT_SIZE="512k").stdout
    assert out.startswith("nezha ")
    for name in PARAMS:
        assert f"NEZHA_{name} " in out, name
    seg = next(ln for ln in out.splitlines() if "NEZHA_SEGMENT_SIZE " in ln)
    assert seg.split() == ["NEZHA_SEGMENT_SIZE", "512k", "environment"]
    assert "127.0.0.1/8" in out and "tcp rails (NEZHA_SOCKET_IFNAME unset):" in out
    assert "headers" in out and os.path.join(ROOT, "include") in out


def test_json_has_the_same_content():
    d = json.loads(run_info("--json", NEZHA_SOCKET_IFNAME="=lo").stdout)
    assert [s["name"] for s in d["settings"]] == ["NEZHA_" + n for n in PARAMS]
    assert d["build"]["kind"] in ("compiled", "not built")
    assert (d["build"]["error"] is None) == (d["build"]["kind"] == "compiled")
    assert "lo" in [i["name"] for i in d["interfaces"]]
    assert d["rails"] == {"spec": "=lo", "tcp_allowed": True, "selected": ["lo"], "error": None}
    assert d["numpy"] and d["python"] and d["nezha"]


def test_bad_interface_spec_is_reported_not_raised():
    p = run_info(NEZHA_SOCKET_IFNAME="doesnotexist0")
    assert ("tcp rails: error: NEZHA_SOCKET_IFNAME=doesnotexist0: no interface matches "
            "'doesnotexist0'; interfaces here: lo (127.0.0.1/8, up)") in p.stdout
    d = json.loads(run_info("--json", NEZHA_SOCKET_IFNAME="doesnotexist0").stdout)
    assert d["rails"]["selected"] == [] and "doesnotexist0" in d["rails"]["error"]


def test_bad_values_and_secrets():
    p = run_info("--json", NEZHA_TIMEOUT="soon", NEZHA_JOB_SECRET="c0ffee" * 6,
                 NEZHA_MAX_RAIL="2")
    d = json.loads(p.stdout)
    timeout = next(s for s in d["settings"] if s["name"] == "NEZHA_TIMEOUT")
    assert timeout["value"] == "soon" and "not a number" in timeout["error"]
    assert "c0ffee" not in p.stdout and "c0ffee" not in p.stderr
    assert "NEZHA_MAX_RAIL in the environment is ignored (did you mean NEZHA_MAX_RAILS?)" \
        in p.stderr


def test_outside_a_job_says_what_a_job_leaves_out_as_management():
    """Alone, info cannot know the bootstrap's address (issue 15): it says which network a
    job would drop; with MASTER_ADDR on a subnet here, no such caveat."""
    blank = {k: "" for k in os.environ if k == "MASTER_ADDR" or k.startswith("PMIX_SERVER_URI")}
    out = run_info(**blank).stdout
    assert "outside a job: in one, the network holding the bootstrap's address" in out
    out = run_info(**dict(blank, MASTER_ADDR="127.0.0.1")).stdout
    assert "outside a job" not in out
