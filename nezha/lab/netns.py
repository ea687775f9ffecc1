"""Thin wrappers over `ip`, `tc`, `nft` and `nsenter`, with errors that say what failed."""
import os
import re
import shutil
import signal
import subprocess
import time

from nezha.errors import NezhaError

NETNS_DIR = "/run/netns"
# Tools live in sbin, which a non-root PATH often lacks.
_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
_TOOL_PACKAGES = {"ip": "iproute2", "tc": "iproute2", "nft": "nftables", "nsenter": "util-linux"}
_CAP_NET_ADMIN, _CAP_SYS_ADMIN = 12, 21


class LabError(NezhaError):
    """The lab could not be built, changed or used."""


class LabPermissionError(LabError, PermissionError):
    """The caller lacks the privileges the lab needs."""


class CommandError(LabError):
    """An external command (ip, tc, nft, ...) failed or timed out."""

    def __init__(self, msg, argv=None, returncode=None, stderr=""):
        super().__init__(msg)
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr


def tool(name):
    """Absolute path of a required tool, or a LabError naming the package to install."""
    path = shutil.which(name, path=_SEARCH_PATH)
    if not path:
        pkg = _TOOL_PACKAGES.get(name, name)
        raise LabError(f"nezha lab needs `{name}` (Debian package {pkg}); run `bash tools/setup.sh` "
                       f"or `apt-get install {pkg}`")
    return path


