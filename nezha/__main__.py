"""`python -m nezha <command>` and the `nezha` console script."""
import importlib
import sys

# command -> (module, one-line help); each module has main(argv) -> exit status.
COMMANDS = {
    "info": ("nezha.info", "version, build, every NEZHA_* setting with its source, interfaces and rails"),
    "lab": ("nezha.lab.cli", "emulated multi-rail cluster: up, down, status, fail, heal, rate, run"),
    "demo": ("nezha.demo", "the multi-rail demo: a 4-host 2-rail lab, allreduce on one rail and on both"),
    "mpirun": ("nezha.launch", "run a command as N MPI ranks on this host (the project's Open MPI)"),
    "bench": ("nezha.benchcli", "benchmarks: compare nezha against Gloo, MPI and MPTCP in the lab"),
    "sim": ("nezha.sim.cli", "flow-level simulator of nezha's schedules on fabrics: run, lab, calibrate, train"),
    "ina": ("nezha.rails.ina.cli", "in-network aggregation service: nezha ina serve --addr --port --slots --quota"),
    "topo": ("nezha.topo.cli", "packages, NUMA nodes, NICs, GPUs and each GPU's nearest NICs (hwloc)"),
}


def usage(out=sys.stdout):
    """Print the list of commands."""
    print("usage: nezha <command> [args]\n\ncommands:", file=out)
    for name, (_, text) in COMMANDS.items():
        print(f"  {name:<8} {text}", file=out)


def main(argv=None):
    """Dispatch to a subcommand's main()."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        usage()
        return 0
    if argv[0] in ("-V", "--version"):
        from nezha._version import __version__
        print(__version__)
        return 0
    if argv[0] not in COMMANDS:
        print(f"nezha: unknown command {argv[0]!r}\n", file=sys.stderr)
        usage(sys.stderr)
        return 2
    mod = importlib.import_module(COMMANDS[argv[0]][0])
    return mod.main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
