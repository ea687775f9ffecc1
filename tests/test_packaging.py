"""Packaging (issue 18): what an installed nezha carries. The full check, a fresh venv with
`pip install .` and a wheel, is `make package-check` (a few minutes: it compiles the engine)."""
import os
import subprocess
import sys

import pytest

import nezha

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADERS = sorted(f for f in os.listdir(os.path.join(ROOT, "include", "nezha")) if f.endswith(".h"))


def test_get_include_exists_here():
    inc = nezha.get_include()
    assert inc and os.path.isfile(os.path.join(inc, "nezha", "nezha_types.h")), inc


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """setup.py build_py (pure Python, no compiling) into a temporary folder: what a wheel
    holds besides the extensions."""
    out = tmp_path_factory.mktemp("build_py")
    env = dict(os.environ, NEZHA_SETUP_PY_ONLY="1")
    got = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stdout + got.stderr
    return out


def test_build_ships_the_headers(built):
    shipped = sorted(os.listdir(built / "nezha" / "include" / "nezha"))
    assert shipped == HEADERS


def test_installed_layout_reports_existing_paths(built):
    """From the built package alone (no source tree beside it), get_include() is the shipped
    folder (`nezha info` shows it: test_info_headers_path_exists)."""
    env = dict(os.environ, PYTHONPATH=str(built))
    code = "import nezha, json; print(json.dumps(nezha.get_include()))"
    got = subprocess.run([sys.executable, "-c", code], cwd=str(built), env=env,
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    inc = got.stdout.strip().strip('"')
    assert inc == str(built / "nezha" / "include")
    assert os.path.isfile(os.path.join(inc, "nezha", "nezha_types.h"))


def test_bench_commands_say_what_they_need(monkeypatch, tmp_path):
    from nezha import benchcli
    monkeypatch.setattr(benchcli, "ROOT", str(tmp_path))  # as installed: no bench/ beside it
    with pytest.raises(SystemExit) as e:
        benchcli.need_bench("nezha bench compare", "compare.py")
    assert "source tree" in str(e.value) and "compare.py" in str(e.value)


def test_info_headers_path_exists():
    got = subprocess.run([sys.executable, "-m", "nezha", "info"], cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
                         timeout=60)
    assert got.returncode == 0, got.stderr
    line = next(ln for ln in got.stdout.splitlines() if ln.strip().startswith("headers"))
    path = line.split(None, 1)[1]
    assert os.path.isdir(path), line


def _setup_namespace(monkeypatch):
    """setup.py's functions without running setup() (it is replaced by a no-op)."""
    import setuptools
    monkeypatch.setattr(setuptools, "setup", lambda **kw: None)
    monkeypatch.setenv("NEZHA_SETUP_PY_ONLY", "1")
    path = os.path.join(ROOT, "setup.py")
    ns = {"__name__": "nezha_setup_under_test", "__file__": path}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), ns)
    return ns


def test_hwloc_is_optional_at_build_time(monkeypatch, capsys):
    """Without hwloc's headers (no pkg-config entry, no /usr/include/hwloc.h) the build
    leaves nezha._core.hwloc out and says so, instead of failing (issue 15)."""
    ns = _setup_namespace(monkeypatch)
    monkeypatch.setattr(ns["shutil"], "which", lambda name, *a, **k: None)
    real = os.path.exists
    monkeypatch.setattr(ns["os"].path, "exists",
                        lambda p: False if p == "/usr/include/hwloc.h" else real(p))
    assert ns["hwloc_flags"]() is None
    ns["cythonize"] = lambda exts, **kw: list(exts)   # names only: nothing is compiled
    names = [e.name for e in ns["extensions"]()]
    assert "nezha._core.hwloc" not in names and "nezha._core.engine" in names
    assert "building without nezha._core.hwloc" in capsys.readouterr().err