def _caps():
    """Effective capability mask of this process."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def check_privileges():
    """Raise LabPermissionError unless we hold CAP_NET_ADMIN and CAP_SYS_ADMIN."""
    caps = _caps()
    missing = [n for n, bit in (("CAP_NET_ADMIN", _CAP_NET_ADMIN), ("CAP_SYS_ADMIN", _CAP_SYS_ADMIN))
               if not caps >> bit & 1]
    if missing:
        raise LabPermissionError(
            f"nezha lab needs root: {' and '.join(missing)} (to create network namespaces, veths, "
            f"bridges, tc and nftables rules) are missing from this process (uid {os.geteuid()}); "
            "run it as root, e.g. `sudo -E env PATH=$PATH python -m nezha lab ...`")


def run(argv, *, timeout=30.0, input=None, check=True, what=None):
    """Run a command to completion with a timeout; raise CommandError with its stderr on failure."""
    try:
        cp = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise CommandError(f"{what or argv[0]}: `{_show(argv)}` timed out after {timeout:g}s",
                           argv) from e
    except FileNotFoundError as e:
        raise LabError(f"cannot run {argv[0]}: {e}") from e
    if check and cp.returncode != 0:
        raise CommandError(_failure(argv, cp, input, what), argv, cp.returncode, cp.stderr)
    return cp


def _show(argv):
    """A command line for messages, shortened."""
    s = " ".join(argv)
    return s if len(s) < 200 else s[:200] + " ..."


def _failure(argv, cp, input, what):
    """Error text for a failed command; for a batch, quote the failing line."""
    err = (cp.stderr or cp.stdout or "").strip()
    msg = f"{what or argv[0]} failed (exit {cp.returncode}): `{_show(argv)}`"
    m = re.search(r"Command failed -:(\d+)", err)
    if m and input:
        lines = input.splitlines()
        n = int(m.group(1))
        if 0 < n <= len(lines):
            msg += f"\n  batch line {n}: {lines[n - 1]}"
    if "Operation not permitted" in err:
        msg += "\n  (not permitted: nezha lab must run as root)"
    return msg + (f"\n  {err}" if err else "")


def _ns_args(ns):
    """`-n NS` for ip/tc when a namespace is given."""
    return ["-n", ns] if ns else []


def ip(*args, ns=None, timeout=30.0, check=True):
    """Run `ip [-n ns] args...` and return its stdout."""
    return run([tool("ip"), *_ns_args(ns), *map(str, args)], timeout=timeout, check=check).stdout


def ip_json(*args, ns=None, timeout=30.0):
    """Run `ip -j [-n ns] args...` and return the parsed JSON."""
    import json
    out = run([tool("ip"), "-j", *_ns_args(ns), *map(str, args)], timeout=timeout).stdout
    return json.loads(out) if out.strip() else []


def ip_batch(lines, ns=None, force=False, timeout=60.0):
    """Run many `ip` commands in one process (`ip -batch -`); one fork instead of hundreds."""
    if not lines:
        return
    argv = [tool("ip"), *_ns_args(ns), *(["-force"] if force else []), "-batch", "-"]
    run(argv, input="\n".join(lines) + "\n", timeout=timeout, check=not force, what="ip -batch")


def tc(*args, ns=None, timeout=30.0, check=True):
    """Run `tc [-n ns] args...` and return its stdout."""
    return run([tool("tc"), *_ns_args(ns), *map(str, args)], timeout=timeout, check=check).stdout


def tc_json(*args, ns=None, timeout=30.0):
    """Run `tc -j [-n ns] args...` and return the parsed JSON."""
    import json
    out = run([tool("tc"), "-j", *_ns_args(ns), *map(str, args)], timeout=timeout).stdout
    return json.loads(out) if out.strip() else []


def tc_batch(lines, ns=None, timeout=60.0):
    """Run many `tc` commands in one process (`tc -batch -`)."""
    if lines:
        run([tool("tc"), *_ns_args(ns), "-batch", "-"], input="\n".join(lines) + "\n",
            timeout=timeout, what="tc -batch")


def nft(script, ns, timeout=30.0, check=True):
    """Apply an nft script (`nft -f -`) inside namespace ns."""
    return run(nsenter_argv(ns, [tool("nft"), "-f", "-"]), input=script, timeout=timeout,
               check=check, what="nft").returncode


def nft_json(args, ns, timeout=30.0):
    """Run `nft -j args` inside namespace ns and return the parsed JSON."""
    import json
    out = run(nsenter_argv(ns, [tool("nft"), "-j", *args]), timeout=timeout).stdout
    return json.loads(out) if out.strip() else {}


def nsenter_argv(ns, argv):
    """argv that runs a command in namespace ns (network only: cheap, no mount namespace)."""
    return [tool("nsenter"), f"--net={NETNS_DIR}/{ns}", "--", *argv]


def netns_exec_argv(ns, argv):
    """argv that runs a command in namespace ns via `ip netns exec`.

    Unlike nsenter --net this also remounts /sys, so /sys/class/net shows the namespace's
    interfaces (rail discovery and ethtool-like probes read it).
    """
    return [tool("ip"), "netns", "exec", ns, *argv]


def netns_list():
    """Names of the named network namespaces (/run/netns)."""
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def sysctls(settings, timeout=30.0):
    """Apply {ns: {key: value}} with one `sysctl -w` per namespace, all in parallel."""
    sysctl = tool("sysctl")
    # -e: bridge-nf-* keys exist only when br_netfilter is loaded; missing is fine.
    run_many([(nsenter_argv(ns, [sysctl, "-e", "-q", "-w", *(f"{k}={v}" for k, v in kv.items())]), None)
              for ns, kv in settings.items()], timeout=timeout, what="sysctl")


def netns_ids(names):
    """{(st_dev, st_ino): name} identifying the named namespaces (stable after they are deleted)."""
    ids = {}
    for name in names:
        try:
            st = os.stat(f"{NETNS_DIR}/{name}")
            ids[(st.st_dev, st.st_ino)] = name
        except OSError:
            pass
    return ids


def pids_in(ids):
    """{name: [pids]} of processes whose network namespace is in ids (from netns_ids)."""
    found = {name: [] for name in ids.values()}
    if not ids:
        return found
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            st = os.stat(f"/proc/{entry}/ns/net")
        except OSError:
            continue  # gone, or a kernel thread
        name = ids.get((st.st_dev, st.st_ino))
        if name:
            found[name].append(int(entry))
    return found


def netns_pids(names):
    """{ns name: [pids]} of processes whose network namespace is one of the named ones."""
    found = {name: [] for name in names}
    found.update(pids_in(netns_ids(names)))
    return found


def kill_pids(pids, grace=2.0):
    """SIGTERM the pids, wait up to grace seconds, then SIGKILL what is left."""
    pids = [p for p in pids if p != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for p in pids:
            try:
                os.kill(p, sig)
                alive.append(p)
            except ProcessLookupError:
                pass
        if not alive or sig == signal.SIGKILL:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            alive = [p for p in alive if _alive(p)]
            if not alive:
                return
            time.sleep(0.02)
        pids = alive


def _alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def run_many(jobs, timeout=30.0, what="command"):
    """Run [(argv, input_text_or_None)] in parallel; return their stdouts or raise on any failure."""
    procs = []
    try:
        for argv, inp in jobs:
            p = subprocess.Popen(argv, stdin=subprocess.PIPE if inp is not None else subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append((argv, inp, p))
        deadline = time.monotonic() + timeout
        outs, errors = [], []
        for argv, inp, p in procs:
            try:
                out, err = p.communicate(inp, timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                errors.append(f"{what}: `{_show(argv)}` timed out after {timeout:g}s")
                outs.append("")
                continue
            if p.returncode:
                errors.append(_failure(argv, subprocess.CompletedProcess(argv, p.returncode, out, err),
                                       inp, what))
            outs.append(out)
    finally:
        for _, _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if errors:
        raise CommandError("\n".join(errors))
    return outs


def batch_argv(prog, ns, force=False):
    """argv of `ip|tc [-n ns] [-force] -batch -`."""
    return [tool(prog), *_ns_args(ns), *(["-force"] if force else []), "-batch", "-"]
