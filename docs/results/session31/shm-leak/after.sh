#!/usr/bin/env bash
# The fix on the files that left a segment (and the three whose run saw a new /dev/shm file):
# each alone, under a shared hold of the quiet lock, WITHOUT presetting the backing directory
# (so tests/mpi_shm.py sets it), /dev/shm diffed before/after. Usage: after.sh TREE OUTDIR
set -u
TREE=$1; OUT=$2
mkdir -p "$OUT"
cd "$TREE" || exit 1
for n in test_coll_world test_errors test_fast_path test_shm test_hier_rails test_ina_small \
         test_loop_faults test_mpi_shm; do
    ls /dev/shm > "$OUT/$n.shm-before"
    CI=true PYTHONPATH="$TREE" timeout 1500 flock -s /tmp/nezha-quiet.lock \
        /work/main/.venv/bin/python -m pytest -q -ra -p no:cacheprovider "tests/$n.py" > "$OUT/$n.log" 2>&1
    rc=$?
    ls /dev/shm > "$OUT/$n.shm-after"
    new=$(comm -13 "$OUT/$n.shm-before" "$OUT/$n.shm-after" | tr '\n' ' ')
    echo "$n rc=$rc devshm_new=[$new] $(tail -1 "$OUT/$n.log")" | tee -a "$OUT/summary.txt"
done
