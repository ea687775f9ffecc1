"""The lab: an emulated multi-rail cluster on one machine (network namespaces, veths, bridges, tbf).

    from nezha.lab import Lab, LabSpec
    with Lab(LabSpec(hosts=4, rails=2, rates="400mbit", name="demo")).up() as lab:
        lab.fail(1, 1, "blackhole")
        res = lab.run(["python", "prog.py"], capture=True)

With ranks_per_host=L each host runs L ranks (all in its namespace, sharing its rails), placed
by block: rank r runs on host r // L.

Layout (see docs/lab.md and shared/LAB.md §1):
    namespaces  <name>h<i> (hosts), <name>sw (the switch)
    host i      rail<r> 10.(10+r).0.(i+1)/24 and mgmt 10.9.0.(i+1)/24
    switch      bridge br<r> per rail (ports h<i>r<r>), brm for mgmt (ports h<i>m)
    shaping     tbf on both ends of every rail veth (host egress and switch egress)
"""
import contextlib
import dataclasses
import fcntl
import json
import os
import re
import subprocess
import threading
import time

from nezha.errors import InvalidUsageError
from nezha.lab import netns as _nn
from nezha.lab import shaping
from nezha.lab.netns import CommandError, LabError, LabPermissionError

__all__ = ["Lab", "LabSpec", "LabError", "LabPermissionError", "CommandError", "RunResult",
           "default_name", "list_labs", "lab_info", "teardown", "available", "STATE_DIR"]

STATE_DIR = "/run/nezha-lab"
MAX_HOSTS = 250
MAX_RAILS = 16
MAX_RANKS_PER_HOST = 64
FAIL_MODES = ("down", "blackhole", "deaf", "admin")
_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,9}$")
_NFT_TABLE = "nezha"
_NFT_SET = "blackhole"
_NFT_DEAF = "deaf"
_NFT_LOSS = "nezha_loss"  # bridge table of the random-drop rules of `loss` (one rule per port and direction)
INA_PORT = 17017          # UDP port of the INA service of `up --ina RAIL` (on 10.(10+RAIL).0.254)


def default_name():
    """The lab name used when none is given: $NEZHA_LAB_NAME, else 'nz' (namespaces nzh0.., nzsw)."""
    return os.environ.get("NEZHA_LAB_NAME") or "nz"


def _check_name(name):
    """Validate a lab name; it prefixes namespace names and must stay short and unambiguous."""
    if not _NAME_RE.match(name or ""):
        raise InvalidUsageError(f"bad lab name {name!r}: 1-10 characters, [a-z][a-z0-9]*")
    return name


@dataclasses.dataclass
class LabSpec:
    """What to build: sizes, per-rail rates (bits/s) and link settings."""

    hosts: int = 4
    rails: int = 2
    rates: object = shaping.DEFAULT_RATE  # '400mbit', '400mbit,100mbit' or a list
    name: str = dataclasses.field(default_factory=default_name)
    mtu: int = shaping.DEFAULT_MTU
    gso: int = shaping.DEFAULT_GSO
    burst_us: int = shaping.DEFAULT_BURST_US
    latency_ms: float = shaping.DEFAULT_LATENCY_MS
    mgmt: bool = True
    delay_ms: float = 0.0  # extra one-way delay per rail link: needs sch_netem (absent here)
    ranks_per_host: int = 1  # ranks a job runs in each host's namespace (block placement)
    ina: tuple = ()  # rails whose switch runs an INA service (nezha ina serve) at 10.(10+r).0.254

    def __post_init__(self):
        _check_name(self.name)
        if not 1 <= int(self.hosts) <= MAX_HOSTS:
            raise InvalidUsageError(f"hosts must be 1..{MAX_HOSTS}, not {self.hosts}")
        if not 1 <= int(self.rails) <= MAX_RAILS:
            raise InvalidUsageError(f"rails must be 1..{MAX_RAILS}, not {self.rails}")
        if not 1 <= int(self.ranks_per_host) <= MAX_RANKS_PER_HOST:
            raise InvalidUsageError(f"ranks_per_host must be 1..{MAX_RANKS_PER_HOST}, not {self.ranks_per_host}")
        if not 576 <= int(self.mtu) <= 65535:
            raise InvalidUsageError(f"mtu must be 576..65535, not {self.mtu}")
        self.hosts, self.rails, self.mtu, self.gso = int(self.hosts), int(self.rails), int(self.mtu), int(self.gso)
        self.ranks_per_host = int(self.ranks_per_host)
        self.rates = shaping.parse_rates(self.rates, self.rails)
        ina = self.ina.split(",") if isinstance(self.ina, str) else (self.ina or ())
        ina = sorted({int(str(r).removeprefix("rail")) for r in ina if str(r).strip()})
        if any(not 0 <= r < self.rails for r in ina):
            raise InvalidUsageError(f"ina rails {ina}: must be 0..{self.rails - 1}")
        self.ina = ina

    def to_json(self):
        """A JSON-able dict of the spec."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class RunResult:
    """Outcome of Lab.run: the job's exit status and, if captured, its output."""

    returncode: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False


