"""Start N ranks as plain processes with a torchrun-style environment (no MPI)."""
import json
import os
import random
import socket
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "workers", "scenarios.py")


def free_port():
    """A TCP port free on 127.0.0.1 right now, below the kernel's ephemeral range: a port
    the kernel hands out (bind to 0) can be taken again by any outgoing connection before
    the rank binds it (EADDRINUSE when other tests or jobs connect a lot)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.SystemRandom()
    for _ in range(100):
        port = rng.randrange(10000, max(low, 10001))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # the range is full: take what the kernel gives
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(n, scenario, env=None, rank_env=None, timeout=60, worker=WORKER, unset=()):
    """Run tests/workers/scenarios.py SCENARIO (or another worker script, scenario None: no
    argument) as n ranks; [(returncode, result dict of its last RESULT line, output)].
    unset: variables of this environment the ranks must not inherit."""
    port = free_port()
    cmd = [sys.executable, worker] + ([scenario] if scenario is not None else [])
    procs = []
    for r in range(n):
        e = dict(os.environ, PYTHONPATH=ROOT, RANK=str(r), WORLD_SIZE=str(n),
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NEZHA_SOCKET_IFNAME="lo",
                 NEZHA_JOB_SECRET="00" * 16)
        for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", *unset):
            e.pop(k, None)
        e.update(env or {})
        e.update((rank_env or {}).get(r, {}))
        procs.append(subprocess.Popen(cmd, env=e, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    results = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            res = None
            for line in out.splitlines():
                if line.startswith("RESULT "):
                    res = json.loads(line[7:])
            results.append((p.returncode, res, out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results
