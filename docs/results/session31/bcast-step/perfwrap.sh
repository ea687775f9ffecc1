#!/bin/bash
# perf stat around one rank (mpirun starts this per rank): counts only between the
# "enable"/"disable" step.py writes to $STEP_PERF/ctl.RANK. usage: perfwrap.sh CMD...
R=${OMPI_COMM_WORLD_RANK:?}
D=${STEP_PERF:?}
EV=${STEP_EVENTS:-raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_sendmsg,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sched_yield,syscalls:sys_enter_poll,syscalls:sys_enter_ppoll,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_writev,syscalls:sys_enter_readv,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_clock_gettime,syscalls:sys_enter_futex,syscalls:sys_enter_getsockopt,syscalls:sys_enter_ioctl,syscalls:sys_enter_sendto}
rm -f $D/ctl.$R; mkfifo $D/ctl.$R
# reads that brought bytes: recvfrom's exits with ret > 0 (perf's tracepoint filter)
exec perf stat -x, -D -1 --control fifo:$D/ctl.$R -e "$EV" -e syscalls:sys_exit_recvfrom \
  --filter 'ret > 0' -e syscalls:sys_exit_readv --filter 'ret > 0' -o $D/perf.$R "$@"
