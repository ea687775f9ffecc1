# common: trees, lock, output
PY=/work/main/.venv/bin/python
R=/work/main/docs/results/session18
lock() { exec 9>/tmp/nezha-quiet.lock; flock -x 9; }
intree() { local t=$1; shift; (cd /work/$t && PYTHONPATH=/work/$t "$@"); }
stamp() { echo "$(date -u +%H:%M:%S) $*" >> $R/times.txt; }
