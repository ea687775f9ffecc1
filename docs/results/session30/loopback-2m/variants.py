#!/usr/bin/env python
"""bench/compare_loopback.py with extra nezha systems: the same run, NEZHA_* settings forced.

Usage (from the tree being timed): python variants.py --backends nezha,nezha-rab,nezha-seg1m,mpi -m 1M:4M ...
A system name nezha-<tag> runs nezha with VARIANTS[tag] added to the loopback environment.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import compare_loopback as cl  # noqa: E402

VARIANTS = {
    "rab": {"NEZHA_ALGO": "rab"},
    "rd": {"NEZHA_ALGO": "rd"},
    "seg64k": {"NEZHA_SEGMENT_SIZE": "64k"},
    "seg128k": {"NEZHA_SEGMENT_SIZE": "128k"},
    "seg512k": {"NEZHA_SEGMENT_SIZE": "512k"},
    "seg1m": {"NEZHA_SEGMENT_SIZE": "1M"},
    "nconns2": {"NEZHA_SOCKET_NCONNS": "2"},
    "rab-seg1m": {"NEZHA_ALGO": "rab", "NEZHA_SEGMENT_SIZE": "1M"},
}
for tag, env in VARIANTS.items():
    cl.BACKEND_ENV[f"nezha-{tag}"] = dict(cl.BACKEND_ENV["nezha"], **env)

if __name__ == "__main__":
    sys.exit(cl.main())
