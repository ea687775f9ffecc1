"""`nezha bench ...`: benchmarks that need the lab. The suite itself lives in bench/compare.py.

    nezha bench compare [--rates 400mbit[,100mbit]] [--hosts 4] [--quick] [--lab NAME]
                        [--collectives allreduce,...] [--systems nezha-all,gloo-rail0,...]
                        [--max-size 64M] [--reps N] [--reps-other N] [--time-budget S] [--out DIR]

Without --lab it builds its own lab under a unique name and always removes it (also on
Ctrl-C, SIGTERM and errors); with --lab it uses that running lab and leaves it up.
"""
import argparse
import importlib.util
import os
import shlex
import signal
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def need_bench(command, *scripts):
    """The paths of bench/ scripts a command runs; exits with a plain message when this is
    an installed package (pip does not install bench/: it is the source tree's)."""
    paths = [os.path.join(ROOT, "bench", s) for s in scripts]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise SystemExit(
            f"{command}: needs the benchmark scripts of a nezha source tree ({', '.join(missing)} "
            f"not found): pip installs the library and the `nezha` command, not bench/. Run it "
            f"from a clone of the repository: `make build && .venv/bin/python -m {command} ...`")
    return paths


def _load_compare():
    """bench/compare.py as a module (bench/ is not a package; it imports _common by path)."""
    path, _ = need_bench("nezha bench compare", "compare.py", "_common.py")
    spec = importlib.util.spec_from_file_location("nezha_bench_compare", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _unique_name():
    """A lab name of our own: 'cmp' + pid in base 36 (valid: [a-z][a-z0-9]{0,9})."""
    n, s = os.getpid(), ""
    while True:
        n, d = divmod(n, 36)
        s = _B36[d] + s
        if not n:
            return f"cmp{s}"


def _sigterm(signum, frame):
    """SIGTERM/SIGHUP -> KeyboardInterrupt, so the finally blocks take the lab down."""
    raise KeyboardInterrupt(f"signal {signum}")


def lab_down(lab, log):
    """Remove a bench's lab, reporting (not raising) a failure: an error in the bench
    itself must not be masked."""
    try:
        lab.down()
        log(f"# lab {lab.name} removed")
    except Exception as e:  # noqa: BLE001 - report, do not mask the original error
        log(f"# could not remove lab {lab.name}: {e} (run `nezha lab down --name {lab.name}`)")


def _parser():
    p = argparse.ArgumentParser(prog="nezha bench", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="nezha vs Gloo, Open MPI and MPTCP in one lab, interleaved",
                       description="nezha against Gloo, Open MPI (default, ring, hand-tuned) and "
                                   "Gloo over MPTCP, plus the physical limit, in one lab run.")
    c.add_argument("--rates", default="400mbit", help="per-rail rates: 400mbit or 400mbit,100mbit")
    c.add_argument("--hosts", type=int, default=4, help="hosts (= ranks)")
    c.add_argument("--rails", type=int, default=None, help="rails (default: 2, or one per --rates entry)")
    c.add_argument("--collectives", default=None,
                   help="comma list of allreduce,broadcast,allgather,reduce_scatter "
                        "(default: all; --quick: allreduce)")
    c.add_argument("--systems", default="", help="comma list of system names (default: all that apply)")
    c.add_argument("--list-systems", action="store_true", help="print the systems table and exit")
    c.add_argument("--quick", action="store_true",
                   help="a few minutes: allreduce only, sizes up to 4M, one repetition")
    c.add_argument("--max-size", default=None, help="largest message (default 64M; --quick 4M)")
    c.add_argument("--min-size", default="4", help="smallest message (default 4)")
    c.add_argument("--reps", type=int, default=None,
                   help="interleaved repetitions of allreduce (default 2; --quick 1)")
    c.add_argument("--reps-other", type=int, default=1,
                   help="interleaved repetitions of the other collectives (default 1)")
    c.add_argument("--time-budget", type=float, default=None,
                   help="seconds per size and run, caps OSU iterations (default 0.05)")
    c.add_argument("--max-minutes", type=float, default=19.0,
                   help="skip repetitions that would end after this much wall time (default 19)")
    c.add_argument("--validate", action="store_true", help="also check results (OSU -c)")
    c.add_argument("--no-lab-check", action="store_true",
                   help="skip the raw TCP ring check of the lab's rates in each repetition (~5 s)")
    c.add_argument("--out", default=None, help="output folder (default bench/out/compare-<rates>)")
    c.add_argument("--lab", default=None, help="use this running lab (left up) instead of building one")
    c.add_argument("--ina", type=int, default=None, metavar="RAIL",
                   help="run an INA service on that rail's switch (the nezha-ina row: TCP on the "
                        "other rails plus the INA rail)")
    return p


def main(argv=None):
    """Entry point of `nezha bench`."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    cmp = _load_compare()
    from _common import parse_size  # bench/ is on sys.path once compare.py is loaded
    from nezha.lab import Lab, LabSpec, available

    a = args
    if a.list_systems:
        for s in cmp.SYSTEMS:
            print(f"{s.name:<16} {s.backend:<6} rails={s.rails:<6} when={s.when:<8} "
                  f"{','.join(s.collectives) if s.collectives != cmp.COLLECTIVES else 'all'}  {s.label}")
        return 0
    colls = tuple(x.strip() for x in (a.collectives or ("allreduce" if a.quick else
                                                        ",".join(cmp.COLLECTIVES))).split(",") if x.strip())
    bad = [x for x in colls if x not in cmp.COLLECTIVES]
    if bad:
        print(f"nezha bench compare: unknown collectives {bad}; one of {', '.join(cmp.COLLECTIVES)}",
              file=sys.stderr)
        return 2
    opts = cmp.Options(
        collectives=colls,
        systems=tuple(x.strip() for x in a.systems.split(",") if x.strip()),
        min_size=parse_size(a.min_size),
        max_size=parse_size(a.max_size or ("4M" if a.quick else "64M")),
        reps=a.reps if a.reps is not None else (1 if a.quick else 2), reps_other=a.reps_other,
        time_budget=a.time_budget if a.time_budget is not None else 0.05,
        max_minutes=a.max_minutes, validate=a.validate, quick=a.quick,
        lab_check=not a.no_lab_check)

    ok, why = available()
    if not ok:
        print(f"nezha bench compare: cannot use a lab here: {why}", file=sys.stderr)
        return 1
    own = a.lab is None
    if own:
        rates = a.rates
        rails = a.rails or max(2, len(rates.split(",")))
        lab = Lab(LabSpec(hosts=a.hosts, rails=rails, rates=rates, name=_unique_name(),
                          ina=() if a.ina is None else (a.ina,)))
    else:
        lab = Lab.attach(a.lab)
        if a.rates != "400mbit" or a.rails or a.hosts != 4 or a.ina is not None:
            print(f"# --lab {a.lab}: using that lab as it is; --rates/--rails/--hosts/--ina are ignored",
                  file=sys.stderr)
    try:
        cmp.select_systems(lab, list(opts.systems) or None)
    except ValueError as e:
        print(f"nezha bench compare: {e}", file=sys.stderr)
        return 2
    tag = "-".join(cmp._rate_text(b) for b in lab.spec.rates)
    if len(set(lab.spec.rates)) == 1:
        tag = cmp._rate_text(lab.spec.rates[0])
    out = a.out or os.path.join(ROOT, "bench", "out", f"compare-{tag}" + ("-quick" if a.quick else ""))
    command = "nezha bench " + " ".join(shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:]))

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    old = {s: signal.signal(s, _sigterm) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if own:
            log(f"# building lab {lab.name}: {a.hosts} hosts x {lab.rails} rails at {a.rates}")
            lab.up(owner="nezha bench compare")
        doc = cmp.run_suite(lab, opts, out, command=command, log=log)
    except KeyboardInterrupt:
        log("# interrupted")
        return 130
    finally:
        if own:
            lab_down(lab, log)
        for s, h in old.items():
            signal.signal(s, h)
    with open(os.path.join(out, "compare.md")) as f:
        print(f.read().split("\n## OSU-style tables")[0])
    runs = doc["runs"]
    bad = [r for r in runs if "error" in r or not r["placement"]["ok"]]
    return 0 if runs and not bad else 1
