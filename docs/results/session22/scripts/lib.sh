# common: trees, lock, output (session 22)
PY=/work/main/.venv/bin/python
lock() { exec 9>/tmp/nezha-quiet.lock; flock -x 9; }
intree() { local t=$1; shift; (cd /work/$t && PYTHONPATH=/work/$t "$@"); }
