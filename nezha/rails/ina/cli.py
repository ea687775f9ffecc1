"""`nezha ina serve`: run an in-network aggregation service on a UDP address."""
import argparse
import json
import os
import signal
import sys
import threading
import time

from nezha.bootstrap.base import _read_secret_file
from nezha.errors import NezhaError
from nezha.rails.ina.client import DEFAULT_PORT

# The service usually shares its host's CPUs with ranks (the lab: 4 ranks and the service
# on 2 CPUs). A perf trace of ranks and service on one clock showed both defaults of before
# costing the ranks: a 50 us spin after each datagram (poll + sched_yield) held a CPU while
# the rank it waited for sat queued behind it (sched_yield under EEVDF does not hand the CPU
# over), and a service woken under SCHED_OTHER preempted the rank that had just sent to it
# (an IPI: that rank's sendmmsg took 17-19 us instead of 4-5). So by default the service
# does not spin, and runs as SCHED_BATCH: its wake-ups never preempt a running rank, it gets
# the CPU once a rank blocks or yields (or its slice ends). `--sched other --spin-us 50`
# suits a box of its own (docs/ina.md, Running it).
SPIN_US = 0.0
SCHED = "batch"
SCHEDS = {"batch": os.SCHED_BATCH, "other": os.SCHED_OTHER, "idle": os.SCHED_IDLE}

_EPILOG = """examples:
  nezha ina serve --addr 0.0.0.0 --port 17017 --slots 1024 --quota 256
  nezha ina serve --secret-file /run/job.secret     # admit only that job (key never travels)
  NEZHA_INA_ADDR=10.11.0.254:17017 python train.py  # ranks find it through a setting
  nezha ina serve --sched other --spin-us 50        # a box of its own: wake at once, spin
without --secret-file any job may register: its first rank teaches the service the job key
(trust on first use) and every later rank must prove it (docs/ina.md)."""


def _parser():
    p = argparse.ArgumentParser(prog="nezha ina", description=__doc__, epilog=_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    s = sub.add_parser("serve", help="run the aggregation service (Ctrl-C or SIGTERM stops it)")
    s.add_argument("--addr", default="0.0.0.0", help="IPv4 address to bind (default all)")
    s.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"UDP port (default {DEFAULT_PORT}, 0 = any)")
    s.add_argument("--slots", type=int, default=1024, help="slot pool size (each 2 sets x 1408 B)")
    s.add_argument("--quota", type=int, default=256, help="most slots one job gets")
    s.add_argument("--job-timeout", type=float, default=60.0,
                   help="seconds of silence after which a job's slots are freed")
    s.add_argument("--secret-file", action="append", default=[], metavar="PATH",
                   help="admit only jobs with this secret (hex, mode 600; repeatable)")
    s.add_argument("--stats", type=float, default=0.0, metavar="SECONDS",
                   help="print counters as JSON to stderr every SECONDS (and on exit)")
    s.add_argument("--spin-us", type=float, default=SPIN_US, metavar="US",
                   help="after a datagram keep looking this many microseconds (poll and "
                        "sched_yield) before sleeping in poll(); 0 sleeps at once (default "
                        f"{SPIN_US:g}: on a host that also runs ranks a spin takes the CPU a "
                        "rank the service waits for needs)")
    s.add_argument("--sched", choices=tuple(SCHEDS), default=SCHED,
                   help="scheduling policy of the service's threads (default %(default)s: its "
                        "wake-ups do not preempt ranks on the same CPUs; other: the normal "
                        "policy, for a host of its own; idle: only CPU time nothing else wants)")
    s.add_argument("--ready-file", default=None, help="write 'addr port pid' here once bound")
    return p


def _set_sched(policy):
    """Put every thread of this process under `policy` (threads started later inherit it):
    sched_setscheduler(0) would change the calling thread only, and imports (numpy's
    thread pool) may have started others already."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(0))
        except ProcessLookupError:
            pass  # a thread that ended meanwhile


def main(argv=None):
    """Entry point of `nezha ina`."""
    from nezha._core import ina as _ina
    p = _parser()
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if a.cmd != "serve":
        p.print_help()
        return 2
    try:
        secrets = [bytes.fromhex(_read_secret_file(f).strip()) for f in a.secret_file]
        try:
            _set_sched(SCHEDS[a.sched])
        except OSError as e:   # e.g. leaving SCHED_IDLE inherited from the caller, unprivileged
            raise ValueError(f"--sched {a.sched}: {e}") from e
        srv = _ina.Server(a.addr, a.port, a.slots, a.quota, a.job_timeout, secrets)
        srv.set_spin(max(a.spin_us, 0.0) * 1e-6)
    except (NezhaError, ValueError) as e:
        print(f"nezha ina serve: error: {e}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"nezha ina serve: {a.addr}:{srv.port}, {a.slots} slots, quota {min(a.quota, a.slots)} per job, "
          f"job timeout {a.job_timeout:g} s, sched {a.sched}, spin {srv.spin * 1e6:g} us, {'open (trust on first use)' if srv.open else f'{len(secrets)} job secret(s)'}",
          file=sys.stderr, flush=True)
    if a.ready_file:
        with open(a.ready_file + ".tmp", "w") as f:
            f.write(f"{a.addr} {srv.port} {os.getpid()}\n")
        os.replace(a.ready_file + ".tmp", a.ready_file)
    if a.stats > 0:
        def report():
            while True:
                time.sleep(a.stats)
                print(json.dumps(srv.stats()), file=sys.stderr, flush=True)
        threading.Thread(target=report, daemon=True).start()
    try:
        srv.serve()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        print(json.dumps(srv.stats()), file=sys.stderr, flush=True)
        srv.close()
    return 0
