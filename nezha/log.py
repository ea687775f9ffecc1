"""Log lines in NCCL's shape, driven by NEZHA_DEBUG, NEZHA_DEBUG_SUBSYS and NEZHA_DEBUG_FILE.

    host:pid [rank] NEZHA INFO RAIL message

Plain writes rather than the logging module: one format, no handlers to configure, and the
level/subsystem check is two comparisons.
"""
from __future__ import annotations

import os
import socket
import sys

LEVELS = {"VERSION": 1, "WARN": 2, "INFO": 3, "TRACE": 4}
_WARN = LEVELS["WARN"]

_level: int | None = None      # None until configure() has run (lazily, on first use)
_subsys: frozenset = frozenset()
_out = None                    # open NEZHA_DEBUG_FILE, or None for sys.stderr
_rank = "?"
_host = socket.gethostname().split(".")[0]


def configure(cfg=None) -> None:
    """(Re)read the three NEZHA_DEBUG* settings from cfg, or from the environment and files."""
    global _level, _subsys, _out
    from nezha.config import Config
    # Not strict: a bad NEZHA_TIMEOUT must not stop us from logging that it is bad.
    cfg = Config._read(strict=False) if cfg is None else cfg
    if _out is not None:
        _out.close()
    _out, problem = None, None
    path = cfg["DEBUG_FILE"]
    if path:
        path = path.replace("%h", _host).replace("%p", str(os.getpid()))
        try:
            _out = open(path, "a", buffering=1, encoding="utf-8")
        except OSError as e:
            problem = f"cannot open NEZHA_DEBUG_FILE {path} ({e.strerror}); logging to stderr"
    _subsys = frozenset(cfg["DEBUG_SUBSYS"])
    _level = LEVELS[cfg["DEBUG"]]
    for name in ("DEBUG", "DEBUG_SUBSYS", "DEBUG_FILE"):
        if name in getattr(cfg, "errors", {}):
            warn("ENV", cfg.errors[name] + "; using the default")
    if problem:
        warn("ENV", problem)


def set_rank(rank: int | None) -> None:
    """Show `rank` in every following line (None shows `?` again)."""
    global _rank
    _rank = "?" if rank is None else str(rank)


def enabled(level: str, subsys: str) -> bool:
    """True if a line at `level` ("WARN", "INFO", ...) in `subsys` would be printed."""
    if _level is None:
        configure()
    n = LEVELS[level]
    # Warnings (and the version line) ignore the subsystem filter, as in NCCL.
    return n <= _level and (n <= _WARN or subsys in _subsys)


def _emit(level: str, subsys: str, msg: str) -> None:
    line = f"{_host}:{os.getpid()} [{_rank}] NEZHA {level} {subsys} {msg}\n"
    try:
        (_out or sys.stderr).write(line)   # sys.stderr looked up now: tests swap it
        (_out or sys.stderr).flush()
    except (OSError, ValueError):
        pass  # a closed or full log file must not break communication


def version(subsys: str, msg: str) -> None:
    """Log the version line (printed at every NEZHA_DEBUG level)."""
    if enabled("VERSION", subsys):
        _emit("VERSION", subsys, msg)


def warn(subsys: str, msg: str) -> None:
    """Log a warning: something is probably wrong, but nezha carries on."""
    if enabled("WARN", subsys):
        _emit("WARN", subsys, msg)


def info(subsys: str, msg: str) -> None:
    """Log what nezha decided and why (NEZHA_DEBUG=INFO)."""
    if enabled("INFO", subsys):
        _emit("INFO", subsys, msg)


def trace(subsys: str, msg: str) -> None:
    """Log per-operation detail (NEZHA_DEBUG=TRACE)."""
    if enabled("TRACE", subsys):
        _emit("TRACE", subsys, msg)
