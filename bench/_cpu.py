"""CPU time of a rank: what `nezha bench compare` divides by the bytes moved (CPU s/GB).

Every system (nezha, Open MPI under mpirun, torch/Gloo) is measured the same way: the rank's
own process, all of its threads (Gloo's and Open MPI's progress threads, nezha's health
thread), user + system time. Softirq work the kernel does for the network is charged to
whichever process happens to run (or to no process at all), alike for every system.
"""
import os
import resource

_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid=None):
    """(user, system) CPU seconds a process has used so far, all its threads included, plus
    the children it has reaped. pid None: this process (getrusage, microseconds); otherwise
    /proc/PID/stat (clock ticks: 1/SC_CLK_TCK s)."""
    if pid is None:
        me = resource.getrusage(resource.RUSAGE_SELF)
        ch = resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + ch.ru_utime, me.ru_stime + ch.ru_stime
    with open(f"/proc/{pid}/stat") as f:
        # the command name (field 2) may hold spaces and parentheses: split after its last ')'
        v = f.read().rsplit(")", 1)[1].split()
    # fields 14-17 of proc(5): utime, stime, cutime, cstime (v[0] is field 3)
    utime, stime, cutime, cstime = (int(x) for x in v[11:15])
    return (utime + cutime) / _TCK, (stime + cstime) / _TCK


def loop_cpu_seconds():
    """(user, system) of this process alone, for reading around each timed call: one system
    call (the children's usage cannot change inside a collective)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime, me.ru_stime


def cpu_s_per_gb(cpu_s, ranks, iterations, bus_bytes):
    """CPU seconds per GB (1e9 B) moved: the ranks' summed CPU seconds over the timed calls
    divided by ranks x iterations x the per-rank bus bytes of one call (busbw's bytes:
    S x the nccl-tests factor, i.e. what each rank must send at least); None if nothing moved."""
    moved = ranks * iterations * bus_bytes
    return cpu_s / (moved / 1e9) if moved > 0 else None
