#!/usr/bin/env bash
# Which test files leave Open MPI sm_segment files: each file in its own pytest (CI=true, as
# .ci/run), under a shared hold of the quiet lock, with Open MPI's sm backing directory moved to
# a per-file directory (OMPI_MCA_btl_sm_backing_directory), so that other people's Open MPI
# jobs cannot be mistaken for ours. /dev/shm is diffed too (catches subprocesses whose
# environment was rebuilt without the variable). Usage: survey.sh TREE OUTDIR
set -u
TREE=$1; OUT=$2
mkdir -p "$OUT"
cd "$TREE" || exit 1
for f in tests/test_*.py; do
    n=$(basename "$f" .py)
    d="$OUT/seg/$n"; mkdir -p "$d"
    ls /dev/shm > "$OUT/seg/$n.shm-before"
    t0=$(date +%s)
    CI=true OMPI_MCA_btl_sm_backing_directory="$d" PYTHONPATH="$TREE" \
        timeout 1500 flock -s /tmp/nezha-quiet.lock \
        /work/main/.venv/bin/python -m pytest -q -ra -p no:cacheprovider "$f" > "$OUT/$n.log" 2>&1
    rc=$?
    ls /dev/shm > "$OUT/seg/$n.shm-after"
    left=$(ls "$d" | tr '\n' ' ')
    new=$(comm -13 "$OUT/seg/$n.shm-before" "$OUT/seg/$n.shm-after" | tr '\n' ' ')
    echo "$n rc=$rc secs=$(( $(date +%s) - t0 )) left=[$left] devshm_new=[$new] $(tail -1 "$OUT/$n.log")" | tee -a "$OUT/summary.txt"
done
