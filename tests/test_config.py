"""The NEZHA_* table: grammar, precedence chain, errors, warnings, logging, docs/env.md."""
import math
import os
import re

import pytest

from nezha import config, log
from nezha.config import PARAMS, Config
from nezha.errors import InvalidUsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def env(tmp_path, monkeypatch):
    """An environment without NEZHA_* variables whose ~ and /etc hold no nezha.conf."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setattr(config, "SYSTEM_CONF", str(tmp_path / "etc-nezha.conf"))
    monkeypatch.setattr(config, "_REPORTED", set())
    # Log at WARN to stderr whatever the developer's own NEZHA_DEBUG* say.
    log.configure(Config._read(environ={"HOME": str(home)}))
    yield {"HOME": str(home)}
    log.set_rank(None)
    log.configure()


def parse(name, text):
    return PARAMS[name].parse(text)


def test_table_is_complete_and_defaults_parse():
    for name in ["DEBUG", "DEBUG_SUBSYS", "DEBUG_FILE", "SOCKET_IFNAME", "SOCKET_NCONNS",
                 "SOCKET_BUFFER", "RAILS", "MAX_RAILS", "MIN_RAIL_PIECE", "RAIL_MAX_RATIO",
                 "ALGO", "SEGMENT_SIZE", "SMALL_MSG_THRESHOLD", "TIMEOUT", "CONNECT_TIMEOUT",
                 "JOB_SECRET", "PORT_RANGE", "CONF_FILE",
                 "SPIN_US"]:
        assert name in PARAMS, name
    for p in PARAMS.values():
        assert p.help.strip() and p.type in ("str", "int", "float", "bool", "size", "list",
                                             "enum", "range"), p.name
        p.parse(p.default)   # raises if a default breaks its own grammar


def test_defaults(env):
    cfg = Config.load(environ=env)
    assert cfg["DEBUG"] == "WARN"
    assert cfg["SEGMENT_SIZE"] == 256 * 1024
    assert cfg["MIN_RAIL_PIECE"] is None  # auto: by the host layout (planner.set_hosts)
    assert cfg["SMALL_MSG_THRESHOLD"] is None  # auto: the cost model chooses
    assert cfg["SOCKET_BUFFER"] == 4 << 20
    assert cfg["RAILS"] == ("tcp", "shm")
    assert cfg["MAX_RAILS"] == 4 and cfg["SOCKET_NCONNS"] == 1
    assert cfg["RAIL_MAX_RATIO"] == 8.0 and cfg["TIMEOUT"] == 60.0
    assert cfg["ALGO"] == "auto" and cfg["PORT_RANGE"] is None and cfg["SPIN_US"] == 200
    assert cfg["NEZHA_ALGO"] == "auto"   # the prefix is optional
    assert {cfg.source(n) for n in PARAMS} == {"default"}
    assert [n for n, _ in cfg.items()] == list(PARAMS)


@pytest.mark.parametrize("text,value", [
    ("0", 0), ("1024", 1024), ("64k", 65536), ("64K", 65536), ("64KiB", 65536), ("64kb", 65536),
    ("4M", 4 << 20), ("1G", 1 << 30), ("1.5k", 1536), ("512b", 512), (" 2M ", 2 << 20),
    ("inf", math.inf), ("INF", math.inf), ("auto", 256 * 1024),
])
def test_sizes(text, value):
    assert parse("SEGMENT_SIZE", text) == value


@pytest.mark.parametrize("text", ["12q", "-1", "k", "1e3", "4 MB extra", "0x10"])
def test_bad_sizes(text):
    with pytest.raises(ValueError):
        parse("SEGMENT_SIZE", text)


@pytest.mark.parametrize("text,value", [
    ("y", True), ("yes", True), ("1", True), ("true", True), ("TRUE", True), ("Y", True),
    ("n", False), ("no", False), ("0", False), ("false", False), ("No", False),
])
def test_bools(text, value):
    assert parse("BUILD_DEBUG", text) is value


def test_lists_and_enums():
    every = ("INIT", "BOOT", "RAIL", "COLL", "PLAN", "HEALTH", "ENV", "TOPO")
    assert parse("DEBUG_SUBSYS", "init, env") == ("INIT", "ENV")
    assert parse("DEBUG_SUBSYS", "ALL") == every
    assert parse("DEBUG_SUBSYS", "^COLL,PLAN") == ("INIT", "BOOT", "RAIL", "HEALTH", "ENV", "TOPO")
    assert parse("RAILS", "shm,tcp,shm") == ("shm", "tcp")   # order kept, repeats dropped
    assert parse("RAILS", "all") == ("tcp", "shm", "ina", "rdma")
    assert parse("RAILS", "^ina") == ("tcp", "shm", "rdma")
    assert parse("ALGO", "RING") == "ring" and parse("ALGO", "rd") == "rd"
    assert parse("DEBUG", "info") == "INFO"
    assert parse("PORT_RANGE", "50000-50100") == (50000, 50100)
    assert parse("TIMEOUT", "inf") == math.inf and parse("TIMEOUT", "0.5") == 0.5


@pytest.mark.parametrize("name,text,allowed", [
    ("SEGMENT_SIZE", "12q", "k/M/G"),
    ("BUILD_DEBUG", "maybe", "yes/no"),
    ("ALGO", "tree", "auto, ring, rd"),
    ("RAILS", "tcp,foo", "tcp, shm, loop, ina, rdma"),
    ("DEBUG_SUBSYS", "INIT,NET", "INIT, BOOT"),
    ("MAX_RAILS", "0", ">= 1"),
    ("SOCKET_NCONNS", "two", "integer"),
    ("TIMEOUT", "0", "> 0"),
    ("RAIL_MAX_RATIO", "nan", "number"),
    ("PORT_RANGE", "100-10", "lo-hi"),
    ("SOCKET_IFNAME", "eth0:http", "prefixes"),
])
def test_bad_value_names_variable_value_and_allowed(env, name, text, allowed):
    with pytest.raises(InvalidUsageError) as e:
        Config.load(environ=dict(env, **{"NEZHA_" + name: text}))
    msg = str(e.value)
    assert f"NEZHA_{name}={text!r}" in msg and "set by environment" in msg and allowed in msg


def test_bad_secret_is_not_echoed(env):
    with pytest.raises(InvalidUsageError) as e:
        Config.load(environ=dict(env, NEZHA_JOB_SECRET="zz-my-password"))
    assert "NEZHA_JOB_SECRET" in str(e.value) and "my-password" not in str(e.value)
    cfg = Config.load(environ=dict(env, NEZHA_JOB_SECRET="00ff" * 8))
    assert cfg["JOB_SECRET"] == "00ff" * 8 and "00ff" not in cfg.display("JOB_SECRET")


def test_not_strict_keeps_going(env):
    cfg = Config.load(environ=dict(env, NEZHA_TIMEOUT="soon", NEZHA_ALGO="ring"), strict=False)
    assert cfg["TIMEOUT"] == 60.0 and cfg["ALGO"] == "ring"
    assert list(cfg.errors) == ["TIMEOUT"] and "'soon'" in cfg.errors["TIMEOUT"]
    assert cfg.raw("TIMEOUT") == "soon" and cfg.source("TIMEOUT") == "environment"


def test_precedence_chain(env, tmp_path, monkeypatch):
    names = ["SEGMENT_SIZE", "MAX_RAILS", "ALGO", "TIMEOUT", "SOCKET_NCONNS"]
    system = tmp_path / "etc-nezha.conf"
    user = tmp_path / "home" / ".nezha.conf"
    conf = tmp_path / "job.conf"
    system.write_text("SEGMENT_SIZE=1M\nMAX_RAILS=2\nALGO=ring\nTIMEOUT=5\nSOCKET_NCONNS=2\n")
    user.write_text("MAX_RAILS=3\nALGO=rd\nTIMEOUT=6\nSOCKET_NCONNS=3\n")
    conf.write_text("NEZHA_ALGO=ring\nNEZHA_TIMEOUT=7\nNEZHA_SOCKET_NCONNS=4\n")
    environ = dict(env, NEZHA_CONF_FILE=str(conf), NEZHA_TIMEOUT="8", NEZHA_SOCKET_NCONNS="5")
    cfg = Config.load({"SOCKET_NCONNS": 6}, environ=environ)
    assert [cfg[n] for n in names] == [1 << 20, 3, "ring", 8.0, 6]
    assert [cfg.source(n) for n in names] == [
        f"file {system}", f"file {user}", f"file {conf}", "environment", "argument"]
    assert cfg.source("CONF_FILE") == "environment" and cfg.source("DEBUG") == "default"
    # The conf file can also come from the program, and then the environment's is not read.
    other = tmp_path / "other.conf"
    other.write_text("ALGO=rd\n")
    cfg = Config.load({"CONF_FILE": str(other)}, environ=environ)
    assert cfg["ALGO"] == "rd" and cfg.source("ALGO") == f"file {other}"


def test_conf_file_syntax(env, tmp_path):
    conf = tmp_path / "x.conf"
    conf.write_text("# a comment\n\n  NEZHA_MAX_RAILS = 2  \nexport ALGO=rd  # inline comment\n"
                    "DEBUG_FILE='/tmp/a b.log'\nSEGMENT_SIZE=\n")
    cfg = Config.load(environ=dict(env, NEZHA_CONF_FILE=str(conf)))
    assert cfg["MAX_RAILS"] == 2 and cfg["ALGO"] == "rd" and cfg["DEBUG_FILE"] == "/tmp/a b.log"
    assert cfg.source("SEGMENT_SIZE") == "default"   # empty value = not set


def test_conf_file_errors(env, tmp_path):
    conf = tmp_path / "x.conf"
    conf.write_text("MAX_RAILS=2\nthis line has no equals sign\n")
    with pytest.raises(InvalidUsageError, match=re.escape(f"{conf}:2: expected NAME=value")):
        Config.load(environ=dict(env, NEZHA_CONF_FILE=str(conf)))
    conf.write_text("SEGMENT_SIZE=huge\n")
    with pytest.raises(InvalidUsageError, match=re.escape(f"set by file {conf}")):
        Config.load(environ=dict(env, NEZHA_CONF_FILE=str(conf)))
    with pytest.raises(InvalidUsageError, match="NEZHA_CONF_FILE=.*missing.conf"):
        Config.load(environ=dict(env, NEZHA_CONF_FILE=str(tmp_path / "missing.conf")))


def test_overrides(env):
    cfg = Config.load({"SEGMENT_SIZE": "512k", "NEZHA_BUILD_DEBUG": True, "RAILS": ["tcp", "shm"],
                       "TIMEOUT": None}, environ=dict(env, NEZHA_SEGMENT_SIZE="1M"))
    assert cfg["SEGMENT_SIZE"] == 512 * 1024 and cfg.source("SEGMENT_SIZE") == "argument"
    assert cfg["BUILD_DEBUG"] is True and cfg["RAILS"] == ("tcp", "shm")
    assert cfg.source("TIMEOUT") == "default"
    # A typo in the program's own dict is the program's bug: an error, not a warning.
    with pytest.raises(InvalidUsageError, match="SEGMENT_SIZ.*did you mean SEGMENT_SIZE"):
        Config.load({"SEGMENT_SIZ": "1M"}, environ=env)
    with pytest.raises(KeyError):
        cfg["NO_SUCH_THING"]


def test_unknown_variables_warn_once_with_suggestion(env, tmp_path, capsys):
    conf = tmp_path / "x.conf"
    conf.write_text("SOCKET_IFNAM=eth0\n")
    environ = dict(env, NEZHA_SEGMNT_SIZE="1M", NEZHA_ZZZZZZ="1", NEZHA_CONF_FILE=str(conf))
    cfg = Config.load(environ=environ)
    assert cfg.source("SEGMENT_SIZE") == "default"
    Config.load(environ=environ)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "NEZHA WARN ENV unknown variable" in ln]
    assert len(lines) == 3, err
    assert any("NEZHA_SEGMNT_SIZE in the environment" in ln
               and "did you mean NEZHA_SEGMENT_SIZE?" in ln for ln in lines)
    assert any(f"NEZHA_SOCKET_IFNAM in file {conf} line 1" in ln
               and "did you mean NEZHA_SOCKET_IFNAME?" in ln for ln in lines)
    assert any("NEZHA_ZZZZZZ" in ln and "did you mean" not in ln for ln in lines)


def test_set_by_lines_at_info(env, capsys):
    log.configure(Config._read(environ=dict(env, NEZHA_DEBUG="INFO", NEZHA_DEBUG_SUBSYS="ENV")))
    environ = dict(env, NEZHA_SEGMENT_SIZE="512k", NEZHA_MAX_RAILS="4",
                   NEZHA_JOB_SECRET="abcdef0123456789")
    Config.load(environ=environ)
    Config.load(environ=environ)
    err = capsys.readouterr().err
    assert re.search(r"^\S+:\d+ \[\?\] NEZHA INFO ENV NEZHA_SEGMENT_SIZE set by environment "
                     r"to 512k$", err, re.M), err
    assert err.count("NEZHA_SEGMENT_SIZE set by") == 1          # once per process
    assert "NEZHA_MAX_RAILS" not in err                          # same as the default
    assert "NEZHA_JOB_SECRET set by environment to (set, hidden)" in err
    assert "abcdef" not in err


def test_log_levels_subsystems_rank_and_file(env, tmp_path, capsys):
    log.configure(Config._read(environ=dict(env, NEZHA_DEBUG="INFO",
                                            NEZHA_DEBUG_SUBSYS="^COLL")))
    log.set_rank(3)
    log.info("RAIL", "rail up")
    log.info("COLL", "hidden by ^COLL")
    log.warn("COLL", "warnings ignore the subsystem filter")
    log.trace("RAIL", "hidden at INFO")
    assert log.enabled("INFO", "RAIL") and not log.enabled("INFO", "COLL")
    assert not log.enabled("TRACE", "RAIL")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and re.fullmatch(r"\S+:\d+ \[3\] NEZHA INFO RAIL rail up", err[0])
    assert err[1].endswith("[3] NEZHA WARN COLL warnings ignore the subsystem filter")

    path = tmp_path / "log.%h.%p.txt"
    log.configure(Config._read(environ=dict(env, NEZHA_DEBUG="WARN", NEZHA_DEBUG_FILE=str(path))))
    log.warn("INIT", "to the file")
    log.info("INIT", "not at WARN")
    (written,) = tmp_path.glob(f"log.*.{os.getpid()}.txt")
    assert written.read_text().endswith("NEZHA WARN INIT to the file\n")
    assert capsys.readouterr().err == ""


def test_get_uses_the_process_environment(env, monkeypatch):
    monkeypatch.setenv("NEZHA_MAX_RAILS", "3")
    monkeypatch.setenv("HOME", env["HOME"])
    config.reset()
    try:
        assert config.get("MAX_RAILS") == 3
        monkeypatch.setenv("NEZHA_MAX_RAILS", "2")
        assert config.get("MAX_RAILS") == 3   # cached until reset()
    finally:
        config.reset()


def test_env_md_is_up_to_date():
    with open(os.path.join(ROOT, "docs", "env.md"), encoding="utf-8") as f:
        text = f.read()
    assert text == config.env_markdown(), \
        "docs/env.md is stale: run `python -m nezha.config > docs/env.md`"
    for name in PARAMS:
        assert f"`NEZHA_{name}`" in text
