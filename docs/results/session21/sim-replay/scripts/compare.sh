#!/bin/bash
# One lab compare of nezha on this tree, under the exclusive lock (the bench builds its own
# lab and removes it at the end). usage: compare.sh RATES SYSTEMS OUTDIR [extra args]
# run as: flock -x /tmp/nezha-quiet.lock bash scripts/compare.sh ...
set -u
rates=$1 systems=$2 out=$3; shift 3
cd /work/hG
date -u +"start %FT%TZ"
PYTHONPATH=/work/hG /work/main/.venv/bin/python -m nezha bench compare --rates "$rates" \
    --collectives allreduce --systems "$systems" --max-size 64M --out "$out" "$@"
rc=$?
date -u +"end %FT%TZ rc=$rc"
ip netns list | grep -c . || true   # leftover namespaces (should be 0)
exit $rc
