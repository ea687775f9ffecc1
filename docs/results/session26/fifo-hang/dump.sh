#!/bin/bash
# Dump the state of every rank process whose command line contains $1 (a copy's tmp dir)
# into $2: thread classes/priorities, CPU used per thread over 1 s, current syscalls,
# the sockets' queues; then for threads busy > 30 % of that second: perf samples and
# gdb stacks (gdb stops the process: last). Run at a real-time priority above the ranks'.
pat=$1; f=$2
pids=$(pgrep -f "failover_worker.py $pat")
cpu() { for p in $pids; do for t in /proc/$p/task/*; do
          echo "$p.${t##*/} $(awk '{print $14+$15}' $t/stat 2>/dev/null)"; done; done | sort; }
{ date +%T.%N
  a=$(cpu); sleep 1; b=$(cpu)
  busy=$(join <(echo "$a") <(echo "$b") | awk '$3-$2 >= 30 {print $1}')
  echo "-- CPU ticks (1/100 s) per thread over 1 s: pid.tid ticks"
  join <(echo "$a") <(echo "$b") | awk '{print $1, $3-$2}'
  echo "-- busy: $busy"
  for pt in $busy; do
    t=${pt#*.}
    echo "== perf of busy thread $t"
    timeout 20 perf record -q -g -t $t -o /tmp/h27-perf.$t.data -- sleep 0.5 >/dev/null 2>&1
    timeout 30 perf report -q --stdio --no-children -i /tmp/h27-perf.$t.data 2>/dev/null | grep -v "^$" | head -60
    rm -f /tmp/h27-perf.$t.data
  done
  ps -eLo pid,tid,cls,rtprio,pcpu,stat,wchan:24,comm | awk -v p=" $(echo $pids) " 'NR==1 || index(p, " "$1" ")'
  for p in $pids; do
    echo "== pid $p"
    for t in /proc/$p/task/*; do
      echo "-- tid ${t##*/} $(cat $t/comm) wchan=$(cat $t/wchan) $(awk '{print "state="$3" utime="$14" stime="$15" prio="$18" policy="$41}' $t/stat) syscall: $(cat $t/syscall)"
    done
    echo "-- sockets of $p (ss)"
    ss -tnpi 2>/dev/null | grep -A1 "pid=$p," | grep -v "^--"
  done
  for pt in $busy; do
    echo "== gdb of busy thread $pt"
    cat > /tmp/h27-gdb.$$.py <<PY
import gdb
for th in gdb.selected_inferior().threads():
    if th.ptid[1] == ${pt#*.}:
        th.switch()
gdb.execute("bt 4")
f = gdb.newest_frame()
while f is not None and f.name() != "nz_progress":
    f = f.older()
if f is not None:
    f.select()
    e = gdb.parse_and_eval("e")
    print("nep", int(e["nep"]), "chan_failed", int(e["chan_failed"]), "live_rails", int(e["live_rails"]))
    for i in range(int(e["nep"])):
        p = e["eps"][i]
        print("ep %d chan %d peer %d tr %s want_in %d want_out %d zc_wait %d nsq %d sh %d nrq %d rh %d tx_watch %d" % (
            i, int(p["chan"]), int(p["peer"]), "set" if int(p["tr"]) else "NULL", int(p["want_in"]),
            int(p["want_out"]), int(p["zc_wait"]), int(p["nsq"]), int(p["sh"]), int(p["nrq"]), int(p["rh"]),
            int(p["tx_watch"])))
PY
    timeout 30 gdb -p ${pt%.*} -batch -x /tmp/h27-gdb.$$.py 2>&1 | grep -E "^#|^nep|^ep |Error|error" | cut -c1-200
    rm -f /tmp/h27-gdb.$$.py
  done
} > "$f" 2>&1
