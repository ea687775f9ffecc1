#!/bin/bash
# 3 copies of test_presnap's queued in-place iallreduces across a stalled loop rail at once,
# ROUNDS times; NEZHA_PROGRESS_SCHED from the environment (auto/other). Run under
#   flock -s /tmp/nezha-quiet.lock docs/results/session26/fifo-hang/repro.sh OUT ROUNDS [TREE]
# Every copy's tmp dir (rank logs) is kept under OUT; a copy whose rank logs stay unchanged
# 6 s (run with NEZHA_DEBUG=TRACE) gets its ranks dumped (dump.sh: threads, sockets' queues,
# gdb stacks) to OUT/rR.cC.hang.N.txt (at most 2, 20 s apart). DUMP=0: no watchdog.
OUT=$1; ROUNDS=${2:-4}; TREE=${3:-/work/h27}
TEST=${TEST:-"tests/test_presnap.py::test_queued_in_place_allreduces_exact_across_faults[stall]"}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$TREE"
for r in $(seq 1 "$ROUNDS"); do
  pids=()
  for c in 1 2 3; do
    d="$OUT/r$r.c$c"; rm -rf "$d"
    ( start=$(date +%s.%N)
      PYTHONPATH=$TREE timeout 300 /work/main/.venv/bin/python -m pytest -q -x -p no:cacheprovider \
        --basetemp="$d" "$TEST" > "$d.out" 2>&1
      rc=$?; end=$(date +%s.%N)
      printf "r%s c%s rc=%s %.1fs\n" "$r" "$c" "$rc" "$(echo "$end - $start" | bc)" >> "$OUT/summary.txt"
    ) &
    pids+=($!)
  done
  # watchdog: a copy whose rank logs stay unchanged 6 s (TRACE logs every vote) is dumped
  ( [ "${DUMP:-1}" = 0 ] && exit 0  # DUMP=0: no watchdog (logs quiet without TRACE)
    chrt -f -p 20 $BASHPID  # above the ranks' FIFO 1/2 threads: they may crowd the cores
    while true; do
      sleep 1
      for c in 1 2 3; do
        d="$OUT/r$r.c$c"
        n=$(ls "$d".hang.* 2>/dev/null | wc -l)
        [ "$n" -ge 2 ] && continue
        [ -n "$(find "$d".hang.* -newermt '-20 seconds' 2>/dev/null)" ] && continue
        grep -q "^r$r c$c " "$OUT/summary.txt" 2>/dev/null && continue
        last=$(stat -c %Y "$d"/*/rank*.log 2>/dev/null | sort -n | tail -1)
        [ -n "$last" ] && [ $(( $(date +%s) - last )) -ge 6 ] && \
          "$HERE/dump.sh" "$d/" "$d.hang.$n.txt" &
      done
    done ) &
  wd=$!
  wait "${pids[@]}"
  kill $wd 2>/dev/null; wait $wd 2>/dev/null
done
cat "$OUT/summary.txt"
