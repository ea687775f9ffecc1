#!/usr/bin/env python
"""The comparison suite: nezha against Gloo, Open MPI and MPTCP, in one lab, in one run.

Every performance claim of nezha is a ratio against baselines measured here, in the same run
on the same lab, interleaved (each repetition runs every system once, in a rotated order) so
that machine noise hits all of them alike. Each system is one row of SYSTEMS; later work adds
rows, not code. The per-run worker is the existing OSU-style script (bench/osu_*.py --json);
the per-rail byte counters read before and after every run are stored with it, and prove which
rails the system really used (`placement`).

    nezha bench compare [--rates 400mbit,100mbit] [--quick] [--lab NAME] ...   (nezha/benchcli.py)
    python bench/compare.py --worker SCRIPT ARGS...                             (one rank; internal)

Outputs in --out: compare.json (every sample, counters, commands), compare.md (lab, systems,
placement proof, ratio tables, OSU-style table per system), results.md (the README section),
busbw_<collective>.png and latency_<collective>.png (bench/plot_compare.py).
"""
import dataclasses
import datetime
import json
import math
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
if ROOT not in sys.path:
    sys.path.insert(1, ROOT)
from _common import BUSBW_FACTORS, FIELD_WIDTH, SIZE_WIDTH, __version__  # noqa: E402

OSU_SCRIPTS = {"allreduce": "osu_allreduce.py", "broadcast": "osu_bcast.py",
               "allgather": "osu_allgather.py", "reduce_scatter": "osu_reduce_scatter.py"}
COLLECTIVES = tuple(OSU_SCRIPTS)
SHIM_SRC = os.path.join(HERE, "mptcp_shim.c")
SHIM_LIB = os.path.join(ROOT, "build", "libnzmptcp.so")
MPTCP_BASE_PORT = 29900          # endpoint of rail r listens on MPTCP_BASE_PORT + r (LAB.md §3)
IPPROTO_MPTCP = 262


# ---------------------------------------------------------------- the systems table

@dataclasses.dataclass(frozen=True)
class System:
    """One row of the comparison: what runs, how it is launched, which rails it must use.

    backend      the OSU worker's --backend (nezha | mpi | gloo); every worker is started by
                 Open MPI's mpirun inside the lab (Lab.run), one rank per host; MPI itself stays
                 on the unshaped mgmt network unless the system *is* MPI (then its BTL gets `rails`).
    rails        "rail0", "rail1", ... or "all": the rails the system is configured for and must be
                 seen using in the byte counters (placement check).
    env          extra environment of every rank ({ifnames} is replaced by e.g. "rail0,rail1").
    mca          extra Open MPI parameters (key, value); a callable(lab) may return more.
    mptcp        run under LD_PRELOAD=libnzmptcp.so with MPTCP endpoints on the other rails;
                 the application is given `rails` but its traffic must appear on every rail.
    collectives  which collectives the row applies to.
    when         "always", "unequal" (only when the rails' rates differ), "multi" (>= 2 rails),
                 "ina" (the lab runs an INA service: `nezha bench compare --ina RAIL`) or
                 "named" (>= 2 rails, and only when named in --systems: an experiment).
    env values may name {ifnames} (the system's rails) and {tcp_ifnames} (those without INA).
    """

    name: str
    label: str
    backend: str
    rails: str
    env: tuple = ()
    mca: object = ()
    mptcp: bool = False
    collectives: tuple = COLLECTIVES
    when: str = "always"
    family: str = ""

    @property
    def fam(self):
        """Colour family in the plots."""
        return self.family or ("mptcp" if self.mptcp else self.backend)


def _mpi_bandwidths(lab):
    """btl_tcp_bandwidth_<if> = the rail's rate in Mbit/s (what a tuned MPI user sets by hand)."""
    return tuple((f"btl_tcp_bandwidth_rail{r}", str(round(bps / 1e6)))
                 for r, bps in enumerate(lab.spec.rates))


MPI_RING = (("coll_tuned_use_dynamic_rules", "1"), ("coll_tuned_allreduce_algorithm", "4"))

SYSTEMS = [
    System("nezha-rail0", "nezha on rail0 only", "nezha", "rail0",
           env=(("NEZHA_SOCKET_IFNAME", "rail0"),)),
    System("nezha-rail1", "nezha on rail1 only", "nezha", "rail1",
           env=(("NEZHA_SOCKET_IFNAME", "rail1"),)),
    System("nezha-all", "nezha on all rails", "nezha", "all",
           env=(("NEZHA_SOCKET_IFNAME", "{ifnames}"),), when="multi"),
    System("nezha-all-equal", "nezha on all rails, static equal split (NEZHA_SPLIT=equal)",
           "nezha", "all", env=(("NEZHA_SOCKET_IFNAME", "{ifnames}"), ("NEZHA_SPLIT", "equal")),
           collectives=("allreduce",), when="unequal"),
    System("nezha-all-zc", "nezha on all rails, zero-copy TCP sends (NEZHA_ZEROCOPY=on)",
           "nezha", "all", env=(("NEZHA_SOCKET_IFNAME", "{ifnames}"), ("NEZHA_ZEROCOPY", "on")),
           when="named"),
    System("nezha-all-zc16k", "nezha on all rails, zero-copy TCP sends from 16 KiB "
           "(NEZHA_ZEROCOPY=on, NEZHA_ZEROCOPY_MIN=16k: more of a pipeline's pieces qualify)",
           "nezha", "all", env=(("NEZHA_SOCKET_IFNAME", "{ifnames}"), ("NEZHA_ZEROCOPY", "on"),
                                ("NEZHA_ZEROCOPY_MIN", "16k")), when="named"),
    # experiments (session 28, docs/results/session28/band-400-100): a forced algorithm, and
    # NEZHA_MIN_RAIL_PIECE=1k (every rail whose piece is >= 1 KiB: both rails from 4 KiB on
    # 400 + 100) or =inf (one rail), to price the model's candidates against the lab
    System("nezha-all-rd", "nezha on all rails, NEZHA_ALGO=rd", "nezha", "all",
           env=(("NEZHA_SOCKET_IFNAME", "{ifnames}"), ("NEZHA_ALGO", "rd")), when="named"),
    System("nezha-all-rab1", "nezha, NEZHA_ALGO=rab on one rail (NEZHA_MIN_RAIL_PIECE=inf)",
           "nezha", "all", env=(("NEZHA_SOCKET_IFNAME", "{ifnames}"), ("NEZHA_ALGO", "rab"),
                                ("NEZHA_MIN_RAIL_PIECE", "inf")),
           collectives=("allreduce",), when="named"),
    System("nezha-all-rab2", "nezha, NEZHA_ALGO=rab on both rails (NEZHA_MIN_RAIL_PIECE=1k)",
           "nezha", "all", env=(("NEZHA_SOCKET_IFNAME", "{ifnames}"), ("NEZHA_ALGO", "rab"),
                                ("NEZHA_MIN_RAIL_PIECE", "1k")),
           collectives=("allreduce",), when="named"),
    System("nezha-all-1r", "nezha on all rails, split plans on one rail (NEZHA_MIN_RAIL_PIECE=inf)",
           "nezha", "all", env=(("NEZHA_SOCKET_IFNAME", "{ifnames}"), ("NEZHA_MIN_RAIL_PIECE", "inf")),
           when="named"),
    System("nezha-all-2r", "nezha on all rails, split plans on both (NEZHA_MIN_RAIL_PIECE=1k)",
           "nezha", "all", env=(("NEZHA_SOCKET_IFNAME", "{ifnames}"), ("NEZHA_MIN_RAIL_PIECE", "1k")),
           when="named"),
    # session 29 (h42, docs/results/session29/allgather-small): allgather's candidates forced
    System("nezha-all-ring", "nezha on all rails, NEZHA_ALGO=ring", "nezha", "all",
           env=(("NEZHA_SOCKET_IFNAME", "{ifnames}"), ("NEZHA_ALGO", "ring")), when="named"),
    System("nezha-all-direct", "nezha on all rails, NEZHA_ALGO=direct (allgather: every "
           "block straight to every rank, one step)", "nezha", "all",
           env=(("NEZHA_SOCKET_IFNAME", "{ifnames}"), ("NEZHA_ALGO", "direct")),
           collectives=("allgather",), when="named"),
    System("nezha-all-nofo", "nezha on all rails without failover (NEZHA_FAILOVER=n: no vote)",
           "nezha", "all", env=(("NEZHA_SOCKET_IFNAME", "{ifnames}"), ("NEZHA_FAILOVER", "n")),
           collectives=("allreduce",), when="multi"),
    System("gloo-rail0", "torch.distributed Gloo, GLOO_SOCKET_IFNAME=rail0", "gloo", "rail0"),
    System("gloo-all", "Gloo, GLOO_SOCKET_IFNAME=all rails (one device per rail, whole "
           "operations rotate over devices)", "gloo", "all", when="multi"),
    System("mpi-rail0", "Open MPI TCP BTL on rail0, default algorithm", "mpi", "rail0"),
    System("mpi-rail0-ring", "Open MPI TCP BTL on rail0, ring allreduce forced", "mpi", "rail0",
           mca=MPI_RING, collectives=("allreduce",)),
    # session 29 (h42): Open MPI's allgather algorithms forced on rail0 (coll_tuned
    # allgather_algorithm 2 bruck, 3 recursive doubling, 4 ring, 5 neighbor exchange)
    *[System(f"mpi-rail0-ag{n}", f"Open MPI on rail0, allgather algorithm {n} ({what}) forced",
             "mpi", "rail0", mca=(("coll_tuned_use_dynamic_rules", "1"),
                                  ("coll_tuned_allgather_algorithm", str(n))),
             collectives=("allgather",), when="named")
      for n, what in ((2, "bruck"), (3, "recursive doubling"), (4, "ring"),
                      (5, "neighbor exchange"))],
    System("mpi-all", "Open MPI TCP BTL on all rails (stripes large messages), default algorithm",
           "mpi", "all", when="multi"),
    System("mpi-all-ring", "Open MPI TCP BTL on all rails, ring allreduce forced", "mpi", "all",
           mca=MPI_RING, collectives=("allreduce",), when="multi"),
    System("mpi-all-tuned", "Open MPI on all rails, ring allreduce, btl_tcp_bandwidth_<rail> "
           "set by hand to the rail rates", "mpi", "all",
           mca=lambda lab: MPI_RING + _mpi_bandwidths(lab), when="unequal"),
    System("nezha-ina", "nezha: TCP on the rails without an INA service, plus the INA rail "
           "(allreduces, reduce_scatters and allgathers of 2 MiB and more split between them)",
           "nezha", "all",
           env=(("NEZHA_SOCKET_IFNAME", "{tcp_ifnames}"), ("NEZHA_RAILS", "tcp,shm,ina")),
           collectives=("allreduce", "reduce_scatter", "allgather"), when="ina", family="ina"),
    System("nezha-ina-small", "nezha-ina with NEZHA_INA_SMALL=on: every allreduce of one "
           "datagram (up to 1432 B) whole on the INA service, two hops (auto keeps them on TCP "
           "with one TCP rail: no failover to recover one)", "nezha", "all",
           env=(("NEZHA_SOCKET_IFNAME", "{tcp_ifnames}"), ("NEZHA_RAILS", "tcp,shm,ina"),
                ("NEZHA_INA_SMALL", "on")),
           collectives=("allreduce",), when="ina", family="ina"),
    System("gloo-mptcp", "Gloo on rail0 over kernel MPTCP (LD_PRELOAD shim), a subflow on every "
           "rail via signal endpoints", "gloo", "all", mptcp=True, when="multi"),
]
REFERENCE = "nezha-all"   # the nezha row every ratio is taken against


