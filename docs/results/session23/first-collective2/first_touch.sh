#!/bin/bash
# first copy of 16 / 3 MiB into a fresh buffer, a fresh process each, interleaved:
# np = numpy zeros (numpy's own MADV_HUGEPAGE from 4 MiB, unaligned), al = 2 MiB-aligned
# private mapping advised MADV_HUGEPAGE (buffers.zeroed), nh = numpy zeros without advice.
# flock -x /tmp/nezha-quiet.lock bash first_touch.sh > first_touch.txt  (22:10 UTC)
D=$(dirname "$0")
for i in 1 2 3 4 5; do for k in np al nh al np nh; do /work/main/.venv/bin/python $D/first_touch.py $k 16; done; done
for i in 1 2 3; do for k in np al al np; do /work/main/.venv/bin/python $D/first_touch.py $k 3; done; done