def state_path(name):
    """Path of the state file of lab `name`."""
    return f"{STATE_DIR}/{name}.json"


_lock_mutex = threading.RLock()
_lock_depth = [0, None]  # [depth, fd] of this process's hold on the machine-wide lab lock


@contextlib.contextmanager
def _locked(name=None, timeout=60.0):
    """Serialize building, tearing down and re-rating labs between processes on this machine
    (flock on /run/nezha-lab/.lock; re-entrant within a process). Each hold is short."""
    with _lock_mutex:
        if _lock_depth[0] == 0:
            os.makedirs(STATE_DIR, exist_ok=True)
            fd = os.open(f"{STATE_DIR}/.lock", os.O_RDWR | os.O_CREAT, 0o644)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        os.close(fd)
                        raise LabError(f"the lab lock {STATE_DIR}/.lock was held by another nezha "
                                       f"process for {timeout:g}s (lab {name!r})")
                    time.sleep(0.05)
            _lock_depth[1] = fd
        _lock_depth[0] += 1
        try:
            yield
        finally:
            _lock_depth[0] -= 1
            if _lock_depth[0] == 0:
                os.close(_lock_depth[1])  # releases the flock
                _lock_depth[1] = None


def _read_state(name):
    """The state dict of lab `name`, or None."""
    try:
        with open(state_path(name)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise LabError(f"cannot read {state_path(name)}: {e}") from e


def _write_state(name, state):
    """Atomically replace the state file of lab `name`."""
    os.makedirs(STATE_DIR, exist_ok=True)
    tmp = f"{state_path(name)}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, state_path(name))


def _lab_namespaces(name):
    """Existing namespaces that belong to lab `name` by their name: <name>h<digits>, <name>sw."""
    pat = re.compile(rf"^{re.escape(name)}(h\d+|sw)$")
    return [n for n in _nn.netns_list() if pat.match(n)]


def list_labs():
    """Names of labs on this machine: those with a state file, and leftovers whose switch and
    host 0 namespaces both still exist (a state file lost in a crash)."""
    names = set()
    if os.path.isdir(STATE_DIR):
        names.update(f[:-5] for f in os.listdir(STATE_DIR) if f.endswith(".json"))
    spaces = set(_nn.netns_list())
    for n in spaces:
        if n.endswith("sw") and _NAME_RE.match(n[:-2] or "-") and f"{n[:-2]}h0" in spaces:
            names.add(n[:-2])
    return sorted(names)


def lab_info(name):
    """The state file of lab `name` as a dict ({} if none): spec, owner, pid, state, created."""
    return _read_state(name) or {}


def teardown(name, grace=2.0):
    """Remove lab `name` completely, also after a crash: kill its processes, delete its namespaces
    (which takes the veths, bridges, qdiscs and nft tables with them) and its state file.
    Returns the namespaces deleted."""
    _check_name(name)
    _nn.check_privileges()
    with _locked(name):
        state = _read_state(name) or {}
        names = set(state.get("namespaces", [])) | set(_lab_namespaces(name))
        names = sorted(n for n in names if os.path.exists(f"{_nn.NETNS_DIR}/{n}"))
        # A namespace lives on while a process is in it, and with it its veth peers: kill them
        # before and after removing the names (a process may be entering it right now).
        ids = _nn.netns_ids(names)
        _nn.kill_pids([p for ps in _nn.pids_in(ids).values() for p in ps], grace)
        if names:
            _nn.ip_batch([f"netns del {n}" for n in names], force=True)
        deadline = time.monotonic() + 10
        clean = 0
        while clean < 2 and time.monotonic() < deadline:
            pids = [p for ps in _nn.pids_in(ids).values() for p in ps]
            clean = 0 if pids else clean + 1
            _nn.kill_pids(pids, 0.5)
            time.sleep(0.01)
        left = [n for n in names if os.path.exists(f"{_nn.NETNS_DIR}/{n}")]
        if left:
            raise LabError(f"could not delete namespaces {left} of lab {name!r}")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(state_path(name))
        for r in range(MAX_RAILS):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(_ina_ready(name, r))
    return names


def available():
    """(True, '') if this process can build labs here, else (False, the reason)."""
    try:
        _nn.check_privileges()
        for t in ("ip", "tc", "nft", "nsenter", "sysctl"):
            _nn.tool(t)
        probe = f"nzprobe{os.getpid()}"
        _nn.ip("netns", "add", probe, timeout=10)
        try:
            _nn.ip("link", "set", "lo", "up", ns=probe, timeout=10)
        finally:
            _nn.ip("netns", "del", probe, timeout=10, check=False)
    except LabPermissionError as e:
        return False, str(e)
    except (LabError, OSError) as e:
        return False, f"ip netns is not usable here: {e}"
    return True, ""


class Lab:
    """One emulated cluster: build it with up(), change it with fail/heal/rate, run jobs in it."""

    def __init__(self, spec=None, **kw):
        """Describe a lab (LabSpec or its fields as keywords); nothing is built until up()."""
        self.spec = spec if spec is not None else LabSpec(**kw)

    # ---- names and addresses --------------------------------------------------------------
    @property
    def name(self):
        """The lab's name (prefix of its namespaces)."""
        return self.spec.name

    @property
    def hosts(self):
        """Number of hosts."""
        return self.spec.hosts

    @property
    def rails(self):
        """Number of rails."""
        return self.spec.rails

    @property
    def ranks_per_host(self):
        """Ranks a job runs in each host by default (block placement: rank r on host r // L)."""
        return self.spec.ranks_per_host

    @property
    def slots(self):
        """Default (and largest) number of ranks of a job: hosts x ranks_per_host."""
        return self.hosts * self.ranks_per_host

    def host_of(self, rank):
        """The host that rank `rank` runs on (block placement)."""
        from nezha.lab.launch import host_of
        return host_of(rank, self.ranks_per_host)

    @property
    def switch_ns(self):
        """Name of the switch namespace."""
        return f"{self.name}sw"

    def host_ns(self, host):
        """Name of host `host`'s namespace."""
        return f"{self.name}h{self._host(host)}"

    @property
    def namespaces(self):
        """All namespaces of this lab, switch first."""
        return [self.switch_ns] + [self.host_ns(i) for i in range(self.hosts)]

    @property
    def ifnames(self):
        """Rail interface names, the same on every host: ['rail0', 'rail1', ...]."""
        return [f"rail{r}" for r in range(self.rails)]

    def addr(self, host, rail):
        """IPv4 address of host `host` on rail `rail`."""
        return f"10.{10 + self._rail(rail)}.0.{self._host(host) + 1}"

    def mgmt_addr(self, host):
        """IPv4 address of host `host` on the unshaped mgmt network (rail 0 if there is none)."""
        return f"10.9.0.{self._host(host) + 1}" if self.spec.mgmt else self.addr(host, 0)

    def port_name(self, host, rail):
        """Name of the switch port (in the switch namespace) that host `host`'s rail `rail` plugs into."""
        return f"h{self._host(host)}r{self._rail(rail)}"

    def _host(self, host):
        """Host index from 3, '3', 'h3' or '<name>h3'."""
        s = str(host)
        for pre in (f"{self.name}h", "h"):
            if s.startswith(pre) and s[len(pre):].isdigit():
                s = s[len(pre):]
                break
        if not s.isdigit() or int(s) >= self.hosts:
            raise InvalidUsageError(f"no host {host!r} in lab {self.name!r} (hosts 0..{self.hosts - 1})")
        return int(s)

    def _rail(self, rail):
        """Rail index from 1, '1' or 'rail1'."""
        s = str(rail)
        s = s[4:] if s.startswith("rail") else s
        if not s.isdigit() or int(s) >= self.rails:
            raise InvalidUsageError(f"no rail {rail!r} in lab {self.name!r} (rails 0..{self.rails - 1})")
        return int(s)

    # ---- lifecycle ------------------------------------------------------------------------
    @classmethod
    def attach(cls, name=None):
        """The running lab `name` (default: default_name()), from its state file."""
        name = _check_name(name or default_name())
        state = _read_state(name)
        if state is None:
            raise LabError(f"no lab {name!r} is up (no {state_path(name)}); "
                           f"start one with `nezha lab up --name {name}`")
        return cls(LabSpec(**state["spec"]))

    def exists(self):
        """True if this lab's state file or any of its namespaces exist."""
        return os.path.exists(state_path(self.name)) or bool(_lab_namespaces(self.name))

    def up(self, replace=False, owner=None):
        """Build the lab (about 1 s for 4x2); replace=True first tears down one of the same name;
        owner is a free-form tag kept in the state file (the test fixture marks its labs)."""
        _nn.check_privileges()
        for t in ("ip", "tc", "nft", "nsenter", "sysctl"):
            _nn.tool(t)
        with _locked(self.name):
            if self.exists():
                if not replace:
                    raise LabError(f"lab {self.name!r} already exists; `nezha lab down --name {self.name}` "
                                   "removes it, or choose another --name / NEZHA_LAB_NAME")
                teardown(self.name)
            self._up_locked(owner)
        return self

    def _up_locked(self, owner=None):
        """Build while holding the lab lock; on any failure remove what was made."""
        # State first: if we die half-way, `down` still knows what to remove.
        state = {"spec": self.spec.to_json(), "initial_rates": list(self.spec.rates),
                 "namespaces": self.namespaces, "state": "building", "pid": os.getpid(),
                 "owner": owner, "created": time.time()}
        try:
            _write_state(self.name, state)
            self._build()
            self._wait_links_up()
            self._start_ina()
            _write_state(self.name, dict(state, state="up"))
        except BaseException:
            with contextlib.suppress(Exception):
                teardown(self.name)
            raise

    def _build(self):
        """Create namespaces, links, bridges, addresses, qdiscs and the nft table."""
        s, sw = self.spec, self.switch_ns
        _nn.ip_batch([f"netns add {n}" for n in self.namespaces])
        # IPv6 off keeps the byte counters quiet; bridge-nf off keeps bridged frames out of
        # iptables (kernel default is on), which only costs CPU here.
        no6 = {"net.ipv6.conf.all.disable_ipv6": 1, "net.ipv6.conf.default.disable_ipv6": 1}
        _nn.sysctls({sw: {**no6, "net.bridge.bridge-nf-call-iptables": 0,
                          "net.bridge.bridge-nf-call-ip6tables": 0,
                          "net.bridge.bridge-nf-call-arptables": 0},
                     **{self.host_ns(i): no6 for i in range(s.hosts)}})
        # Each veth is created with its ends directly in the two namespaces, so no lab
        # interface ever exists in the root namespace (no name clashes between labs).
        link = f"mtu {s.mtu} gso_max_size {s.gso}"
        root = []
        for i in range(s.hosts):
            h = self.host_ns(i)
            for r in range(s.rails):
                root.append(f"link add name rail{r} {link} netns {h} type veth "
                            f"peer name h{i}r{r} {link} netns {sw}")
            if s.mgmt:
                root.append(f"link add name mgmt mtu {s.mtu} netns {h} type veth "
                            f"peer name h{i}m mtu {s.mtu} netns {sw}")
        _nn.ip_batch(root)
        br = "type bridge stp_state 0 forward_delay 0 mcast_snooping 0"
        swl = ["link set lo up"] + [f"link add br{r} mtu {s.mtu} {br}" for r in range(s.rails)]
        if s.mgmt:
            swl.append(f"link add brm mtu {s.mtu} {br}")
        for i in range(s.hosts):
            swl += [f"link set h{i}r{r} master br{r} up" for r in range(s.rails)]
            if s.mgmt:
                swl.append(f"link set h{i}m master brm up")
        swl += [f"link set br{r} up" for r in range(s.rails)] + (["link set brm up"] if s.mgmt else [])
        jobs = [(_nn.batch_argv("ip", sw), "\n".join(swl) + "\n")]
        for i in range(s.hosts):
            hl = ["link set lo up"]
            for r in range(s.rails):
                hl += [f"addr add {self.addr(i, r)}/24 dev rail{r}", f"link set rail{r} up"]
            if s.mgmt:
                hl += [f"addr add {self.mgmt_addr(i)}/24 dev mgmt", "link set mgmt up"]
            jobs.append((_nn.batch_argv("ip", self.host_ns(i)), "\n".join(hl) + "\n"))
        _nn.run_many(jobs, what="ip -batch")
        # Shaping: tbf on both ends, so each host NIC is full duplex at the rail's rate.
        tcj = [(_nn.batch_argv("tc", sw), "".join(
            self._tbf_line(self.port_name(i, r), r, "replace") for i in range(s.hosts) for r in range(s.rails)))]
        tcj += [(_nn.batch_argv("tc", self.host_ns(i)), "".join(
            self._tbf_line(f"rail{r}", r, "replace") for r in range(s.rails))) for i in range(s.hosts)]
        _nn.run_many(tcj, what="tc -batch")
        if s.delay_ms:
            self._add_delay()
        # Blackhole faults: a set of switch ports whose frames are dropped in both directions;
        # deaf faults: ports whose host hears nothing (its own frames still go out).
        _nn.nft(f"table bridge {_NFT_TABLE} {{\n set {_NFT_SET} {{ type ifname; }}\n"
                f" set {_NFT_DEAF} {{ type ifname; }}\n"
                f" chain ports {{ type filter hook forward priority 0; policy accept;\n"
                f"  iifname @{_NFT_SET} drop\n  oifname @{_NFT_SET} drop\n"
                f"  oifname @{_NFT_DEAF} drop\n }}\n" + (
                    # an INA service on the switch's own address: faults cut its frames too
                    f" chain local_in {{ type filter hook input priority 0; policy accept;\n"
                    f"  iifname @{_NFT_SET} drop\n }}\n"
                    f" chain local_out {{ type filter hook output priority 0; policy accept;\n"
                    f"  oifname @{_NFT_SET} drop\n  oifname @{_NFT_DEAF} drop\n }}\n" if s.ina else "")
                + "}\n", sw)

    def _wait_links_up(self, timeout=10.0, only=None):
        """Wait until every lab link (or only the (ns, ifname) pairs given) is operationally up.

        Carrier changes are applied by the kernel's linkwatch work (about 1 s later); until
        then the qdisc is a noop that drops every packet, so a job started at once would stall.
        """
        spaces = sorted({ns for ns, _ in only}) if only else self.namespaces
        deadline = time.monotonic() + timeout
        while True:
            outs = _nn.run_many([([_nn.tool("ip"), "-j", "-n", ns, "link", "show"], None)
                                 for ns in spaces], what="ip link show")
            down = [f"{ns}:{d['ifname']}" for ns, o in zip(spaces, outs) for d in json.loads(o or "[]")
                    if d["ifname"] != "lo" and d.get("operstate") not in ("UP", "UNKNOWN")
                    and (not only or (ns, d["ifname"]) in only)]
            if not down:
                return
            if time.monotonic() > deadline:
                raise LabError(f"lab links not up after {timeout:g}s: {', '.join(down[:8])}")
            time.sleep(0.05)

    def _tbf_line(self, dev, rail, verb):
        """One `tc -batch` line setting the rail's tbf on dev."""
        s = self.spec
        args = shaping.tbf_args(s.rates[rail], s.mtu, s.gso, s.burst_us, s.latency_ms)
        return f"qdisc {verb} dev {dev} root handle 1: {' '.join(args)}\n"

    def _add_delay(self):
        """Extra one-way delay on each host's rail egress: netem under tbf, if the kernel has it."""
        try:
            _nn.tc_batch([f"qdisc replace dev rail{r} parent 1:1 handle 10: netem delay {self.spec.delay_ms:g}ms"
                          for r in range(self.rails)], ns=self.host_ns(0))
        except CommandError as e:
            raise LabError(
                "per-rail delay needs the sch_netem qdisc, which this kernel lacks. Without it there is "
                "no way to add delay (tbf's latency only caps the queue; EDT delay via BPF needs sch_fq, "
                f"also absent). Build the lab without --delay.\n{e}") from e
        for i in range(1, self.hosts):
            _nn.tc_batch([f"qdisc replace dev rail{r} parent 1:1 handle 10: netem delay {self.spec.delay_ms:g}ms"
                          for r in range(self.rails)], ns=self.host_ns(i))

    # ---- in-network aggregation ----------------------------------------------------------
    def ina_host(self, rail):
        """IPv4 address of the INA service of rail `rail` (the switch's address on that plane)."""
        return f"10.{10 + self._rail(rail)}.0.254"

    def ina_address(self, rail):
        """'addr:port' of the INA service of rail `rail` (NEZHA_INA_ADDR form)."""
        return f"{self.ina_host(rail)}:{INA_PORT}"

    def _start_ina(self, timeout=20.0, slots=1024, quota=256):
        """Start `nezha ina serve` in the switch namespace for each rail of spec.ina, on the
        bridge's own address; `down` removes it with the namespace's other processes."""
        import sys
        from nezha.lab.launch import _source_root
        env = dict(os.environ)
        if _source_root():
            env["PYTHONPATH"] = _source_root()
        procs = []
        for r in self.spec.ina:
            _nn.ip("addr", "replace", f"{self.ina_host(r)}/24", "dev", f"br{r}", ns=self.switch_ns)
            ready = _ina_ready(self.name, r)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(ready)
            log = open(f"{STATE_DIR}/{self.name}-ina{r}.log", "w")
            argv = [sys.executable, "-m", "nezha", "ina", "serve", "--addr", self.ina_host(r),
                    "--port", str(INA_PORT), "--slots", str(slots), "--quota", str(quota),
                    "--ready-file", ready]
            procs.append((r, ready, log, subprocess.Popen(
                _nn.netns_exec_argv(self.switch_ns, argv), env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True)))
        deadline = time.monotonic() + timeout
        for r, ready, log, p in procs:
            log.close()
            while not os.path.exists(ready):
                if p.poll() is not None or time.monotonic() > deadline:
                    with open(log.name) as f:
                        tail = f.read()[-600:]
                    raise LabError(f"the INA service of rail {r} did not start ({log.name}):\n{tail}")
                time.sleep(0.02)

    def loss(self, host, rail, percent):
        """Drop `percent` % (0..100, two decimals) of the frames of one host's rail, each way,
        at random (nftables numgen in the switch); 0 removes the rule."""
        port, pct = self.port_name(host, rail), float(percent)
        if not 0 <= pct <= 100:
            raise InvalidUsageError(f"loss percent {percent}: must be 0..100")
        with _locked(self.name):
            state = _read_state(self.name) or {"namespaces": self.namespaces, "state": "up"}
            losses = dict(state.get("loss", {}))
            if pct:
                losses[port] = pct
            else:
                losses.pop(port, None)
            self._apply_loss(losses)
            state["loss"] = losses
            _write_state(self.name, state)

    def _apply_loss(self, losses):
        """Replace the loss table of the switch by rules for `losses` ({port: percent})."""
        _nn.nft(f"table bridge {_NFT_LOSS} {{}}\ndelete table bridge {_NFT_LOSS}\n", self.switch_ns)
        if not losses:
            return
        rules = {"prerouting": "iifname", "postrouting": "oifname"}
        text = f"table bridge {_NFT_LOSS} {{\n"
        for hook, match in rules.items():
            text += f" chain {hook} {{ type filter hook {hook} priority -10; policy accept;\n"
            for port, pct in sorted(losses.items()):
                text += f'  {match} "{port}" numgen random mod 10000 < {int(round(pct * 100))} counter drop\n'
            text += " }\n"
        _nn.nft(text + "}\n", self.switch_ns)

    def down(self):
        """Remove everything this lab made (processes in it, namespaces, state file)."""
        teardown(self.name)

    def __enter__(self):
        """The lab itself (build it with up() first)."""
        return self

    def __exit__(self, *exc):
        """Tear the lab down."""
        self.down()

    def reset(self):
        """Heal every failed link and restore the rates the lab was built with."""
        st = self.status()
        for ln in st["links"]:
            if ln["blackholed"] or ln["deaf"] or not ln["port_up"] or not ln["admin_up"]:
                self.heal(ln["host"], ln["rail"])
        state = _read_state(self.name) or {}
        if state.get("loss"):
            self._apply_loss({})
            with _locked(self.name):
                _write_state(self.name, dict(_read_state(self.name) or state, loss={}))
        initial = state.get("initial_rates") or self.spec.rates
        for r, bps in enumerate(initial):
            if any(ln["rate_bps"] != bps or ln["switch_rate_bps"] != bps
                   for ln in st["links"] if ln["rail"] == r):
                self.rate(r, bps)

    # ---- faults and rates -----------------------------------------------------------------
    def fail(self, host, rail, mode="down"):
        """Cut one host's rail: 'down' = switch port down (host sees NO-CARRIER), 'blackhole' =
        link stays up but the switch drops every frame to/from the port, 'deaf' = only the frames
        to the host are dropped (one-way: the host cannot hear, peers still hear it), 'admin' =
        host link down."""
        port = self.port_name(host, rail)
        if mode == "down":
            _nn.ip("link", "set", port, "down", ns=self.switch_ns)
        elif mode == "blackhole":
            _nn.run(_nn.nsenter_argv(self.switch_ns, [
                _nn.tool("nft"), "add", "element", "bridge", _NFT_TABLE, _NFT_SET, f'{{ "{port}" }}']),
                what="nft add element")
        elif mode == "deaf":
            _nn.run(_nn.nsenter_argv(self.switch_ns, [
                _nn.tool("nft"), "add", "element", "bridge", _NFT_TABLE, _NFT_DEAF, f'{{ "{port}" }}']),
                what="nft add element")
        elif mode == "admin":
            _nn.ip("link", "set", f"rail{self._rail(rail)}", "down", ns=self.host_ns(host))
        else:
            raise InvalidUsageError(f"bad fail mode {mode!r}: one of {', '.join(FAIL_MODES)}")

    def heal(self, host, rail):
        """Undo any fail() of one host's rail; returns when the link carries traffic again."""
        port = self.port_name(host, rail)
        # Absent element = not blackholed: ignore that error.
        for nft_set in (_NFT_SET, _NFT_DEAF):
            _nn.run(_nn.nsenter_argv(self.switch_ns, [
                _nn.tool("nft"), "delete", "element", "bridge", _NFT_TABLE, nft_set,
                f'{{ "{port}" }}']), check=False)
        _nn.ip("link", "set", port, "up", ns=self.switch_ns)
        _nn.ip("link", "set", f"rail{self._rail(rail)}", "up", ns=self.host_ns(host))
        # Returns once traffic flows again (carrier is applied ~1 s later by linkwatch).
        self._wait_links_up(only={(self.switch_ns, port), (self.host_ns(host), f"rail{self._rail(rail)}")})

    def rate(self, rail, rate):
        """Change one rail's rate on every host link, both directions, while jobs run."""
        r = self._rail(rail)
        bps = shaping.parse_rate(rate)
        with _locked(self.name):
            self.spec.rates[r] = bps
            # `replace` with the same kind and handle changes tbf in place (no queue flush).
            jobs = [(_nn.batch_argv("tc", self.switch_ns),
                     "".join(self._tbf_line(self.port_name(i, r), r, "replace") for i in range(self.hosts)))]
            jobs += [(_nn.batch_argv("tc", self.host_ns(i)), self._tbf_line(f"rail{r}", r, "replace"))
                     for i in range(self.hosts)]
            _nn.run_many(jobs, what="tc -batch")
            state = _read_state(self.name) or {"namespaces": self.namespaces, "state": "up"}
            state["spec"] = self.spec.to_json()
            _write_state(self.name, state)

    # ---- inspection -----------------------------------------------------------------------
    def status(self):
        """Live view: {'name', 'spec', 'links': [{host, rail, ns, ifname, addr, rate_bps,
        switch_rate_bps, state, carrier, port_up, blackholed, deaf, tx_bytes, rx_bytes}], 'rails': [...]}."""
        import json as _json
        jobs = [([_nn.tool("ip"), "-j", "-s", "-n", ns, "link", "show"], None) for ns in self.namespaces]
        jobs += [([_nn.tool("tc"), "-j", "-n", ns, "qdisc", "show"], None) for ns in self.namespaces]
        for nft_set in (_NFT_SET, _NFT_DEAF):
            jobs.append((_nn.nsenter_argv(self.switch_ns, [_nn.tool("nft"), "-j", "list", "set",
                                                           "bridge", _NFT_TABLE, nft_set]), None))
        outs = _nn.run_many(jobs, what="status")
        n = len(self.namespaces)
        links = {ns: {d["ifname"]: d for d in _json.loads(o or "[]")} for ns, o in zip(self.namespaces, outs[:n])}
        qd = {ns: {q["dev"]: q for q in _json.loads(o or "[]") if q.get("root")}
              for ns, o in zip(self.namespaces, outs[n:2 * n])}
        holes, deaf = set(), set()
        for got, out in ((holes, outs[-2]), (deaf, outs[-1])):
            for item in _json.loads(out or "{}").get("nftables", []):
                got.update(item.get("set", {}).get("elem", []))
        rows = []
        losses = (_read_state(self.name) or {}).get("loss", {})
        for i in range(self.hosts):
            h = self.host_ns(i)
            for r in range(self.rails):
                dev, port = links[h].get(f"rail{r}", {}), links[self.switch_ns].get(self.port_name(i, r), {})
                st = dev.get("stats64", {})
                rows.append({
                    "host": i, "rail": r, "ns": h, "ifname": f"rail{r}", "addr": self.addr(i, r),
                    "rate_bps": _tbf_rate(qd[h].get(f"rail{r}")),
                    "switch_rate_bps": _tbf_rate(qd[self.switch_ns].get(self.port_name(i, r))),
                    "state": dev.get("operstate", "MISSING"),
                    "carrier": "LOWER_UP" in dev.get("flags", []),
                    "admin_up": "UP" in dev.get("flags", []),
                    "port_up": "UP" in port.get("flags", []),
                    "blackholed": self.port_name(i, r) in holes,
                    "deaf": self.port_name(i, r) in deaf,
                    "loss_pct": losses.get(self.port_name(i, r), 0.0),
                    "tx_bytes": st.get("tx", {}).get("bytes", 0), "rx_bytes": st.get("rx", {}).get("bytes", 0),
                })
        rails = [{"rail": r, "ifname": f"rail{r}", "subnet": f"10.{10 + r}.0.0/24",
                  "rate_bps": self.spec.rates[r]} for r in range(self.rails)]
        for r in rails:
            r["ina"] = self.ina_address(r["rail"]) if r["rail"] in self.spec.ina else None
        return {"name": self.name, "spec": self.spec.to_json(), "rails": rails, "links": rows,
                "mgmt": "10.9.0.0/24" if self.spec.mgmt else None, "ranks_per_host": self.ranks_per_host}

    def counters(self):
        """{(host, rail): (tx_bytes, rx_bytes)} of every host's rail interface."""
        outs = _nn.run_many([([_nn.tool("ip"), "-j", "-s", "-n", self.host_ns(i), "link", "show"], None)
                             for i in range(self.hosts)], what="counters")
        res = {}
        for i, out in enumerate(outs):
            for d in json.loads(out or "[]"):
                m = re.match(r"^rail(\d+)$", d["ifname"])
                if m:
                    st = d.get("stats64", {})
                    res[(i, int(m.group(1)))] = (st.get("tx", {}).get("bytes", 0), st.get("rx", {}).get("bytes", 0))
        return res

    # ---- running things -------------------------------------------------------------------
    def exec(self, host, cmd, timeout=60.0, check=True, input=None, env=None):
        """Run cmd (argv list) in host `host`'s namespace to completion; returns CompletedProcess (text)."""
        argv = _nn.netns_exec_argv(self.host_ns(host), list(cmd))
        try:
            cp = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout,
                                env=None if env is None else {**os.environ, **env})
        except subprocess.TimeoutExpired as e:
            raise CommandError(f"`{' '.join(cmd)}` in {self.host_ns(host)} timed out after {timeout:g}s",
                               argv) from e
        if check and cp.returncode:
            raise CommandError(f"`{' '.join(cmd)}` in {self.host_ns(host)} failed (exit {cp.returncode}):\n"
                               f"{cp.stderr.strip()}", argv, cp.returncode, cp.stderr)
        return cp

    def popen(self, host, cmd, env=None, **kw):
        """Start cmd (argv list) in host `host`'s namespace; returns the Popen (caller waits/kills)."""
        return subprocess.Popen(_nn.netns_exec_argv(self.host_ns(host), list(cmd)),
                                env=None if env is None else {**os.environ, **env}, **kw)

    def run(self, cmd, np=None, env=None, timeout=600.0, capture=False, env_rendezvous=False,
            master_port=29500, mca=(), tag_output=False):
        """Run cmd as np ranks (default hosts x ranks_per_host), rank r in host r // ranks_per_host
        (Open MPI, or torchrun-style env with env_rendezvous=True); returns RunResult with the
        job's exit status."""
        from nezha.lab import launch
        if env_rendezvous:
            return launch.run_env(self, cmd, np=np, env=env, timeout=timeout, capture=capture,
                                  master_port=master_port)
        return launch.run_mpi(self, cmd, np=np, env=env, timeout=timeout, capture=capture, mca=mca,
                              tag_output=tag_output)


def _ina_ready(name, rail):
    """The file `nezha ina serve` of lab `name`'s rail writes once it listens."""
    return f"{STATE_DIR}/{name}-ina{rail}.ready"


def _tbf_rate(q):
    """The rate in bits/s of a `tc -j qdisc` tbf entry, or None."""
    if not q or q.get("kind") != "tbf":
        return None
    rate = q.get("options", {}).get("rate")
    return int(rate) * 8 if isinstance(rate, (int, float)) else rate