def system_rails(system, lab):
    """Rail indices a system must use in this lab."""
    if system.rails == "all":
        return list(range(lab.rails))
    return [int(system.rails[4:])]


def app_ifnames(system, lab):
    """The interface list the application itself is given (MPTCP: only rail0)."""
    return "rail0" if system.mptcp else ",".join(f"rail{r}" for r in system_rails(system, lab))


def applicable(system, lab, collective=None):
    """Does this row exist in this lab (and for this collective)?"""
    if system.rails != "all" and int(system.rails[4:]) >= lab.rails:
        return False
    if system.when in ("multi", "named") and lab.rails < 2:
        return False
    if system.when == "unequal" and len(set(lab.spec.rates)) < 2:
        return False
    if system.when == "ina" and not getattr(lab.spec, "ina", ()):
        return False  # needs the lab's INA service
    return collective is None or collective in system.collectives


def select_systems(lab, names=None):
    """The rows that run in this lab, in table order; names (list) restricts them."""
    known = {s.name for s in SYSTEMS}
    if names:
        bad = [n for n in names if n not in known]
        if bad:
            raise ValueError(f"unknown systems {bad}; known: {', '.join(sorted(known))}")
    return [s for s in SYSTEMS if applicable(s, lab) and (s.name in names if names else s.when != "named")]


# ---------------------------------------------------------------- commands

@dataclasses.dataclass
class Options:
    """How much to measure."""

    collectives: tuple = COLLECTIVES
    systems: tuple = ()                 # () = all applicable
    min_size: int = 4
    max_size: int = 64 << 20
    reps: int = 2                       # repetitions of allreduce
    reps_other: int = 1                 # repetitions of the other collectives
    time_budget: float = 0.05           # seconds per size and run (caps OSU iterations)
    max_minutes: float = 19.0           # skip repetitions that would end later than this
    run_timeout: float = 900.0
    min_share: float = 0.05             # a claimed rail must carry at least this share
    max_other_share: float = 0.02       # an unclaimed rail may carry at most this share
    validate: bool = False              # OSU -c (one extra checked call per size)
    latency_floor: bool = True
    lab_check: bool = True              # raw TCP ring streams at the lab's rates, each repetition
    lab_check_seconds: float = 3.0
    quick: bool = False


