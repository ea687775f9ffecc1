"""Where the job secret comes from: NEZHA_JOB_SECRET, NEZHA_JOB_SECRET_FILE (owner-only),
a fresh one per lab job, and the warning when torchrun gives none (docs/security.md)."""
import os
import subprocess
import sys
import types

import pytest

from nezha.bootstrap import env as boot_env
from nezha.bootstrap.base import job_secret_from_env
from nezha.errors import InvalidUsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def clean(monkeypatch):
    monkeypatch.delenv("NEZHA_JOB_SECRET", raising=False)
    monkeypatch.delenv("NEZHA_JOB_SECRET_FILE", raising=False)
    return monkeypatch


def test_secret_from_file(clean, tmp_path):
    f = tmp_path / "secret"
    f.write_text("0a1b" * 8 + "\n")
    f.chmod(0o600)
    clean.setenv("NEZHA_JOB_SECRET_FILE", str(f))
    assert job_secret_from_env() == bytes.fromhex("0a1b" * 8)
    clean.setenv("NEZHA_JOB_SECRET", "ff" * 4)  # the environment wins
    assert job_secret_from_env() == b"\xff" * 4


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_secret_file_others_can_read_is_refused(clean, tmp_path, mode):
    f = tmp_path / "secret"
    f.write_text("ab" * 16)
    f.chmod(mode)
    clean.setenv("NEZHA_JOB_SECRET_FILE", str(f))
    with pytest.raises(InvalidUsageError, match="refused, others could read the secret"):
        job_secret_from_env()


def test_secret_file_missing_or_not_hex(clean, tmp_path):
    clean.setenv("NEZHA_JOB_SECRET_FILE", str(tmp_path / "nope"))
    with pytest.raises(InvalidUsageError, match="cannot open it"):
        job_secret_from_env()
    f = tmp_path / "secret"
    f.write_text("not hex")
    f.chmod(0o400)
    clean.setenv("NEZHA_JOB_SECRET_FILE", str(f))
    with pytest.raises(InvalidUsageError, match="must be hex digits"):
        job_secret_from_env()


def test_secret_file_symlink_refused(clean, tmp_path):
    f = tmp_path / "secret"
    f.write_text("ab" * 16)
    f.chmod(0o600)
    (tmp_path / "link").symlink_to(f)
    clean.setenv("NEZHA_JOB_SECRET_FILE", str(tmp_path / "link"))
    with pytest.raises(InvalidUsageError, match="cannot open it"):
        job_secret_from_env()


def test_torchrun_without_secret_warns_once():
    """A derived secret is said plainly, at WARN, once per process; with one given, silence."""
    code = ("from nezha.bootstrap.env import _warn_derived_secret as w; w(); w()")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEZHA_")}
    env["PYTHONPATH"] = ROOT
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    lines = [ln for ln in p.stderr.splitlines() if "no job secret from the launcher" in ln]
    assert len(lines) == 1 and "NEZHA WARN BOOT" in lines[0] and "not attackers" in lines[0]


def test_torchrun_derived_secret_used_only_without_one(clean):
    clean.setenv("RANK", "0")
    clean.setenv("WORLD_SIZE", "1")
    clean.setenv("MASTER_ADDR", "127.0.0.1")
    clean.setenv("MASTER_PORT", "29999")
    called = []
    clean.setattr(boot_env, "_warn_derived_secret", lambda: called.append(1))
    clean.setattr(boot_env.EnvBootstrap, "__init__", lambda self, *a: setattr(self, "a", a))
    derived = boot_env.EnvBootstrap.from_environ().a[4]
    assert called == [1] and len(derived) == 32
    clean.setenv("NEZHA_JOB_SECRET", "12" * 16)
    assert boot_env.EnvBootstrap.from_environ().a[4] == b"\x12" * 16 and called == [1]


def test_lab_jobs_get_a_fresh_secret(clean):
    from nezha.lab.launch import job_env

    class Lab:
        ifnames, name = ["rail0"], "t"
        spec = types.SimpleNamespace(ina=())  # no INA service in this lab
    a, b = job_env(Lab()), job_env(Lab())
    assert len(a["NEZHA_JOB_SECRET"]) == 64 and a["NEZHA_JOB_SECRET"] != b["NEZHA_JOB_SECRET"]
    given = job_env(Lab(), {"NEZHA_JOB_SECRET": "cd" * 16})
    assert given["NEZHA_JOB_SECRET"] == "cd" * 16


def test_stranger_with_the_rendezvous_but_not_the_secret_file_is_rejected(tmp_path):
    """Ranks 0 and 2 read the job's secret from a file; rank 1 knows MASTER_ADDR/MASTER_PORT
    but holds another secret: it is refused, and no rank runs a collective with it."""
    from tests.spawn import spawn
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text("5a" * 32)
    bad.write_text("a5" * 32)
    for f in (good, bad):
        f.chmod(0o600)
    results = spawn(3, "ok", env={"NEZHA_CONNECT_TIMEOUT": "4", "NEZHA_JOB_SECRET": "",
                                  "NEZHA_JOB_SECRET_FILE": str(good)},
                    rank_env={1: {"NEZHA_JOB_SECRET_FILE": str(bad)}})
    for rc, res, out in results:
        assert res and res["stage"] == "init" and res["error"] in (
            "AuthenticationError", "NezhaTimeout", "PeerError"), out
    assert any(res["error"] == "AuthenticationError" for _, res, _ in results)


def test_torch_store_without_secret_warns_too(clean, monkeypatch):
    """The torch backend's bootstrap (a store anyone reaching MASTER_PORT can read) shares a
    secret through the store when none is given: said at WARN, once, like the derived one."""
    from nezha.bootstrap import store as boot_store

    class Store:  # the part of torch.distributed.Store it uses
        def __init__(self):
            self.d = {}

        def set(self, k, v):
            self.d[k] = v.encode() if isinstance(v, str) else v

        def get(self, k):
            return self.d[k]

        def wait(self, keys, timeout):
            assert all(k in self.d for k in keys)

    said = []
    monkeypatch.setattr(boot_env, "_warned", False)
    monkeypatch.setattr(boot_env.log, "warn", lambda cat, msg: said.append((cat, msg)))
    b = boot_store.StoreBootstrap(Store(), 0, 1)
    assert len(b.secret) == 32
    assert len(said) == 1 and "torch store" in said[0][1] and "not attackers" in said[0][1]
    said.clear()
    clean.setenv("NEZHA_JOB_SECRET", "ab" * 16)
    assert boot_store.StoreBootstrap(Store(), 0, 1).secret == b"\xab" * 16 and not said
