#!/bin/bash
# $1 = algo, rest: sizes
cd /work/h40
export PYTHONPATH=/work/h40
/work/main/.venv/bin/python -m nezha lab run --name h40a --timeout 120 -x NEZHA_ALGO=$1 -x PYTHONPATH=/work/h40 -x NEZHA_SOCKET_IFNAME=rail0,rail1 ${EXTRA} -- /work/main/.venv/bin/python /work/h40/bench/osu_bcast.py -m 4096:65536 -i 200 -x 20