def fmt_size(n):
    """4 -> '4 B', 65536 -> '64 KiB', 1 << 20 -> '1 MiB'."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def size_range(collective, opts, nranks):
    """OSU -m MIN:MAX for a collective. Allgather's OSU size is per rank: cap it so that the
    gathered buffer stays within max_size (like the other collectives' buffers)."""
    hi = opts.max_size
    lo = opts.min_size
    if collective == "allgather":
        hi = max(lo, hi // nranks)
    return f"{lo}:{hi}"


def worker_cmd(system, collective, lab, opts, json_path, python=sys.executable):
    """(argv, env, mca) of one run of `system` for `collective`."""
    ifn = app_ifnames(system, lab)
    argv = [python, os.path.abspath(__file__), "--worker", OSU_SCRIPTS[collective],
            "--backend", system.backend, "-m", size_range(collective, opts, lab.hosts), "-f", "--bw",
            "--time-budget", str(opts.time_budget), "--json", json_path]
    if opts.validate:
        argv.append("-c")
    if system.backend == "gloo":
        argv += ["--gloo-addr", lab.mgmt_addr(0), "--gloo-ifname", ifn, "--timeout", "600"]
    env = {"PYTHONPATH": ROOT}
    ina = set(getattr(lab.spec, "ina", ()))
    tcp_ifn = ",".join(f"rail{r}" for r in system_rails(system, lab) if r not in ina)
    for k, v in system.env:
        env[k] = v.format(ifnames=ifn, tcp_ifnames=tcp_ifn)
    if system.backend != "nezha":
        env.setdefault("NEZHA_SOCKET_IFNAME", ifn)  # unused; keeps job_env's default honest
    mca = []
    if system.backend == "mpi":
        mca.append(("btl_tcp_if_include", ifn))
    extra = system.mca(lab) if callable(system.mca) else system.mca
    mca += list(extra)
    if system.mptcp:
        argv = ["env", f"LD_PRELOAD={ensure_shim()}"] + argv
    return argv, env, tuple(mca)


def latency_cmd(lab, opts, json_path, python=sys.executable):
    """Ping-pong (osu_latency, Open MPI TCP BTL on rail0, hosts 0 and 1): the one-way floor."""
    argv = [python, os.path.join(HERE, "osu_latency.py"), "--backend", "mpi", "-m", "0:4K", "-f",
            "--time-budget", str(max(0.1, opts.time_budget)), "--json", json_path]
    return argv, {"PYTHONPATH": ROOT}, (("btl_tcp_if_include", "rail0"),)


# ---------------------------------------------------------------- the MPTCP shim and endpoints

def ensure_shim():
    """build/libnzmptcp.so, compiled with gcc from bench/mptcp_shim.c when missing or stale."""
    if (not os.path.exists(SHIM_LIB)
            or os.path.getmtime(SHIM_LIB) < os.path.getmtime(SHIM_SRC)):
        os.makedirs(os.path.dirname(SHIM_LIB), exist_ok=True)
        tmp = f"{SHIM_LIB}.{os.getpid()}.tmp"
        cc = os.environ.get("CC", "gcc")
        cp = subprocess.run([cc, "-O2", "-Wall", "-shared", "-fPIC", "-o", tmp, SHIM_SRC, "-ldl"],
                            capture_output=True, text=True, check=False)
        if cp.returncode:
            raise RuntimeError(f"building the MPTCP shim failed ({cc}):\n{cp.stderr}")
        os.replace(tmp, SHIM_LIB)
    return SHIM_LIB


class Mptcp:
    """Kernel MPTCP in a lab (LAB.md §3): per host, net.mptcp.enabled=1, limits, and for each
    rail r >= 1 a `signal` endpoint with its own port (the kernel's own join listener, needed
    because Gloo binds its listener to the rail0 address). up() and down() undo each other."""

    def __init__(self, lab, base_port=MPTCP_BASE_PORT):
        self.lab = lab
        self.base_port = base_port
        self.saved = {}      # host -> (sysctl value, (subflows, add_addr_accepted))
        self.added = {}      # host -> [(endpoint id, addr, port)]
        self.before = {}     # host -> endpoint ids that existed before up() (not ours)

    def _ip(self, h, *args, check=True):
        return self.lab.exec(h, ["ip", *args], check=check)

    def up(self):
        """Enable MPTCP and add the endpoints on every host."""
        lab = self.lab
        try:
            for h in range(lab.hosts):
                en = lab.exec(h, ["sysctl", "-n", "net.mptcp.enabled"]).stdout.strip()
                lim = self._ip(h, "mptcp", "limits", "show").stdout
                sub = re.search(r"subflows (\d+)", lim)
                acc = re.search(r"add_addr_accepted (\d+)", lim)
                self.saved[h] = (en, (int(sub.group(1)) if sub else 0, int(acc.group(1)) if acc else 0))
                self.before[h] = self._ids(h)
                lab.exec(h, ["sysctl", "-q", "-w", "net.mptcp.enabled=1"])
                k = str(lab.rails)
                self._ip(h, "mptcp", "limits", "set", "subflow", k, "add_addr_accepted", k)
                for r in range(1, lab.rails):
                    self.added.setdefault(h, []).append(self._add(h, r))
        except BaseException:
            self.down()
            raise
        return self

    def _add(self, h, r):
        """Add host h's rail-r signal endpoint; a port still in TIME_WAIT after an earlier
        flush fails with EADDRINUSE (-98), so try further ports."""
        addr = self.lab.addr(h, r)
        err = ""
        for k in range(32):
            port = self.base_port + 16 * k + r
            cp = self._ip(h, "mptcp", "endpoint", "add", addr, "dev", f"rail{r}", "signal",
                          "port", str(port), check=False)
            if cp.returncode == 0:
                show = self._ip(h, "mptcp", "endpoint", "show").stdout
                m = re.search(rf"^{re.escape(addr)} port {port} id (\d+)", show, re.MULTILINE)
                return (int(m.group(1)) if m else None, addr, port)
            err = cp.stderr.strip()
        raise RuntimeError(f"cannot add MPTCP endpoint {addr} on {self.lab.host_ns(h)}: {err}")

    def _ids(self, h):
        """Endpoint ids on host h now."""
        show = self._ip(h, "mptcp", "endpoint", "show", check=False).stdout
        return {int(x) for x in re.findall(r"\bid (\d+)", show)}

    def down(self):
        """Remove our endpoints and the implicit ones the kernel added for our subflows
        (flag 0x10), restore limits and the sysctl. Endpoints that existed before stay."""
        for h in sorted(set(self.added) | set(self.before)):
            ours = {eid for eid, _, _ in self.added.get(h, []) if eid is not None}
            for eid in sorted(ours | (self._ids(h) - self.before.get(h, set()))):
                self._ip(h, "mptcp", "endpoint", "delete", "id", str(eid), check=False)
            self.added.pop(h, None)
            self.before.pop(h, None)
        for h, (en, (sub, acc)) in list(self.saved.items()):
            self._ip(h, "mptcp", "limits", "set", "subflow", str(sub), "add_addr_accepted", str(acc),
                     check=False)
            if en:
                self.lab.exec(h, ["sysctl", "-q", "-w", f"net.mptcp.enabled={en}"], check=False)
            self.saved.pop(h, None)

    def endpoints(self):
        """{host: endpoint lines} as the kernel shows them now."""
        return {h: self._ip(h, "mptcp", "endpoint", "show", check=False).stdout.strip()
                for h in range(self.lab.hosts)}

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()


def mptcp_stats(lab):
    """Sum over hosts of the MPTcpExt counters that show joins ({name: value})."""
    total = {}
    for h in range(lab.hosts):
        cp = lab.exec(h, ["cat", "/proc/net/netstat"], check=False)
        lines = [ln.split() for ln in cp.stdout.splitlines() if ln.startswith("MPTcpExt:")]
        if len(lines) >= 2:
            for k, v in zip(lines[0][1:], lines[1][1:]):
                if k.startswith(("MPJoin", "MPCapable", "AddAddr")):
                    total[k] = total.get(k, 0) + int(v)
    return total


# ---------------------------------------------------------------- counters and placement

def read_counters(lab):
    """{'rails': {'h<i>': {'rail<r>': [tx, rx]}}, 'mgmt': {'h<i>': [tx, rx]}} right now."""
    rails = {}
    for (h, r), (tx, rx) in sorted(lab.counters().items()):
        rails.setdefault(f"h{h}", {})[f"rail{r}"] = [tx, rx]
    mgmt = {}
    if lab.spec.mgmt:
        for h in range(lab.hosts):
            cp = lab.exec(h, ["ip", "-j", "-s", "link", "show", "mgmt"], check=False)
            try:
                st = json.loads(cp.stdout)[0]["stats64"]
                mgmt[f"h{h}"] = [st["tx"]["bytes"], st["rx"]["bytes"]]
            except (ValueError, LookupError):
                pass
    return {"rails": rails, "mgmt": mgmt}


def tx_delta(before, after):
    """Bytes sent per rail (summed over hosts) and over mgmt between two read_counters()."""
    per_rail = {}
    for h, rails in after["rails"].items():
        for rail, (tx, _) in rails.items():
            per_rail[rail] = per_rail.get(rail, 0) + tx - before["rails"].get(h, {}).get(rail, [0, 0])[0]
    mgmt = sum(tx - before["mgmt"].get(h, [0, 0])[0] for h, (tx, _) in after["mgmt"].items())
    return per_rail, mgmt


def wire_bytes(collective, nbytes, nranks):
    """Lower bound of the bytes all ranks together must send for one call (no in-network
    reduction): allreduce 2(n-1)S, the others (n-1)S (S = the OSU json's nbytes)."""
    return (2 if collective == "allreduce" else 1) * (nranks - 1) * nbytes


def expected_bytes(collective, doc, validate=False):
    """Lower bound of the rail bytes a worker's run must have sent (all its calls)."""
    n = doc.get("ranks", 1)
    total = 0
    for r in doc.get("results", []):
        # warmup counts both probe calls; _plan_early_stop may have skipped one: count it out
        calls = r["iterations"] + r["warmup"] - 1 + (1 if validate else 0)
        total += calls * wire_bytes(collective, r["nbytes"], n)
    return total


SPREAD_MIN_SIZE = 1 << 20   # multi-rail systems may keep smaller messages on one rail


def placement(system_rails_, per_rail, mgmt_tx, expected, min_share=0.05, max_other_share=0.02,
              largest=None):
    """Did the run send its bytes where it claims? Returns a dict with ok and the reasons.

    Every run: the rail bytes reach half the collective's lower bound (nothing went over mgmt),
    and an unclaimed rail carries at most max(1 MiB, max_other_share of the total). A single-rail
    claim: that rail carries the bulk. A multi-rail claim, when the run had messages of at least
    SPREAD_MIN_SIZE (largest): each claimed rail carries at least min_share (small messages
    legitimately stay on one rail: Open MPI and nezha do not split them)."""
    total = sum(per_rail.values())
    share = {k: (v / total if total else 0.0) for k, v in per_rail.items()}
    claimed = [f"rail{r}" for r in system_rails_]
    why = []
    # The bytes must be on the rails at all (not on mgmt, not missing): at least half of the
    # lower bound (the OSU JSON's calls x bytes; a generous margin for counting differences).
    if expected and total < 0.5 * expected:
        why.append(f"rails carried {total} B, expected >= {expected} B "
                   f"(mgmt carried {mgmt_tx} B)")
    spread = len(claimed) > 1 and (largest is None or largest >= SPREAD_MIN_SIZE)
    for rail in claimed if (spread or len(claimed) == 1) else ():
        if share.get(rail, 0.0) < (min_share if len(claimed) > 1 else 0.5):
            why.append(f"{rail} carried only {100 * share.get(rail, 0.0):.1f}% (claimed)")
    slack = 1 << 20  # control traffic (ARP, the odd retransmit, setup) on an unclaimed rail
    for rail, v in per_rail.items():
        if rail not in claimed and v > max(slack, max_other_share * total):
            why.append(f"{rail} carried {v} B = {100 * share[rail]:.1f}% but was not claimed")
    return {"ok": not why, "why": why, "tx_bytes": per_rail, "share": share, "mgmt_tx_bytes": mgmt_tx,
            "expected_min_bytes": expected, "claimed": claimed, "spread_checked": spread}


# ---------------------------------------------------------------- running

def _python_error(text):
    """Last Python exception line in a job's output, else its last line."""
    found = re.findall(r"^(?:\[\d+\] )?(?:[\w.]+(?:Error|Exception|Exit)\b.*)$", text, re.MULTILINE)
    return found[-1] if found else (text.strip().splitlines() or ["no output"])[-1]


def _clean_out(text):
    """A job's output without nezha's env warnings (they repeat once per rank)."""
    return "\n".join(ln for ln in text.splitlines() if "NEZHA WARN ENV" not in ln
                     and "hostname of the client socket" not in ln)


def run_system(lab, system, collective, opts, tmpdir, rep=0, order=0, log=None):
    """One worker run of one system: counters before/after, the OSU JSON, the placement proof."""
    path = os.path.join(tmpdir, f"{rep}-{collective}-{system.name}.json")
    if os.path.exists(path):
        os.unlink(path)
    argv, env, mca = worker_cmd(system, collective, lab, opts, path)
    rec = {"system": system.name, "collective": collective, "rep": rep, "order": order,
           "argv": argv, "env": env, "mca": [list(x) for x in mca],
           "launch": "mpirun in the lab (Lab.run), one rank per host",
           "claimed_rails": [f"rail{r}" for r in system_rails(system, lab)],
           "loadavg_before": os.getloadavg()[0]}
    mp0 = mptcp_stats(lab) if system.mptcp else None
    c0 = read_counters(lab)
    t0 = time.monotonic()
    res = lab.run(argv, np=lab.hosts, env=env, mca=mca, timeout=opts.run_timeout, capture=True)
    rec["wall_s"] = time.monotonic() - t0
    c1 = read_counters(lab)
    rec.update(counters_before=c0, counters_after=c1, returncode=res.returncode,
               timed_out=res.timed_out, stdout=_clean_out(res.stdout),
               loadavg_after=os.getloadavg()[0])
    if system.mptcp:
        mp1 = mptcp_stats(lab)
        rec["mptcp_counters"] = {k: mp1.get(k, 0) - mp0.get(k, 0) for k in mp1}
    doc = None
    if res.returncode == 0 and os.path.exists(path):
        with open(path) as f:
            doc = json.load(f)
    else:
        out = _clean_out(res.stdout + "\n" + res.stderr)
        rec["error"] = (f"timed out after {opts.run_timeout:g} s" if res.timed_out else
                        f"exit {res.returncode}: {_python_error(out)}")
        rec["stderr_tail"] = out.splitlines()[-40:]
    rec["doc"] = doc
    per_rail, mgmt = tx_delta(c0, c1)
    exp = expected_bytes(collective, doc, opts.validate) if doc else 0
    largest = max((r["size"] for r in doc["results"]), default=0) if doc else None
    rec["placement"] = placement(system_rails(system, lab), per_rail, mgmt, exp,
                                 opts.min_share, opts.max_other_share, largest)
    if log:
        pl = rec["placement"]
        split = " ".join(f"{k}={100 * v:.0f}%" for k, v in sorted(pl["share"].items()))
        state = "ok" if pl["ok"] else "WRONG RAILS: " + "; ".join(pl["why"])
        log(f"rep {rep + 1} {collective:<14} {system.name:<15} {rec['wall_s']:6.1f} s  "
            f"tx {sum(per_rail.values()) / 1e6:8.1f} MB [{split}] mgmt {mgmt / 1e6:.2f} MB  "
            + (f"FAILED: {rec['error']}" if "error" in rec else state))
    return rec


def run_latency_floor(lab, opts, tmpdir, rep=0, log=None):
    """The ping-pong run (hosts 0 and 1 over rail0); returns its record."""
    path = os.path.join(tmpdir, f"{rep}-latency.json")
    argv, env, mca = latency_cmd(lab, opts, path)
    c0 = read_counters(lab)
    t0 = time.monotonic()
    res = lab.run(argv, np=2, env=env, mca=mca, timeout=300, capture=True)
    c1 = read_counters(lab)
    rec = {"system": "pingpong-rail0", "rep": rep, "argv": argv, "mca": [list(x) for x in mca],
           "returncode": res.returncode, "wall_s": time.monotonic() - t0,
           "counters_before": c0, "counters_after": c1, "doc": None}
    if res.returncode == 0 and os.path.exists(path):
        with open(path) as f:
            rec["doc"] = json.load(f)
    else:
        rec["error"] = f"exit {res.returncode}: {_python_error(res.stdout + res.stderr)}"
    if log:
        fl = floor_us([rec])
        log(f"rep {rep + 1} latency floor (ping-pong, rail0)  {rec['wall_s']:5.1f} s  "
            + (f"{fl:.1f} us one-way" if fl else f"FAILED: {rec.get('error')}"))
    return rec


LAB_REACHES_PCT = 95.0   # the lab "reaches" a rate when its raw TCP ring holds this much of it


def run_lab_check(lab, opts, rep=0, log=None):
    """Raw TCP at the lab's rates (the ring of `nezha lab check`): every host sends to its
    successor on every rail at once, a multi-rail ring's traffic with no collective stack;
    each stream's goodput as % of its rail's rate. Tells whether the lab itself reaches the
    rate in this run (LAB.md: at 1600 Mbit/s the 2 CPUs are nearly the bottleneck)."""
    from nezha.lab.launch import stream_test
    ring = [(h, (h + 1) % lab.hosts, r) for h in range(lab.hosts) for r in range(lab.rails)]
    rec = {"rep": rep, "streams": [list(f) for f in ring], "seconds": opts.lab_check_seconds,
           "how": "nezha.lab.launch.stream_test: plain TCP sockets, host i -> i+1 on every rail "
                  "at once, 1 s warm-up"}
    t0 = time.monotonic()
    try:
        got, busy, own = stream_test(lab, ring, 1.0, opts.lab_check_seconds)
        pct = [100 * g / lab.spec.rates[r] for g, (_, _, r) in zip(got, ring)]
        rec.update(pct=pct, min_pct=min(pct), median_pct=statistics.median(pct),
                   rail_min_pct={f"rail{r}": min(p for p, f in zip(pct, ring) if f[2] == r)
                                 for r in range(lab.rails)},
                   cpu_busy_pct=busy, streams_cpu_pct=own)
    except Exception as e:  # noqa: BLE001 - a failed check is reported, the suite goes on
        rec["error"] = f"{type(e).__name__}: {e}"
    rec["wall_s"] = time.monotonic() - t0
    if log:
        log(f"rep {rep + 1} lab raw TCP ring ({len(ring)} streams)  {rec['wall_s']:5.1f} s  "
            + (f"min {rec['min_pct']:.1f}% median {rec['median_pct']:.1f}% of the rate, "
               f"CPU busy {rec['cpu_busy_pct']:.0f}%" if "error" not in rec
               else f"FAILED: {rec['error']}"))
    return rec


def lab_reach(checks):
    """The lab check's verdict over the repetitions: median of each run's weakest stream, and
    whether that is >= LAB_REACHES_PCT (None when no check ran)."""
    mins = [c["min_pct"] for c in checks if "min_pct" in c]
    if not mins:
        return {"min_pct": None, "reaches": None, "threshold_pct": LAB_REACHES_PCT}
    m = statistics.median(mins)
    return {"min_pct": m, "reaches": m >= LAB_REACHES_PCT, "threshold_pct": LAB_REACHES_PCT,
            "runs": len(mins)}


def floor_us(latency_runs):
    """One-way latency floor: the smallest per-run average at the smallest size (0 B)."""
    vals = []
    for rec in latency_runs:
        res = (rec.get("doc") or {}).get("results") or []
        if res:
            vals.append(min(res, key=lambda r: r["size"])["avg_us"])
    return min(vals) if vals else None


def run_suite(lab, opts, out_dir, command="", log=print):
    """Run every applicable system for every collective, interleaved: in each repetition every
    system runs once per collective, in an order rotated by one each repetition. Allreduce gets
    opts.reps repetitions, the other collectives opts.reps_other; a repetition is skipped when the
    durations measured in the previous one say it would end after opts.max_minutes. Writes the
    outputs and returns the document."""
    systems = select_systems(lab, list(opts.systems) or None)
    t_start = time.monotonic()
    started = datetime.datetime.now().astimezone()
    runs, lat_runs, checks, failed, reps_done = [], [], [], {}, 0
    mptcp = Mptcp(lab) if any(s.mptcp for s in systems) else None
    mptcp_info = {}
    log(f"# nezha bench compare: lab {lab.name} ({lab.hosts} hosts x {lab.rails} rails at "
        f"{', '.join(_rate_text(b) for b in lab.spec.rates)}), systems: "
        f"{', '.join(s.name for s in systems)}; collectives: {', '.join(opts.collectives)}")
    tree = code_tree()
    log(f"# code: nezha{_tree_text(tree)}")
    with tempfile.TemporaryDirectory(prefix="nezha-compare-") as tmpdir:
        try:
            if mptcp:
                ensure_shim()
                mptcp.up()
                mptcp_info = {"endpoints": mptcp.endpoints(), "shim": SHIM_LIB}
            durations = {}                     # (system, collective) -> wall s of its last run
            for rep in range(max(opts.reps, opts.reps_other)):
                plan = [(c, [s for s in systems if c in s.collectives]) for c in opts.collectives
                        if rep < (opts.reps if c == "allreduce" else opts.reps_other)]
                if rep:
                    elapsed = time.monotonic() - t_start
                    need = sum(durations.get((s.name, c), 0.0) for c, rows in plan for s in rows)
                    if elapsed + need > opts.max_minutes * 60:
                        log(f"# stopping after {rep} repetition(s): the next one (~{need / 60:.1f} min) "
                            f"would end after {opts.max_minutes:g} min")
                        break
                if opts.latency_floor:
                    lat_runs.append(run_latency_floor(lab, opts, tmpdir, rep, log))
                if opts.lab_check:
                    checks.append(run_lab_check(lab, opts, rep, log))
                order = 0
                for coll, rows in plan:
                    k = rep % max(1, len(rows))
                    for s in rows[k:] + rows[:k]:      # rotate: nobody always goes first
                        if (s.name, coll) in failed:
                            continue                   # a failed system is not retried
                        rec = run_system(lab, s, coll, opts, tmpdir, rep, order, log)
                        durations[(s.name, coll)] = rec["wall_s"]
                        order += 1
                        runs.append(rec)
                        if "error" in rec:
                            failed[(s.name, coll)] = rec["error"]
                reps_done = rep + 1
        finally:
            if mptcp:
                mptcp.down()
                left = {h: e for h, e in mptcp.endpoints().items() if e}
                mptcp_info["endpoints_left_after"] = left
    wall = time.monotonic() - t_start
    doc = build_document(lab, systems, opts, runs, lat_runs, reps_done, wall, started, command,
                         mptcp_info, checks)
    write_outputs(doc, out_dir, log)
    return doc


# ---------------------------------------------------------------- summary

def _rate_text(bps):
    if bps % 1_000_000_000 == 0:
        return f"{bps // 1_000_000_000}gbit"
    if bps % 1_000_000 == 0:
        return f"{bps // 1_000_000}mbit"
    return f"{bps}bit"


def limit_gbps(lab_rates, rails):
    """Physical busbw limit in GB/s: the sum of the rates of the rails used."""
    return sum(lab_rates[r] for r in rails) / 8 / 1e9


CPU_HOW = ("the ranks' user + system CPU seconds (getrusage of each rank's process, all its "
           "threads) over the timed calls only (read around each call; warm-up, start-up and the "
           "barriers between calls excluded), divided by the GB (1e9 B) moved: ranks x timed calls "
           "x busbw bytes per rank (S x the nccl-tests factor); median over repetitions. "
           "cpu_loop_s_per_gb in the JSON counts the whole timed loop instead (the barriers "
           "between calls and what threads did meanwhile)")


def _median_of(rs, key):
    vals = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def loop_period_us(result):
    """Median time from one timed call's start to the next on rank 0 (the call plus the OSU
    loop's barrier), from rank_calls; None without them. Where a shaped link sets the pace
    (from ~4 KiB in the lab) every system's period is the link's time for its bytes, and the
    OSU row only says on which ranks the wait for the shaper's tokens fell (session 29)."""
    starts = ((result.get("rank_calls") or {}).get("start_us") or [[]])[0]
    if len(starts) < 3:
        return None
    return statistics.median(b - a for a, b in zip(starts, starts[1:]))


def summarize(doc_runs, systems_meta, nranks):
    """{collective: {system: [{size, nbytes, avg_us, busbw_gbps, reps, pct_limit, samples}]}}:
    per size, the median over repetitions of each run's OSU average latency."""
    table = {}
    for rec in doc_runs:
        if not rec.get("doc"):
            continue
        for r in rec["doc"]["results"]:
            table.setdefault(rec["collective"], {}).setdefault(rec["system"], {}) \
                 .setdefault(r["size"], []).append(r)
    out = {}
    for coll, per_sys in table.items():
        out[coll] = {}
        for name, per_size in per_sys.items():
            lim = systems_meta[name]["limit_gbps"]
            rows = []
            for size in sorted(per_size):
                rs = per_size[size]
                lat = statistics.median(r["avg_us"] for r in rs)
                bb = rs[0]["nbytes"] / (lat * 1e-6) / 1e9 * BUSBW_FACTORS[coll](nranks)
                rows.append({"size": size, "nbytes": rs[0]["nbytes"], "avg_us": lat,
                             "min_avg_us": min(r["avg_us"] for r in rs),
                             "max_avg_us": max(r["avg_us"] for r in rs),
                             "busbw_gbps": bb, "pct_limit": 100 * bb / lim if lim else None,
                             "reps": len(rs), "iterations": sum(r["iterations"] for r in rs),
                             "period_us": _median_of(
                                 [{"p": loop_period_us(r)} for r in rs], "p"),
                             "cpu_s_per_gb": _median_of(rs, "cpu_s_per_gb"),
                             "cpu_loop_s_per_gb": _median_of(rs, "cpu_loop_s_per_gb"),
                             "cpu_user_s": _median_of(rs, "cpu_user_s"),
                             "cpu_sys_s": _median_of(rs, "cpu_sys_s")})
            out[coll][name] = rows
    return out


def code_tree():
    """Which nezha tree this suite ran: ROOT (this file's, which every worker gets as
    PYTHONPATH) and its git commit. `python -m nezha` puts the current directory ahead of
    PYTHONPATH, so `cd /work/B && PYTHONPATH=/work/A python -m nezha bench compare` runs B's
    tree, not A's (session 27's A B B A compares ran one tree four times); recording the tree
    makes that visible. shadowed: PYTHONPATH's first entry when it is not ROOT."""
    def git(*args):
        try:
            return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    first = (os.environ.get("PYTHONPATH") or "").split(os.pathsep)[0]
    shadowed = (first if first and os.path.realpath(first) != os.path.realpath(ROOT) else None)
    return {"path": ROOT, "commit": git("rev-parse", "HEAD") or None,
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "pythonpath_first": first or None, "shadowed": shadowed}


def _nezha_defaults():
    from nezha.config import Config
    cfg = Config.load({})
    from nezha import costmodel
    from nezha.costmodel import CostModel
    import inspect

    from nezha.executor import Executor
    from nezha.planner import Planner
    piece = cfg["MIN_RAIL_PIECE"]  # None: auto (by the host layout: costmodel.auto_min_piece)
    return {"MIN_RAIL_PIECE": "auto" if piece is None else str(piece) if piece == math.inf
            else int(piece),
            "HOT_CAP": hasattr(CostModel, "_capped"),  # a hot split bounded by the prior
            # a COLD bucket's fast learning syncs count striped records only
            "LEARN_STRIPED": getattr(CostModel(1, ["rail0"]), "learn_striped", False),
            "SYNC_BYTES_MAX": getattr(costmodel, "SYNC_BYTES_MAX", costmodel.SYNC_BYTES),
            # small striped calls are lazy and do not feed the model (sim/benchloop.py)
            "LAZY_STRIPED": "lazy" in inspect.signature(Executor._feeds).parameters,
            # a slow rail's piece judged by time; the probe's rates as links' (session 25)
            "PIECE_BY_TIME": getattr(Planner, "piece_by_time", False),
            "PROBE_LINK_RATES": getattr(Planner, "probe_link_rates", False),
            # a second rail's slice priced in measured steps (session 26)
            "PIECE_BY_STEP": getattr(Planner, "piece_by_step", False),
            # a split moves by the modelled time it saves, not 1 % of the payload (session 27)
            "HYST_BY_TIME": getattr(CostModel(1, ["rail0"]), "hyst_by_time", False),
            # a bucket's cold call not learned from where the prior is measured (session 28)
            "SKIP_COLD": getattr(CostModel(1, ["rail0"]), "skip_cold", False)}


def build_document(lab, systems, opts, runs, lat_runs, reps, wall, started, command, mptcp_info,
                   lab_checks=()):
    """The JSON document: lab, systems, every run (samples + counters), the summary."""
    rates = list(lab.spec.rates)
    smeta = {}
    for s in systems:
        rails = system_rails(s, lab)
        smeta[s.name] = {"label": s.label, "backend": s.backend, "family": s.fam,
                         "rails": [f"rail{r}" for r in rails], "app_ifnames": app_ifnames(s, lab),
                         "mptcp": s.mptcp, "collectives": list(s.collectives),
                         "limit_gbps": limit_gbps(rates, rails)}
    verified = {}
    for rec in runs:
        v = verified.setdefault(rec["system"], {"runs": 0, "ok": 0, "failed": 0, "share": {}})
        v["runs"] += 1
        if "error" in rec:
            v["failed"] += 1
            continue
        v["ok"] += int(rec["placement"]["ok"])
        for rail, x in rec["placement"]["tx_bytes"].items():
            v["share"][rail] = v["share"].get(rail, 0) + x
    for v in verified.values():
        tot = sum(v["share"].values())
        v["share"] = {k: (x / tot if tot else 0.0) for k, x in v["share"].items()}
    for name, v in verified.items():
        smeta[name]["placement"] = v
    ok_runs = [r for r in runs if "error" not in r and r["placement"]["ok"]]
    reps_by_coll = {}
    for r in runs:
        reps_by_coll[r["collective"]] = max(reps_by_coll.get(r["collective"], 0), r["rep"] + 1)
    summary = summarize(ok_runs, smeta, lab.hosts)
    lat = floor_us(lat_runs)
    host = {"hostname": socket.gethostname(), "cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()}
    libs = {}
    for rec in runs:
        d = rec.get("doc")
        if d:
            libs.setdefault(rec["system"], d.get("library"))
    return {
        "suite": "nezha bench compare", "version": __version__, "command": command,
        "tree": code_tree(),
        "started": started.isoformat(timespec="seconds"), "wall_seconds": wall,
        "repetitions": reps, "repetitions_per_collective": reps_by_coll, "options": dataclasses.asdict(opts), "host": host,
        # the defaults nezha rows ran with where a replay needs them (nezha sim lab)
        "nezha_defaults": _nezha_defaults(),
        "lab": {"name": lab.name, "hosts": lab.hosts, "rails": lab.rails, "rates_bps": rates,
                "rates": [_rate_text(b) for b in rates], "mtu": lab.spec.mtu, "gso": lab.spec.gso,
                "burst_us": lab.spec.burst_us, "latency_ms": lab.spec.latency_ms,
                "mgmt": lab.spec.mgmt},
        "limits": {"busbw_all_gbps": limit_gbps(rates, range(lab.rails)),
                   "busbw_per_rail_gbps": [limit_gbps(rates, [r]) for r in range(lab.rails)],
                   "latency_floor_us": lat,
                   "latency_floor_how": "osu_latency.py ping-pong, Open MPI TCP BTL on rail0, "
                                        "hosts 0 and 1, one-way = RTT/2 at 0 B, min over repetitions",
                   "lab_raw_tcp": lab_reach(lab_checks)},
        "systems": smeta, "libraries": libs, "reference": REFERENCE, "mptcp": mptcp_info,
        "summary": summary,
        "runs": runs, "latency_runs": lat_runs, "lab_checks": list(lab_checks),
        "notes": "samples_us in runs[].doc.results[] are rank 0's per-iteration times; "
                 "counters_before/after are every host's rail (and mgmt) tx/rx bytes around the run; "
                 "cpu_s_per_gb = " + CPU_HOW,
    }


# ---------------------------------------------------------------- markdown

def _f(x, spec=".2f"):
    return "n/a" if x is None else format(x, spec)


def ratio_table(doc, coll, sizes=None):
    """Markdown rows: per size, the reference's latency and (baseline latency / reference latency)
    for each other system; > 1 means nezha is faster (= nezha busbw over the baseline's)."""
    summ = doc["summary"].get(coll, {})
    ref = {r["size"]: r for r in summ.get(doc["reference"], [])}
    others = [n for n in doc["systems"] if n != doc["reference"] and n in summ]
    head = ["Size", f"{doc['reference']} (µs)", "% of limit"] + [f"/ {n}" for n in others]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    base = {n: {r["size"]: r for r in summ[n]} for n in others}
    for size in sorted(ref):
        if sizes and size not in sizes:
            continue
        r = ref[size]
        cells = [fmt_size(size), _f(r["avg_us"], ".1f"), _f(r["pct_limit"], ".0f")]
        for n in others:
            b = base[n].get(size)
            cells.append(_f(b["avg_us"] / r["avg_us"], ".2f") if b else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def period_table(doc, coll, max_size=256 << 10):
    """Markdown rows: per size up to max_size, the reference's loop period (loop_period_us)
    and each other system's period over it (> 1: nezha's loop turns faster); [] without
    rank_calls."""
    summ = doc["summary"].get(coll, {})
    ref = {r["size"]: r for r in summ.get(doc["reference"], [])}
    others = [n for n in doc["systems"] if n != doc["reference"] and n in summ]
    base = {n: {r["size"]: r for r in summ[n]} for n in others}
    sizes = [z for z in sorted(ref) if z <= max_size and ref[z].get("period_us")]
    if not sizes:
        return []
    head = ["Size", f"{doc['reference']} period (µs)"] + [f"/ {n}" for n in others]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for size in sizes:
        r = ref[size]
        cells = [fmt_size(size), _f(r["period_us"], ".1f")]
        for n in others:
            b = base[n].get(size) or {}
            cells.append(_f(b["period_us"] / r["period_us"], ".2f") if b.get("period_us")
                         else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def cpu_table(doc, coll, sizes=None, min_size=0):
    """Markdown rows: per size and system, % of the system's limit and CPU s/GB moved (CPU_HOW);
    the lab's own raw TCP reach is in the lab lines."""
    summ = doc["summary"].get(coll, {})
    names = [n for n in doc["systems"] if n in summ]
    rows = {n: {r["size"]: r for r in summ[n]} for n in names}
    all_sizes = sorted({s for n in names for s in rows[n]})
    head = ["Size"] + [f"{n}: % of limit / CPU s/GB" for n in names]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for size in all_sizes:
        if (sizes and size not in sizes) or size < min_size:
            continue
        cells = [fmt_size(size)]
        for n in names:
            r = rows[n].get(size)
            cells.append(f"{_f(r['pct_limit'], '.1f')} / {_f(r.get('cpu_s_per_gb'), '.3f')}"
                         if r else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def osu_table(doc, coll, name):
    """OSU-style block for one system: size, avg latency, busbw, % of its physical limit."""
    meta = doc["systems"][name]
    rows = doc["summary"].get(coll, {}).get(name, [])
    lines = [f"# {name}: {meta['label']}",
             f"# {coll}, {doc['lab']['hosts']} ranks, rails {','.join(meta['rails'])}, limit "
             f"{meta['limit_gbps']:.4f} GB/s busbw; median over repetitions of OSU avg latency",
             f"{'# Size':<{SIZE_WIDTH}}{'Avg Latency(us)':>{FIELD_WIDTH}}{'busbw(GB/s)':>{FIELD_WIDTH}}"
             f"{'% of limit':>{FIELD_WIDTH}}{'Reps':>8}"]
    for r in rows:
        lines.append(f"{r['size']:<{SIZE_WIDTH}d}{r['avg_us']:>{FIELD_WIDTH}.2f}"
                     f"{r['busbw_gbps']:>{FIELD_WIDTH}.4f}{_f(r['pct_limit'], '.1f'):>{FIELD_WIDTH}}"
                     f"{r['reps']:>8d}")
    return lines


def _tree_text(tree):
    if not tree:
        return ""
    text = (f" from `{tree['path']}` (commit {(tree.get('commit') or '?')[:10]}"
            f"{', with uncommitted changes' if tree.get('dirty') else ''})")
    if tree.get("shadowed"):
        text += (f" — NOT the PYTHONPATH's `{tree['shadowed']}` (python -m puts the current "
                 f"directory first)")
    return text


def lab_lines(doc):
    """The lab configuration as markdown bullet lines."""
    lab = doc["lab"]
    lim = doc["limits"]
    return [
        f"- Lab: {lab['hosts']} hosts × {lab['rails']} rails ({', '.join(f'rail{r} {x}' for r, x in enumerate(lab['rates']))}), "
        f"one rank per host (network namespace), veth + Linux bridge per rail, `tbf` on both ends of "
        f"every rail link, MTU {lab['mtu']}, GSO {lab['gso']}, burst {lab['burst_us']} µs "
        f"(≥ one GSO packet), tbf latency {lab['latency_ms']:g} ms, unshaped mgmt network for "
        f"bootstrap only: {'yes' if lab['mgmt'] else 'no'}.",
        f"- Machine: `{doc['host']['hostname']}`, {doc['host']['cpus']} CPUs, kernel "
        f"{doc['host']['kernel']}, Python {doc['host']['python']}; nezha {doc['version']}"
        + _tree_text(doc.get("tree")) + ".",
        f"- Physical limit: busbw = sum of the rates of the rails used "
        f"({lim['busbw_all_gbps']:.4f} GB/s on all rails; per rail "
        f"{', '.join(f'{x:.4f}' for x in lim['busbw_per_rail_gbps'])} GB/s); one-way latency floor "
        f"{_f(lim['latency_floor_us'], '.1f')} µs ({lim['latency_floor_how']}).",
    ] + _lab_check_lines(doc)


def _lab_check_lines(doc):
    """The raw TCP check as a bullet line (none when the suite ran without it)."""
    reach = doc["limits"].get("lab_raw_tcp") or {}
    checks = doc.get("lab_checks") or []
    if not checks:
        return []
    if reach.get("min_pct") is None:
        return [f"- Raw TCP check of the lab: failed ({checks[0].get('error', 'no result')})."]
    per = "; ".join(f"rep {c['rep'] + 1}: min {c['min_pct']:.1f}%, median {c['median_pct']:.1f}%, "
                    f"CPU busy {c['cpu_busy_pct']:.0f}%" for c in checks if "min_pct" in c)
    return [f"- Raw TCP check of the lab (plain sockets, host i → i+1 on every rail at once, "
            f"{checks[0]['seconds']:g} s): weakest stream {reach['min_pct']:.1f}% of the rate "
            f"(median over repetitions; {per}); the lab itself "
            f"{'reaches' if reach['reaches'] else 'does NOT reach'} the rate "
            f"(≥ {reach['threshold_pct']:g}%)."]


def _when(doc):
    return doc["started"].replace("T", " ")


def _reps_text(doc):
    per = doc.get("repetitions_per_collective") or {}
    if len(set(per.values())) <= 1:
        return f"{doc['repetitions']} interleaved repetition(s)"
    return "interleaved repetitions: " + ", ".join(f"{c} ×{n}" for c, n in per.items())


def markdown(doc):
    """compare.md: everything a reader needs to judge the numbers."""
    o = doc["options"]
    lines = [f"# nezha comparison suite — {', '.join(doc['lab']['rates'])}", "",
             f"Generated by `{doc['command']}` on {_when(doc)}; {_reps_text(doc)}, "
             f"{doc['wall_seconds'] / 60:.1f} min wall time, time budget "
             f"{o['time_budget']:g} s per size and run.", ""]
    lines += lab_lines(doc)
    lines += ["- Latency = OSU average (µs; mean over ranks of each rank's mean over the timed "
              "iterations), median over repetitions. busbw = S/t × nccl-tests factor (GB = 1e9). "
              "Allgather sizes are per rank (OSU), capped so the gathered buffer ≤ max size.",
              "- Sizes ≲ 100 KB can exceed the limit: after an idle gap a full tbf bucket "
              "(≈ 88 KB) passes unshaped (LAB.md caveat 1). Sizes ≥ 1 MiB are clean.", ""]
    lines += ["## Systems and where their bytes went", "",
              "Share of all rail tx bytes over the system's runs (host counters before/after each run). "
              "A run counts only if its bytes were on the rails it claims (unclaimed rail ≤ "
              f"{100 * o['max_other_share']:g}%, each claimed rail ≥ {100 * o['min_share']:g}%, "
              "rail bytes ≥ half the collective's lower bound, so nothing went over mgmt).", "",
              "| system | what | rails | library | runs ok / placement ok | tx share per rail |",
              "|---|---|---|---|---|---|"]
    for name, m in doc["systems"].items():
        p = m.get("placement", {"runs": 0, "ok": 0, "failed": 0, "share": {}})
        share = ", ".join(f"{k} {100 * v:.1f}%" for k, v in sorted(p["share"].items()))
        lines.append(f"| {name} | {m['label']} | {','.join(m['rails'])} | "
                     f"{doc['libraries'].get(name) or 'n/a'} | "
                     f"{p['runs'] - p['failed']}/{p['runs']} ran, {p['ok']} on the claimed rails | {share} |")
    fails = [r for r in doc["runs"] if "error" in r or not r["placement"]["ok"]]
    if fails:
        lines += ["", "**Problems:**", ""]
        for r in fails:
            why = r.get("error") or "; ".join(r["placement"]["why"])
            lines.append(f"- rep {r['rep'] + 1} {r['collective']} {r['system']}: {why}")
    lines += _zerocopy_lines(doc)
    if doc.get("mptcp"):
        mp = [r for r in doc["runs"] if r.get("mptcp_counters")]
        joins = sum(r["mptcp_counters"].get("MPJoinAckRx", 0) + r["mptcp_counters"].get("MPJoinSynAckRx", 0)
                    for r in mp)
        lines += ["", f"MPTCP: endpoints {json.dumps(doc['mptcp'].get('endpoints', {}))}; "
                  f"{joins} subflow joins counted (MPJoinAckRx + MPJoinSynAckRx) over the MPTCP runs; "
                  f"endpoints left after the suite: {doc['mptcp'].get('endpoints_left_after') or 'none'}."]
    for coll in doc["options"]["collectives"]:
        if coll not in doc["summary"]:
            continue
        lines += ["", f"## {coll}: baseline latency / {doc['reference']} latency (> 1: nezha faster)", ""]
        lines += ratio_table(doc, coll)
        lines += ["", f"![busbw]({'busbw_' + coll}.png) ![latency]({'latency_' + coll}.png)"]
        period = period_table(doc, coll)
        if period:
            lines += ["", f"Loop period up to 256 KiB: median start-to-start of rank 0's timed "
                      "calls (call + barrier), baseline / nezha. Where a shaped link sets the "
                      "pace, every system's period is the link's time for its bytes and the "
                      "row above says only which ranks waited for the shaper.", ""]
            lines += period

    for coll in doc["options"]["collectives"]:
        if coll not in doc["summary"]:
            continue
        lines += ["", f"## {coll}: % of the limit and CPU seconds per GB moved", "",
                  f"CPU s/GB = {CPU_HOW}. Lower is better.", ""]
        lines += cpu_table(doc, coll)
    lines += ["", "## OSU-style tables per system", ""]
    for coll in doc["options"]["collectives"]:
        for name in doc["systems"]:
            if name in doc["summary"].get(coll, {}):
                lines += ["```"] + osu_table(doc, coll, name) + ["```", ""]
    return "\n".join(lines) + "\n"


def _zerocopy_lines(doc):
    """Per system with NEZHA_ZEROCOPY=on: rank 0's zero-copy counters summed over its runs
    (did the kernel take the pages, or copy anyway: loopback and veth copy at delivery)."""
    tot = {}
    for r in doc["runs"]:
        st = (r.get("doc") or {}).get("stats") or {}
        z = st.get("zerocopy")
        if z:
            t = tot.setdefault(r["system"], dict.fromkeys(list(z) + ["sent"], 0))
            for k, v in z.items():
                t[k] = t.get(k, 0) + v
            t["sent"] += sum(x.get("bytes_sent", 0) for x in (st.get("rails") or {}).values())
    return ["", "Zero-copy (rank 0, all runs): " + "; ".join(
        f"{name}: {t['sends']} sends ({t['bytes'] / 1e9:.2f} of {t['sent'] / 1e9:.2f} GB sent) "
        f"without a copy, of which the "
        f"kernel copied {t['copied']} at delivery; {t['nobufs']} ENOBUFS and {t['full']} "
        f"table-full fallbacks, {t['in_flight']} left in flight" for name, t in tot.items())
        ] if tot else []


README_SIZES = (4, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20)


def readme_section(doc, out_rel):
    """results.md: the README's results section for this lab configuration."""
    lines = [f"### Results: {', '.join(doc['lab']['rates'])} rails", "",
             f"Produced by `{doc['command']}` on {_when(doc)} ({doc['wall_seconds'] / 60:.1f} min, "
             f"{_reps_text(doc)}); full tables, placement proof and every "
             f"sample in `{out_rel}/compare.md` and `{out_rel}/compare.json`.", ""]
    lines += lab_lines(doc)
    lines += ["", f"Allreduce, baseline latency / {doc['reference']} latency (> 1: nezha faster):", ""]
    lines += ratio_table(doc, "allreduce", README_SIZES)
    lines += ["", "Allreduce from 1 MiB: % of the limit / CPU seconds per GB moved (lower is "
              f"better; {CPU_HOW}):", ""]
    lines += cpu_table(doc, "allreduce", min_size=1 << 20)
    lines += ["", f"![allreduce busbw]({out_rel}/busbw_allreduce.png)",
              f"![allreduce latency]({out_rel}/latency_allreduce.png)", ""]
    return "\n".join(lines)


def write_outputs(doc, out_dir, log=print):
    """compare.json, compare.md, results.md and the PNGs."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "compare.json"), "w") as f:
        json.dump(doc, f, indent=1, default=str)
    with open(os.path.join(out_dir, "compare.md"), "w") as f:
        f.write(markdown(doc))
    rel = os.path.relpath(out_dir, ROOT)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(readme_section(doc, rel))
    pngs = []
    try:
        import plot_compare
        pngs = plot_compare.plot(doc, out_dir)
    except Exception as e:  # noqa: BLE001 - the tables are still worth having
        log(f"# plots failed: {e!r}")
    log(f"# wrote {out_dir}/compare.json, compare.md, results.md" +
        (f" and {len(pngs)} PNGs" if pngs else ""))


# ---------------------------------------------------------------- worker (one rank)

_ITER_MULTIPLE = 1   # set by worker(): the number of Gloo devices


def _plan_early_stop(world, step, barrier, iterations, warmup, budget):
    """_common.plan, except that the second probe call is skipped once the first one alone
    took longer than the budget (all ranks agree): it could only confirm "1 iteration", and at
    64 MiB on a 100 Mbit rail a call takes seconds. Keeps the full suite within its time."""
    import math

    import _common
    if not budget:
        return iterations, warmup
    MPI = _common._mpi()
    best, calls = math.inf, 0
    for _ in range(_common.PROBE_CALLS):
        barrier()
        t0 = time.perf_counter()
        step()
        barrier()
        best = min(best, time.perf_counter() - t0)
        calls += 1
        if world.allreduce(best, op=MPI.MAX) > budget:
            break
    probe = world.allreduce(best, op=MPI.MAX)
    iters = max(1, min(iterations, int(budget / probe)))
    # Gloo with D devices: a multiple of D timed calls, so that each device (rail) is timed
    # equally often and the OSU average is the mean over devices (LAB.md: bimodal, use the mean).
    iters = -(-iters // _ITER_MULTIPLE) * _ITER_MULTIPLE
    # Note: run_benchmark reports warm-up = warm + PROBE_CALLS, so a size whose second probe
    # was skipped reports one warm-up call more than it made (expected_bytes allows for it).
    return iters, max(0, min(warmup, max(1, iters // 10)) - calls)


def worker(argv):
    """Run one OSU script as this rank (argv = SCRIPT ARGS...). For Gloo with D devices, each
    barrier of the OSU loop is issued D times: Gloo assigns whole operations to its devices
    round-robin, so "collective, barrier, collective, ..." would put every timed collective on
    the same device (rail); with D barriers the timed collectives rotate over all D devices."""
    script = argv[0] if os.path.isabs(argv[0]) else os.path.join(HERE, argv[0])
    args = argv[1:]
    ndev = 1
    if "--backend" in args and args[args.index("--backend") + 1] == "gloo" and "--gloo-ifname" in args:
        ndev = len([x for x in args[args.index("--gloo-ifname") + 1].split(",") if x])
    if ndev > 1:
        import _backends
        one = _backends.GlooBackend.barrier

        def barrier(self, _one=one, _n=ndev):
            for _ in range(_n):
                _one(self)
        barrier.__doc__ = "Synchronise all ranks; D barriers so that timed operations rotate devices."
        _backends.GlooBackend.barrier = barrier
    global _ITER_MULTIPLE
    _ITER_MULTIPLE = ndev
    import _common
    _common.plan = _plan_early_stop
    import runpy
    sys.argv = [script] + args
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        sys.exit(worker(sys.argv[2:]))
    from nezha.benchcli import main
    sys.exit(main(["compare"] + sys.argv[1:]))
