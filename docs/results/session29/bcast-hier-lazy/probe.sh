#!/bin/bash
# usage: probe.sh TREE LABEL [-x K=V ...]: probe.py 8K 16K 64K in lab h41a (up already), from TREE
T=$(realpath "$1"); L=$2; shift 2; O=$(dirname "$(readlink -f "$0")")
cd "$T" && PYTHONPATH="$T" timeout 300 /work/main/.venv/bin/python -m nezha lab run --name h41a --timeout 240 \
  -x PYTHONPATH="$T" -x NEZHA_SOCKET_IFNAME=rail0,rail1 "$@" -- /work/main/.venv/bin/python \
  "$O/probe.py" 8192 16384 65536 2>&1 | grep PROBE | sed "s/^/$L /" >> "$O/probe.txt"
