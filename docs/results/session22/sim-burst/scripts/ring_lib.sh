# Sourced by ring_cc.sh, ring_peak.sh and ring_spin.sh (helper-15's tree /work/hH, since
# merged): a 4 x 2 lab at 400 + 400 Mbit/s named hh, down on exit, and run SIZE [K=V ...]:
# bench/idle_burst.py (idle 0 / 1.5 / 6 ms, 20 rounds), one line of median us and ratios.
PY=/work/main/.venv/bin/python
export NEZHA_LAB_NAME=hh PYTHONPATH=/work/hH
cd /work/hH
trap '$PY -m nezha lab down >/dev/null 2>&1' EXIT
$PY -m nezha lab up --hosts 4 --rails 2 --rate 400mbit --replace >/dev/null || exit 1
run() {
  local size=$1; shift
  $PY -m nezha lab run --timeout 120 -x NEZHA_SOCKET_IFNAME=rail0,rail1 ${@/#/-x } -- \
     $PY bench/idle_burst.py --size $size --idle-ms 0,1.5,6 --calls 20 2>&1 \
     | $PY -c "import json,sys; t=sys.stdin.read(); d=json.loads(t[t.index('{'):t.rindex('}')+1]); print('$size $*', d['median_us'], d['vs_idle0'])"
}
