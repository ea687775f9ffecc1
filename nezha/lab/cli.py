"""`nezha lab ...`: build, break, reshape and use an emulated multi-rail cluster."""
import argparse
import json
import os
import statistics
import sys

from nezha.errors import NezhaError
from nezha.lab import (FAIL_MODES, Lab, LabSpec, default_name, list_labs, shaping, state_path,
                       teardown)

_EPILOG = """examples:
  nezha lab up --hosts 4 --rails 2 --rate 400mbit,100mbit
  nezha lab up --hosts 2 --rails 2 --ranks-per-host 2   # 4 ranks, 2 in each host
  nezha lab status
  nezha lab fail 1 1 --mode blackhole; nezha lab heal 1 1
  nezha lab up --hosts 4 --rails 2 --ina 1   # INA service on rail1's switch (10.11.0.254:17017)
  nezha lab loss 1 1 0.5                      # drop 0.5 % of host 1's rail1 frames, each way
  nezha lab rate 1 50mbit
  nezha lab run -- python -m mpi4py.bench helloworld
  nezha lab run --env-rendezvous -- python train.py
  nezha lab down
the lab name (namespace prefix) is --name, else $NEZHA_LAB_NAME, else 'nz'."""


def _parser():
    """The argparse tree of `nezha lab`."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--name", default=None,
                        help="lab name / namespace prefix (default: $NEZHA_LAB_NAME or 'nz')")
    p = argparse.ArgumentParser(prog="nezha lab", description=__doc__, epilog=_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    s = sub.add_parser("up", parents=[common], help="build a lab")
    s.add_argument("--hosts", type=int, default=4)
    s.add_argument("--rails", type=int, default=2)
    s.add_argument("--ranks-per-host", type=int, default=1, metavar="L",
                   help="ranks `lab run` starts in each host's namespace (they share its rails); "
                        "rank r runs on host r // L (default 1)")
    s.add_argument("--rate", default=shaping.DEFAULT_RATE,
                   help="per-rail rate, one for all or one per rail: 400mbit[,100mbit,...]")
    s.add_argument("--mtu", type=int, default=shaping.DEFAULT_MTU)
    s.add_argument("--gso", type=int, default=shaping.DEFAULT_GSO, help="gso_max_size of the rail links")
    s.add_argument("--burst-us", type=int, default=shaping.DEFAULT_BURST_US)
    s.add_argument("--latency-ms", type=float, default=shaping.DEFAULT_LATENCY_MS,
                   help="tbf queue cap in time (not a delay)")
    s.add_argument("--delay-ms", type=float, default=0.0,
                   help="extra one-way delay per rail link; needs sch_netem (not on every kernel)")
    s.add_argument("--no-mgmt", action="store_true", help="no unshaped mgmt network (MPI boots over rail0)")
    s.add_argument("--replace", action="store_true", help="tear down an existing lab of this name first")
    s.add_argument("--ina", action="append", default=[], metavar="RAIL",
                   help="run an INA service (nezha ina serve) in that rail's switch, at 10.(10+RAIL).0.254:"
                        "17017 (repeatable); `lab run` sets NEZHA_INA_ADDR")

    s = sub.add_parser("down", parents=[common], help="remove a lab (also after a crash)")
    s.add_argument("--all", action="store_true", help="remove every lab on this machine")
    s = sub.add_parser("status", parents=[common], help="hosts, rails, rates, link state, byte counters")
    s.add_argument("--json", action="store_true")
    sub.add_parser("list", help="labs on this machine")

    s = sub.add_parser("fail", parents=[common], help="cut one host's rail")
    s.add_argument("host")
    s.add_argument("rail")
    s.add_argument("--mode", choices=FAIL_MODES, default="down",
                   help="down: switch port down (NO-CARRIER); blackhole: link up, frames dropped; "
                        "deaf: frames to the host dropped (one way); admin: host link down")
    s = sub.add_parser("heal", parents=[common], help="restore one host's rail")
    s.add_argument("host")
    s.add_argument("rail")
    s = sub.add_parser("loss", parents=[common], help="random loss on one host's rail (nftables), 0 = none")
    s.add_argument("host")
    s.add_argument("rail")
    s.add_argument("percent", type=float)
    s = sub.add_parser("rate", parents=[common], help="change a rail's rate on all its links, live")
    s.add_argument("rail")
    s.add_argument("rate")

    s = sub.add_parser("run", parents=[common],
                       help="run CMD as ranks-per-host ranks in every host: nezha lab run -- CMD")
    s.add_argument("--np", type=int, default=None,
                   help="number of ranks (default and maximum: hosts x ranks-per-host); "
                        "rank r runs on host r // ranks-per-host")
    s.add_argument("--env-rendezvous", action="store_true",
                   help="no MPI: one process per rank with RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/"
                        "MASTER_ADDR/MASTER_PORT")
    s.add_argument("--master-port", type=int, default=29500)
    s.add_argument("--timeout", type=float, default=3600.0, help="kill the job after this many seconds")
    s.add_argument("--tag-output", action="store_true", help="mpirun --output tag")
    s.add_argument("--mca", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                   help="extra Open MPI parameter")
    s.add_argument("-x", "--env", action="append", default=[], metavar="K=V", help="extra environment")
    s.add_argument("command", nargs=argparse.REMAINDER)

    s = sub.add_parser("exec", parents=[common], help="run a command in one host's namespace")
    s.add_argument("host")
    s.add_argument("--timeout", type=float, default=3600.0)
    s.add_argument("command", nargs=argparse.REMAINDER)

    s = sub.add_parser("check", parents=[common],
                       help="largest per-rail rate at which ring streams keep >= 90%% of the rate")
    s.add_argument("--hosts", type=int, default=4)
    s.add_argument("--rails", type=int, default=2)
    s.add_argument("--rates", default="400mbit,800mbit,1200mbit,1600mbit,2400mbit,3200mbit")
    s.add_argument("--seconds", type=float, default=3.0, help="measurement window per point")
    s.add_argument("--warmup", type=float, default=1.0)
    s.add_argument("--threshold", type=float, default=90.0, help="%% of the rate every stream must reach")
    s.add_argument("--no-single", action="store_true", help="skip the single-stream column")
    return p


def main(argv=None):
    """Entry point of `nezha lab`; returns the exit status."""
    p = _parser()
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if not args.cmd:
        p.print_help()
        return 2
    name = getattr(args, "name", None) or default_name()
    try:
        return _COMMANDS[args.cmd](args, name) or 0
    except NezhaError as e:
        print(f"nezha lab {args.cmd}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"nezha lab {args.cmd}: interrupted", file=sys.stderr)
        return 130


def _up(a, name):
    lab = Lab(LabSpec(hosts=a.hosts, rails=a.rails, rates=a.rate, name=name, mtu=a.mtu, gso=a.gso,
                      burst_us=a.burst_us, latency_ms=a.latency_ms, mgmt=not a.no_mgmt, delay_ms=a.delay_ms,
                      ranks_per_host=a.ranks_per_host, ina=",".join(a.ina)))
    lab.up(replace=a.replace)
    rates = ", ".join(f"rail{r} {shaping.format_rate(b)}" for r, b in enumerate(lab.spec.rates))
    print(f"lab {name} up: {lab.hosts} hosts ({lab.host_ns(0)}..{lab.host_ns(lab.hosts - 1)}), switch "
          f"{lab.switch_ns}, {rates}; mtu {lab.spec.mtu}" + (", mgmt 10.9.0.0/24" if lab.spec.mgmt else "")
          + f"; {lab.ranks_per_host} rank{'s' if lab.ranks_per_host > 1 else ''} per host ({lab.slots} in all)")
    for r in lab.spec.ina:
        print(f"  INA service on rail{r}: {lab.ina_address(r)} (NEZHA_INA_ADDR in `lab run`)")
    print(f"  run a job:  nezha lab run{'' if name == default_name() else ' --name ' + name} -- CMD ...")
    print(f"  remove it:  nezha lab down{'' if name == default_name() else ' --name ' + name}")


def _down(a, name):
    for n in (list_labs() if a.all else [name]):
        gone = teardown(n)
        print(f"lab {n} down: removed {len(gone)} namespaces" + (f" ({', '.join(gone)})" if gone else ""))


def _list(a, name):
    for n in list_labs():
        st = state_path(n)
        info = ""
        if os.path.exists(st):
            with open(st) as f:
                s = json.load(f)
            sp = s["spec"]
            info = (f"{sp['hosts']} hosts x {sp['rails']} rails x {sp.get('ranks_per_host', 1)} ranks/host, "
                    f"{','.join(shaping.format_rate(r) for r in sp['rates'])}, {s.get('state')}, pid {s.get('pid')}")
        print(f"{n:<10} {info or '(no state file: leftovers, `nezha lab down --name ' + n + '`)'}")


def _status(a, name):
    lab = Lab.attach(name)
    st = lab.status()
    if a.json:
        print(json.dumps(st, indent=1))
        return
    sp = lab.spec
    print(f"lab {name}: {sp.hosts} hosts x {sp.rails} rails, {sp.ranks_per_host} ranks per host "
          f"({lab.slots} ranks, rank r on host r // {sp.ranks_per_host}), mtu {sp.mtu}, gso {sp.gso}, "
          f"mgmt {st['mgmt'] or 'none'}  ({state_path(name)})")
    for r in st["rails"]:
        print(f"  rail{r['rail']}  {r['subnet']:<14} {shaping.format_rate(r['rate_bps'])}"
              + (f"  INA service {r['ina']}" if r.get("ina") else ""))
    print(f"{'host':<5}{'ns':<12}{'rail':<7}{'address':<13}{'rate':>9}{'link':>8}  {'fault':<10}"
          f"{'tx bytes':>14}{'rx bytes':>14}")
    for ln in st["links"]:
        fault = ("blackhole" if ln["blackholed"] else "deaf" if ln.get("deaf")
                 else "port-down" if not ln["port_up"]
                 else "admin-down" if not ln["admin_up"] else "-")
        rate = shaping.format_rate(ln["rate_bps"]) if isinstance(ln["rate_bps"], int) else "?"
        if ln["switch_rate_bps"] != ln["rate_bps"]:
            rate += "!"  # the two directions disagree
        if ln.get("loss_pct"):
            fault = f"loss {ln['loss_pct']:g}%" if fault == "-" else fault + f"+loss{ln['loss_pct']:g}%"
        print(f"{ln['host']:<5}{ln['ns']:<12}{ln['ifname']:<7}{ln['addr']:<13}{rate:>9}"
              f"{ln['state'].lower():>8}  {fault:<10}{ln['tx_bytes']:>14,}{ln['rx_bytes']:>14,}")


def _fail(a, name):
    lab = Lab.attach(name)
    lab.fail(a.host, a.rail, a.mode)
    print(f"lab {name}: host {a.host} rail {a.rail} failed ({a.mode})")


def _heal(a, name):
    lab = Lab.attach(name)
    lab.heal(a.host, a.rail)
    print(f"lab {name}: host {a.host} rail {a.rail} healed")


def _loss(a, name):
    lab = Lab.attach(name)
    lab.loss(a.host, a.rail, a.percent)
    print(f"lab {name}: host {a.host} rail {a.rail} drops {a.percent:g}% of frames each way"
          if a.percent else f"lab {name}: host {a.host} rail {a.rail} loss removed")


def _rate(a, name):
    lab = Lab.attach(name)
    lab.rate(a.rail, a.rate)
    print(f"lab {name}: rail {a.rail} now {shaping.format_rate(shaping.parse_rate(a.rate))} on all hosts")


def _cmd(a):
    """The command after `--`."""
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        raise NezhaError("no command: use `nezha lab run -- CMD ARGS...`")
    return cmd


def _run(a, name):
    lab = Lab.attach(name)
    env = {}
    for kv in a.env:
        k, sep, v = kv.partition("=")
        env[k] = v if sep else os.environ.get(k, "")
    res = lab.run(_cmd(a), np=a.np, env=env, timeout=a.timeout, env_rendezvous=a.env_rendezvous,
                  master_port=a.master_port, mca=[tuple(m) for m in a.mca], tag_output=a.tag_output)
    return res.returncode


def _exec(a, name):
    import subprocess
    lab = Lab.attach(name)
    p = lab.popen(a.host, _cmd(a))
    try:
        return p.wait(timeout=a.timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        print(f"nezha lab exec: timed out after {a.timeout:g}s", file=sys.stderr)
        return 124


def _check(a, name):
    from nezha.lab.launch import cpu_busy, stream_test
    rates = [shaping.parse_rate(x) for x in a.rates.split(",") if x.strip()]
    cname = a.name or f"ck{os.getpid() % 100000}"
    lab = Lab(LabSpec(hosts=a.hosts, rails=a.rails, rates=rates[0], name=cname)).up()
    ceiling = shaping.goodput_ceiling(lab.spec.mtu) * 100
    ring = [(h, (h + 1) % lab.hosts, r) for h in range(lab.hosts) for r in range(lab.rails)]
    print(f"lab check: {lab.hosts} hosts x {lab.rails} rails, ring = {len(ring)} TCP streams at once "
          f"(host i -> i+1 on every rail), {a.seconds:g} s per point, {os.cpu_count()} CPUs; "
          f"goodput ceiling at MTU {lab.spec.mtu} is {ceiling:.1f}% of the rate.\n"
          "CPU busy % = all CPUs during the ring; busy before % = same with the lab idle (other work); "
          "lab procs CPU % = the stream processes' own CPU (incl. softirq in their context)")
    hdr = (f"| rate/rail | {'single % | ' if not a.no_single else ''}ring min % | ring median % | CPU busy % "
           "| busy before % | lab procs CPU % |")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    best = None
    try:
        for bps in rates:
            for r in range(lab.rails):
                lab.rate(r, bps)
            single = ""
            if not a.no_single:
                s, _, _ = stream_test(lab, [(0, 1, 0)], a.warmup, a.seconds)
                single = f"{100 * s[0] / bps:.1f} | "
            # Busy % of the idle lab just before: other work on the machine inflates the CPU column.
            idle = cpu_busy(1.0)
            got, cpu, own = stream_test(lab, ring, a.warmup, a.seconds)
            pct = [100 * g / bps for g in got]
            print(f"| {shaping.format_rate(bps)} | {single}{min(pct):.1f} | {statistics.median(pct):.1f} | "
                  f"{cpu:.0f} | {idle:.0f} | {own:.0f} |", flush=True)
            if min(pct) >= a.threshold:
                best = bps if best is None or bps > best else best
    finally:
        lab.down()
    print(f"largest rate with every ring stream >= {a.threshold:g}%: "
          f"{shaping.format_rate(best) if best else 'none of the rates tried'}")
    return 0


_COMMANDS = {"up": _up, "down": _down, "list": _list, "status": _status, "fail": _fail, "heal": _heal,
             "rate": _rate, "loss": _loss, "run": _run, "exec": _exec, "check": _check}
