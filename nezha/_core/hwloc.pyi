"""Typing stub for nezha._core.hwloc (the hwloc 2.x binding)."""
from typing import Any

COMPILED_API_VERSION: int

def api_version() -> tuple[int, int]:
    """(runtime, compiled) hwloc API versions, e.g. (0x20800, 0x20800)."""

def version_text(v: int) -> str:
    """0x00020800 -> '2.8' (the API version, not the release: 2.9 keeps API 2.8)."""

def check_api_version() -> int:
    """Raise RuntimeError if the library at run time is not the major version compiled for."""

def load(xml: str | None = None) -> dict[str, Any]:
    """The topology as {"api_version", "this_system", "objects": [...], "distances": [...]}."""
