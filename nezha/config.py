"""The one table of NEZHA_* settings, their grammar, and where each value comes from.

Precedence (NCCL's chain): the config dict passed by the program > environment NEZHA_<NAME>
> NEZHA_CONF_FILE > ~/.nezha.conf > /etc/nezha.conf > default. `python -m nezha.config`
prints docs/env.md.
"""
from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple

from nezha.errors import InvalidUsageError

PREFIX = "NEZHA_"
SYSTEM_CONF = "/etc/nezha.conf"
USER_CONF = "~/.nezha.conf"  # expanded with HOME from the environment being read


class NameList(NamedTuple):
    """A parsed NCCL-style name list: `^` exclude, `=` exact, `name[:port]` entries."""
    exclude: bool
    exact: bool
    entries: tuple[tuple[str, int | None], ...]


def parse_name_list(text: str) -> NameList:
    """Parse `[^][=]name[:port],...` (NCCL_SOCKET_IFNAME grammar); raise ValueError if malformed."""
    s = text.strip()
    exclude = s.startswith("^")
    s = s[1:] if exclude else s
    exact = s.startswith("=")
    s = s[1:] if exact else s
    entries = []
    for item in s.split(","):
        item = item.strip()
        if not item:
            continue  # tolerate "eth0,eth1," like NCCL
        name, sep, port = item.partition(":")
        name = name.strip()
        if not name or any(c.isspace() or c in "/^=" for c in name):
            raise ValueError(f"bad interface name in {item!r}")
        if sep and not (port.isdigit() and int(port) <= 65535):
            raise ValueError(f"bad port in {item!r}")
        entries.append((name, int(port) if sep else None))
    if not entries:
        raise ValueError("no names in the list")
    return NameList(exclude, exact, tuple(entries))


def _check_secret(text: str) -> None:
    if not re.fullmatch(r"[0-9a-fA-F]+", text) or len(text) % 2:
        raise ValueError("not an even number of hex digits")


@dataclass(frozen=True)
class Param:
    """One NEZHA_* setting: name without prefix, type, default as a string, allowed values, help."""
    name: str
    type: str        # str, int, float, bool, size, list, enum, range
    default: str
    help: str
    allowed: tuple[str, ...] = ()   # enum values, or the allow-list of a list
    bound: str = ""                 # "> 0", ">= 1": lower bound of an int/float
    syntax: str = ""                # what a str accepts, for errors and docs
    check: Callable[[str], object] | None = None   # extra validation of a str
    secret: bool = False            # never printed or logged

    def allowed_text(self) -> str:
        """What the value may be, in words (docs/env.md, errors)."""
        if self.type == "size":
            return "bytes with k/M/G suffix (1k = 1024), inf, auto (= default)"
        if self.type == "bool":
            return "y/n, yes/no, 1/0, true/false"
        if self.type == "enum":
            return ", ".join(self.allowed)
        if self.type == "list":
            kinds = ", ".join(self.allowed) if self.allowed else "names"
            return f"comma list of {kinds}; leading ^ excludes"
        if self.type == "range":
            return "lo-hi, port numbers, inclusive"
        if self.type in ("int", "float"):
            number = "integer" if self.type == "int" else "number"
            return f"{number} {self.bound}".strip() + (", inf" if self.type == "float" else "")
        return self.syntax or "any string"

    def parse(self, text: str):
        """Typed value of `text`; raise ValueError(reason) if it is not allowed."""
        s = text.strip()
        if self.type == "size":
            return _parse_size(s, self)
        if self.type == "bool":
            v = s.lower()
            if v in ("y", "yes", "1", "true"):
                return True
            if v in ("n", "no", "0", "false"):
                return False
            raise ValueError("not a boolean")
        if self.type == "int":
            try:
                value = int(s, 10)
            except ValueError:
                raise ValueError("not an integer") from None
            return _check_bound(value, self.bound)
        if self.type == "float":
            try:
                value = float(s)
            except ValueError:
                raise ValueError("not a number") from None
            if math.isnan(value):
                raise ValueError("not a number")
            return _check_bound(value, self.bound)
        if self.type == "enum":
            for a in self.allowed:
                if a.lower() == s.lower():
                    return a
            raise ValueError("not one of the allowed values")
        if self.type == "list":
            return _parse_list(s, self.allowed)
        if self.type == "range":
            if not s:
                return None   # unset: any port
            m = re.fullmatch(r"(\d+)\s*-\s*(\d+)", s)
            if not m or not 1 <= int(m[1]) <= int(m[2]) <= 65535:
                raise ValueError("not a port range lo-hi with 1 <= lo <= hi <= 65535")
            return int(m[1]), int(m[2])
        if s and self.check:
            self.check(s)
        return s


_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _auto_model_or(unit: str, ok, bound: str):
    """A check for "auto", "model" or a number of unit within ok (bound says which)."""
    def check(text: str) -> None:
        if text.lower() in ("auto", "model"):
            return
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"not auto, model or a number of {unit}") from None
        if not ok(value):
            raise ValueError(f"{unit} must be {bound}")
    return check


_check_alpha = _auto_model_or("seconds", lambda v: 0 < v < 1, "> 0 and < 1")
_check_slice = _auto_model_or("steps per step", lambda v: 0 <= v < 100, ">= 0 and < 100")


def _parse_size(s: str, param: Param):
    low = s.lower()
    if low == "inf":
        return math.inf
    if low == "auto":
        return _parse_size(param.default, param) if param.default.lower() != "auto" else None
    m = re.fullmatch(r"(\d+(?:\.\d*)?)\s*(?:([kmgt])(?:i?b)?|b)?", low)
    if not m:
        raise ValueError("not a size")
    return int(float(m[1]) * _SIZE_UNITS[m[2] or ""])


def _check_bound(value, bound: str):
    if bound:
        op, limit = bound.split()
        if not (value >= float(limit) if op == ">=" else value > float(limit)):
            raise ValueError(f"must be {bound}")
    return value


def _parse_list(s: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    exclude = s.startswith("^")
    items = [x.strip() for x in (s[1:] if exclude else s).split(",") if x.strip()]
    if not allowed:
        return tuple(items)
    canon = {a.lower(): a for a in allowed}
    wild = canon.get("all")   # the allow-list's "everything" word, if it has one
    every = tuple(a for a in allowed if a != wild and a not in NOT_IN_ALL)
    picked = []
    for x in items:
        if x.lower() not in canon:
            raise ValueError(f"unknown entry {x!r}")
        picked.append(canon[x.lower()])
    if exclude:
        return tuple(a for a in every if a not in picked and wild not in picked)
    if wild in picked:
        return every
    if not picked:
        raise ValueError("empty list")
    return tuple(dict.fromkeys(picked))   # drop repeats, keep order


SUBSYSTEMS = ("INIT", "BOOT", "RAIL", "COLL", "PLAN", "HEALTH", "ENV", "TOPO", "ALL")
RAIL_KINDS = ("tcp", "shm", "loop", "ina", "rdma", "all")
NOT_IN_ALL = ("loop",)  # a test transport: only when named

PARAMS: dict[str, Param] = {p.name: p for p in [
    Param("DEBUG", "enum", "WARN", allowed=("VERSION", "WARN", "INFO", "TRACE"), help=(
        "How much nezha logs. VERSION prints only the version line when a communicator starts; "
        "WARN adds warnings (something is probably wrong but nezha carries on); INFO adds what "
        "nezha decided and why, for the subsystems in NEZHA_DEBUG_SUBSYS; TRACE adds detail per "
        "operation and slows things down. Lines go to stderr, or to NEZHA_DEBUG_FILE.")),
    Param("DEBUG_SUBSYS", "list", "INIT,BOOT,RAIL,PLAN,HEALTH,ENV,TOPO", allowed=SUBSYSTEMS, help=(
        "Subsystems whose INFO and TRACE lines are printed: INIT (communicator setup), BOOT "
        "(rank discovery, handle exchange), RAIL (rail discovery, connections, failures), COLL "
        "(every collective call), PLAN (algorithm and striping choices), HEALTH (rail health "
        "checks), ENV (settings that differ from their defaults), TOPO (topology probe, rail "
        "formation, binding), or ALL. A leading ^ prints "
        "every subsystem except the listed ones (^COLL,PLAN). Warnings are printed whatever "
        "this says.")),
    Param("DEBUG_FILE", "str", "", syntax="file path; %h = host, %p = pid", help=(
        "Append log lines to this file instead of writing them to stderr. %h expands to the "
        "host name and %p to the process id, so that every rank can have its own file "
        "(nezha.%h.%p.log).")),
    Param("SOCKET_IFNAME", "str", "", check=parse_name_list,
          syntax="comma list of name prefixes; ^ excludes, = exact names, :port ignored", help=(
              "Network interfaces the TCP rail uses: each entry is one rail, in the order given, "
              "so give the same entries on every host. An entry is a name prefix (eth matches "
              "eth0, eth1, ..., all of them, in name order); a leading = makes every entry an "
              "exact name; a leading ^ makes the list an exclude list (every usable interface "
              "except these); a :port suffix is accepted and ignored for now. Unset: every up "
              "interface with an IPv4 address except lo and names starting with docker or "
              "virbr, or lo if nothing else exists. `nezha info` shows what this gives on a "
              "host.")),
    Param("SOCKET_NCONNS", "int", "1", bound=">= 1", help=(
        "TCP connections per peer per rail. More than one helps when one flow cannot fill a "
        "link (one core per flow, per-flow hashing across paths).")),
    Param("SOCKET_BUFFER", "size", "4M", help=(
        "Send and receive buffer size (SO_SNDBUF, SO_RCVBUF) asked for on every TCP rail "
        "socket; the kernel caps it at net.core.wmem_max and rmem_max. 0 keeps the kernel's "
        "default and its autotuning.")),
    Param("ZEROCOPY", "enum", "off", allowed=("off", "on"), help=(
        "Zero-copy TCP sends (the kernel's MSG_ZEROCOPY): a send of NEZHA_ZEROCOPY_MIN bytes "
        "or more hands the kernel the buffer's pages instead of copying them; the buffer is "
        "not written and the collective does not return until the kernel reports the bytes "
        "acknowledged. Saves the copy's CPU on real NICs; on loopback and veth the kernel "
        "copies anyway (comm.stats()['zerocopy'] counts both). Off until measured "
        "to win; a kernel without it keeps copying.")),
    Param("ZEROCOPY_MIN", "size", "64k", help=(
        "Smallest send that goes without a copy when NEZHA_ZEROCOPY=on (the kernel's "
        "bookkeeping costs more than a copy of a few KiB).")),
    Param("RAILS", "list", "tcp,shm", allowed=RAIL_KINDS, help=(
        "Kinds of rail nezha may use: tcp (sockets over the NEZHA_SOCKET_IFNAME interfaces), "
        "shm (shared memory between ranks on one host), loop (NEZHA_LOOP_RAILS rails over "
        "loopback addresses instead of the NICs: tests, fault injection and trying nezha on "
        "one machine; only when named), ina (the in-network aggregation service), rdma (RDMA "
        "devices); all allows every kind but loop, and a leading ^ every kind except the "
        "listed ones (^shm: ranks on one host talk over tcp too). ina is used when "
        "NEZHA_INA_ADDR is set; rdma is not built yet.")),
    Param("INA_ADDR", "str", "", syntax="host:port[,host:port]", help=(
        "The in-network aggregation service (`nezha ina serve`; `nezha lab up --ina RAIL` "
        "starts one and sets this), one address per rail; port 17017 if omitted. With ina in "
        "NEZHA_RAILS large allreduces, reduce_scatters and allgathers are split between the "
        "TCP rails and it by their measured rates; no service there is an error at start "
        "naming the address.")),
    Param("INA_MIN_BYTES", "size", "1M", help=(
        "Smallest share of an allreduce, reduce_scatter or allgather given to the INA rail "
        "(of the whole buffer: a reduce_scatter's input, an allgather's output); one under "
        "twice this stays on the TCP rails (it would not pay for the agreement after it). "
        "Where the learned rates give INA less, and this much on INA would finish later "
        "than the TCP rails alone, the collective runs on the TCP rails alone (every 16th "
        "such one still splits, to keep the INA rate measured).")),
    Param("INA_SMALL", "enum", "auto", allowed=("auto", "on", "off"), help=(
        "Small allreduces (one INA datagram: up to NEZHA_INA_CHUNK, or 1432 B when that is "
        "0) whole over the INA rail, two hops (rank to service to rank): auto where the cost "
        "model puts that under recursive doubling on the TCP rails (rd needs 3 steps or more: "
        "8 ranks and up, or a rank count it must fold, one rank per host) and failover can recover it (two TCP rails or more); on "
        "whenever the service can reduce it (with one TCP rail a service lost during one is "
        "then an error, as a lost rail is without failover); off never.")),
    Param("INA_TIMEOUT", "float", "0.15", bound="> 0", help=(
        "Seconds without any result from the INA service after which the INA rail counts "
        "as failed in a collective (the part no rank got a result for is then re-run on the "
        "TCP rails, exactly, and the rail tried again later). Results come back every "
        "round trip while any slot of the window gets through, so one slot's retransmission "
        "backoff (up to 200 ms) does not count; raise it on very lossy rails.")),
    Param("INA_WINDOW", "int", "0", bound=">= 0", help=(
        "Slots of the INA service each rank keeps in flight (its credit window, NetReduce's "
        "message-level flow control); 0: from the rail's rate x round trip, 1.5 x (rate x "
        "RTT / datagram + 2) slots, at least 64 KiB of datagrams (room for a resend), at most "
        "the pipe + 128 KiB of switch queue and the service's share (RTT: the median of 5 PINGs at registration, the slowest rank's; "
        "rate: the link's trusted speed, else the rate the split learned; 64 KiB of "
        "datagrams until one is known). bench/ina_credit_sweep.py shows where the window "
        "saturates a rail.")),
    Param("INA_CHUNK", "size", "0", help=(
        "Payload bytes per INA datagram, the same on every rank; 0: from the route's MTU, at "
        "most 8192.")),
    Param("LOOP_RAILS", "int", "2", bound=">= 1", help=(
        "How many rails NEZHA_RAILS=loop makes, on the loopback addresses 127.0.0.1, "
        "127.0.0.2, ... (named loop0, loop1, ...).")),
    Param("FAULTS", "str", "", syntax="file path", help=(
        "Tests only: put every endpoint behind the fault layer, which obeys a table of fault "
        "words in this file (nezha/transports/fault.py writes it) to stall, reset, close or "
        "corrupt a rail or a channel while the job runs. Unset: no fault layer.")),
    Param("SHM_BUFFER", "size", "4M", help=(
        "Bytes of each shared-memory ring (one per direction, per pair of ranks on a host and "
        "per channel). Larger rings let a sender run further ahead of its receiver.")),
    Param("SHM_COLL", "size", "0", help=(
        "Smallest allreduce (bytes per rank) that runs in the host area when every rank of "
        "the communicator is on one host, NEZHA_ALGO is auto and failover is off (one rail): "
        "one shared segment where each rank reduces its block straight out of the others' "
        "slots, about two thirds of the memory traffic of the shm rings, and as fast at 4 "
        "bytes. Smaller ones take the rings; 0: every allreduce; inf: none. Rank 0's value "
        "is every rank's.")),
    Param("SHM_COLL_CHUNK", "size", "128k", help=(
        "Bytes of each rank's slot in the host area: an allreduce goes through it a chunk of "
        "this size per rank at a time, small enough to stay in the caches.")),
    Param("HOST_ID", "str", "", syntax="any string", help=(
        "Which host this rank counts as: ranks with the same id use shared memory with each "
        "other. Unset: hostname, boot id and network namespace (two network namespaces of one "
        "machine are two hosts, as in the lab). Tests set it to make hosts on one machine.")),
    Param("BIND", "enum", "none", allowed=("none", "numa", "core"), help=(
        "Bind each rank, and the progress and health threads it starts, near its NIC: numa "
        "to the CPUs of the NIC's NUMA node, core to one core of them (chosen by local rank). "
        "The NIC is the nearest one of the rank's GPU when LOCAL_RANK maps to a GPU, else "
        "its first rail's (`nezha topo` shows both). none binds nothing: binding can hurt "
        "a rank that shares its host with other work, so it is off unless asked for.")),
    Param("MAX_RAILS", "int", "4", bound=">= 1", help=(
        "Largest number of rails one operation stripes its data over.")),
    Param("MIN_RAIL_PIECE", "size", "auto", help=(
        "Smallest piece of a segment sent on one rail: a segment goes over fewer rails when "
        "splitting it over all of them would give smaller pieces, because per-message costs "
        "then outweigh the extra bandwidth. A split's pieces finish together, so they are "
        "judged by time: a rail is kept while the fastest rail's piece is at least this "
        "(equal rails: every piece; 400 + 100 Mbit/s: from 1.25x it, where the 100's fifth "
        "runs as long as the 400's four fifths; by the slow rail's own bytes, until session "
        "25, from 5x). The pieces are judged by the rails' overall "
        "measured rates (nominal until measured), not by one size's own, so that a rail a "
        "size left out is not kept out by numbers it can no longer update. inf never splits "
        "a segment. auto: by the job's host layout and crowding, the same on every rank: 32k "
        "with one rank per host and at most 2 ranks per CPU (splits 64 KiB over two equal "
        "rails, about 2x faster in the lab), else 64k (a split's second slice costs shared "
        "CPUs more than it saves: with 32k a hierarchical 64 KiB allreduce on 4 hosts x 2 "
        "ranks was 1.25x slower, 2026-11-27; more crowded machines are not measured). "
        "Where auto gives 32k and the step latency is measured (NEZHA_RAIL_ALPHA=auto, one "
        "connection per rail), allreduce, allgather and reduce_scatter do not use the piece: "
        "the cost model prices a second rail's slice, every step of the plan again at "
        "NEZHA_SLICE_STEP measured steps (0.75 where not measured), and stripes where that costs less than the bytes it moves "
        "(32 KiB over two equal rails in the lab; session 26). "
        "`nezha info` and NEZHA_DEBUG=INFO (PLAN) show the value in use and why.")),
    Param("RAIL_MAX_RATIO", "float", "8", bound=">= 1", help=(
        "Rails slower than the fastest one divided by this ratio are left out of striping, "
        "because the whole segment would wait for their piece. 1 uses only rails as fast as "
        "the fastest.")),
    Param("SPLIT", "enum", "measured", allowed=("measured", "equal"), help=(
        "How a collective is split over rails: measured (by each rail's delivered rate, "
        "learned from finished collectives: the rails finish together) or equal (the same "
        "share on every rail, as a static striping library does; for comparisons).")),
    Param("PROBE", "enum", "auto", allowed=("auto", "on", "off"), help=(
        "Start-up rate probe (nezha/topo/rateprobe.py): with two or more rails, two short "
        "timed allreduces over every rail at once, whose per-rail times (the slowest rank's, "
        "agreed by all) seed the cost model, so the first collectives are already split by "
        "rail speed; measurements replace it. auto probes when a rail's nominal speed is "
        "unknown or untrusted (virtual NICs such as the lab's veth, shaped links) and skips "
        "loopback rails; on always probes; off never (the prior is then the nominal speeds, "
        "or equal).")),
    Param("RAIL_ALPHA", "str", "auto", check=_check_alpha,
          syntax="auto, model, or seconds per step (e.g. 75e-6)", help=(
        "The cost model's latency of one step between hosts, which sets where the algorithm "
        "choice moves from recursive doubling to Rabenseifner, the ring, a chain or hier. "
        "auto: measured at start-up where ranks sit on two hosts or more (nezha/topo/"
        "steplatency.py: 16 allreduces of 8 B, the slowest rank's median, agreed by all, "
        "spread over the steps; a few ms; then 10 each of 4, 16 and 64 KiB whole on one "
        "rail, which price the bytes of the steps that do not stream (rd, rab, the "
        "broadcast tree) at the sizes used instead of the sustained rate; ~30-70 ms on "
        "400 Mbit/s), else the constants; NEZHA_PROBE=off keeps the constants too. model: the constants (25 us between hosts, 5 within, set on a faster "
        "machine; scaled by crowding above 2 ranks per CPU). A number: that many seconds "
        "between hosts, steps within a host in proportion. `nezha info` and NEZHA_DEBUG=INFO "
        "(PLAN, TOPO) show the value in use.")),
    Param("SLICE_STEP", "str", "auto", check=_check_slice, syntax="auto, model, or steps per step (e.g. 0.75)",
          help=(
        "What one more rail's slice of a small or medium collective costs, in steps of the "
        "plan (each slice repeats every step of it on its rail: the CPUs pay its sends, "
        "receives and wake-ups), where the cost model picks the rails (NEZHA_MIN_RAIL_PIECE="
        "auto with one rank per host and a measured step latency). auto: measured at start-up "
        "with the step latency (nezha/topo/steplatency.py: 8 B allreduces whole on one rail "
        "and split over two at once, interleaved, the slowest rank's medians agreed by all; "
        "the split's excess over the whole in units of the whole call; ~4 ms), where there "
        "are two rails and one connection per rail, else the constant; model: the constant "
        "(0.75, fitted in the lab in session 26). A number: that many steps per step. "
        "`nezha info` and NEZHA_DEBUG=INFO (PLAN, TOPO) show the value in use.")),
    Param("PROBE_BYTES", "size", "256k", help=(
        "Bytes per rail of the start-up probe's first allreduce (NEZHA_PROBE); its second "
        "gives the slowest rail 2.5 times this and the others more, in proportion to their "
        "rates. Make it larger than a shaper's burst (the lab's tbf lets about 88 KB through "
        "unshaped). On 100 Mbit/s with 4 ranks, 256k makes the probe about 175 ms.")),
    Param("ALGO", "enum", "auto", allowed=("auto", "ring", "rd", "rab", "hier", "direct"), help=(
        "Algorithm of allreduce, allgather, reduce_scatter and broadcast: ring (flat: over "
        "all ranks; for allreduce reduce-scatter then allgather, pipelined in "
        "NEZHA_SEGMENT_SIZE segments; best for large buffers), rd (flat; allreduce by "
        "recursive doubling: log2(size) exchanges of the whole buffer; best for small ones), "
        "rab (flat; allreduce by Rabenseifner's algorithm: reduce-scatter by recursive "
        "halving, allgather by recursive doubling, 2 log2(size) steps moving the ring's "
        "bytes; for medium ones; the other collectives as auto), direct (allgather: every "
        "rank's block straight to every other rank, one step; an experiment, never chosen "
        "by auto; the other collectives as auto), "
        "hier (several ranks per host, the same number on each: within the host over shared "
        "memory, each local rank carrying its share across hosts, e.g. reduce-scatter in the "
        "host, allreduce of the shares across hosts, allgather in the host; the flat "
        "algorithms where hosts hold different numbers of ranks), or auto (the flat "
        "algorithm the alpha-beta cost model finds fastest for the size, the host layout "
        "and the configured rails: rd, rab or ring for allreduce, tree or chain for "
        "broadcast, rd or ring for allgather and reduce_scatter; `nezha info` shows the "
        "switch points; hier instead wherever it applies and the model finds it faster, "
        "against rd or a tree only when clearly faster).")),
    Param("SEGMENT_SIZE", "size", "256k", help=(
        "Pipelining unit: received data is reduced and forwarded in segments of this many "
        "bytes, so that the network and the reduction overlap. Smaller segments start "
        "forwarding sooner; larger ones pay less per-message overhead.")),
    Param("HIER_CHUNK", "size", "256k", bound=">= 1", help=(
        "Pipelining unit of hierarchical collectives (several ranks per host): one chunk "
        "crosses hosts while the next is reduced within the host. Smaller chunks keep the "
        "rails busy through more of a collective; larger ones pay less per step. The same "
        "on every rank.")),
    Param("HIER_RAILS", "enum", "auto", allowed=("auto", "aligned", "striped"), help=(
        "Which rails each local rank drives in hierarchical collectives. aligned: as NCCL's "
        "multi-rail rings, a rail's slices cross hosts only from the local ranks it belongs "
        "to (those whose GPU's or CPUs' nearest NIC is on it, else local rank i gets rail "
        "i mod rails, and rails i + L, i + 2L, ... when there are more rails than local "
        "ranks), so each rank's cross-host bytes leave through its own NIC; striped: every "
        "local rank carries a share of every rail's slices; auto: aligned where the local ranks "
        "have different nearest NICs and every rail gets as many local ranks as every other "
        "and every local rank as many rails (then the bytes within and across hosts are the "
        "striped layout's), else striped (with no NIC nearer to one rank than another, "
        "an allreduce or broadcast stays striped: aligning buys nothing and a rank waiting "
        "for a CPU would idle its rails; allgather and reduce_scatter are aligned wherever "
        "balanced, their striped cross-host phase measured 4x slower). Over "
        "the live rails: when one fails its slices re-run on the others, aligned again. "
        "The same on every rank.")),
    Param("SMALL_MSG_THRESHOLD", "size", "auto", help=(
        "auto: NEZHA_ALGO=auto chooses from the cost model (see NEZHA_ALGO). Set to a size, "
        "it overrides the model with the fixed rule: allreduce calls on fewer bytes than "
        "this use recursive doubling, the others the ring (rab is never chosen); broadcast "
        "a tree below it, a chain above; allgather and reduce_scatter recursive doubling "
        "below it (a power of two of ranks). 0 always uses the ring.")),
    Param("TIMEOUT", "float", "60", bound="> 0", help=(
        "Seconds a blocking operation (collective, barrier, wait on a request) may take before "
        "it raises NezhaTimeout, unless the call passes its own timeout. inf waits forever.")),
    Param("CONNECT_TIMEOUT", "float", "30", bound="> 0", help=(
        "Seconds allowed for reaching the peers at start-up (bootstrap exchange and rail "
        "connections) before giving up with NezhaTimeout.")),
    Param("JOB_SECRET", "str", "", check=_check_secret, secret=True, syntax="hex digits", help=(
        "Secret every connection must prove it knows, so that processes of another job cannot "
        "join or inject data. Unset: under MPI and `nezha lab run` the bootstrap generates one "
        "and hands it to every rank; under torchrun it is derived from MASTER_ADDR/MASTER_PORT, "
        "which keeps out strays, not attackers (a warning says so; docs/security.md). It is "
        "never printed or logged.")),
    Param("JOB_SECRET_FILE", "str", "", syntax="path", help=(
        "A file holding the job secret (hex digits, as NEZHA_JOB_SECRET), for launchers that "
        "should not put it in the environment. Refused unless only its owner can read it "
        "(mode 0600 or 0400). NEZHA_JOB_SECRET wins when both are set.")),
    Param("PORT_RANGE", "range", "", help=(
        "Ports the bootstrap and the TCP rails listen on, as lo-hi (e.g. 50000-50100), for "
        "hosts whose firewall opens only a range. Unset: the kernel picks free ports.")),
    Param("CONF_FILE", "str", "", syntax="file path", help=(
        "Configuration file read before ~/.nezha.conf and /etc/nezha.conf: NAME=value or "
        "NEZHA_NAME=value lines, # starts a comment. Only the environment or the program's "
        "config argument can set this one; a missing file is an error.")),
    Param("SPIN_US", "float", "200", bound=">= 0", help=(
        "Microseconds the progress loop keeps retrying (yielding the CPU between tries) "
        "before it sleeps in poll() when nothing moves. Small messages arrive within this "
        "window, and a wake-up from poll() costs more than the retries; 0 sleeps at once.")),
    Param("PROGRESS_SCHED", "enum", "auto", allowed=("other", "fifo", "auto"), help=(
        "Scheduling policy of the progress thread, which runs non-blocking collectives (DDP's "
        "buckets) while the program computes. other: the system's default. fifo: real-time "
        "(SCHED_FIFO, priority 1), so that it runs as soon as data arrives even when compute "
        "threads take every core, and never busy-polls (NEZHA_SPIN_US does not apply to it); "
        "needs CAP_SYS_NICE or an RLIMIT_RTPRIO of 1 or more (ulimit -r), else a warning and "
        "other. auto: fifo where the process may have it, else other without a warning (INFO "
        "says which). Real-time, the progress thread has the health thread at SCHED_FIFO 2 "
        "above it, so that heartbeats are not starved. With more busy threads than cores, "
        "overlap of communication with compute depends on it: DDP in the lab (4 ranks on 2 "
        "cores, 2 x 400 Mbit/s) ran 1.77-1.83x Gloo with fifo against 1.64x with other "
        "(docs/torch.md). Real time turns any busy loop into a stall of the other ranks (two "
        "were found and fixed, docs/torch.md): other is the way back. Blocking collectives "
        "run in the caller's thread and are not affected.")),
    Param("FAILOVER", "bool", "y", help=(
        "With two or more rails, survive the failure of a rail: its unfinished work is re-run "
        "on the others and it is re-admitted when it answers again. Striped collectives end "
        "with a small vote between the ranks (one message each way per peer); small ones on "
        "one rail vote only when a rank sees a failure (they keep a copy of their input "
        "until the next collective). n turns it off, and a failed rail is then an error.")),
    Param("SPARE_BYTES", "size", "16M", help=(
        "With failover an in-place collective runs out of place, into a buffer of nezha's "
        "own, and is copied back after the vote; that buffer is made and touched in "
        "Communicator(), this large (0: not; it grows when a larger collective needs it). A "
        "first collective that has to touch fresh memory of its own is slower: by 5-8 % for "
        "16 MiB on 400 + 100 Mbit/s in a VM whose idle memory went back to its host. The "
        "memory stays with the job (once per rank).")),
    Param("HEARTBEAT", "float", "0.01", bound="> 0", help=(
        "Seconds between heartbeats on every rail's control connections (a background thread "
        "sends them, so they flow while the program computes).")),
    Param("RAIL_TIMEOUT", "float", "0.06", bound="> 0", help=(
        "A rail is declared failed between two ranks when one waits on the other and has not "
        "heard from it on that rail for this many seconds (a cut or blackholed link gives no "
        "error, only silence). Keep it several heartbeats long.")),
    Param("READMIT", "float", "1.0", bound=">= 0", help=(
        "A failed rail comes back into use when every rank has heard every peer on it without "
        "a gap for this many seconds since it failed.")),
    Param("LAB_NAME", "str", "", syntax="short name (letters, digits)", help=(
        "Default lab for the `nezha lab` commands, so that two labs on one machine (a test "
        "run and a demo) keep apart; unset means nz. `nezha lab run` sets it for the ranks, "
        "with NEZHA_LAB_HOST, NEZHA_LAB_IP and NEZHA_LAB_JOB (the lab's own variables, "
        "which nezha itself does not read).")),
    Param("BUILD_DEBUG", "bool", "n", help=(
        "Read by setup.py at build time (`make debug` sets it to 1): compile the core with line "
        "tracing, for coverage and profiling. No effect at run time.")),
]}


def _suggest(name: str, known) -> str:
    # Compared without the prefix, which every name shares and would make all look close.
    bare = {k.removeprefix(PREFIX): k for k in known}
    close = difflib.get_close_matches(name.removeprefix(PREFIX), list(bare), n=1, cutoff=0.6)
    return f" (did you mean {bare[close[0]]}?)" if close else ""


def _read_file(path: str, strict: bool):
    """NAME -> value from a conf file, plus (variable, where) for names not in the table."""
    values, unknown = {}, []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = re.split(r"(?:^|\s)#", line, maxsplit=1)[0].strip()
            if not line:
                continue
            key, eq, value = line.removeprefix("export ").partition("=")
            key, value = key.strip(), value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            if not eq or not key:
                if strict:
                    raise InvalidUsageError(f"{path}:{lineno}: expected NAME=value, got {line!r}")
                continue
            name = key.removeprefix(PREFIX)
            if name in PARAMS:
                values[name] = value
            else:
                unknown.append((PREFIX + name, f"file {path} line {lineno}"))
    return values, unknown


def _normalize_overrides(overrides) -> dict[str, str]:
    out = {}
    for key, value in (overrides or {}).items():
        name = str(key).removeprefix(PREFIX)
        if name not in PARAMS:
            raise InvalidUsageError(f"unknown nezha setting {key!r} in the config argument"
                                    f"{_suggest(name, PARAMS)}")
        if value is None:
            continue
        if isinstance(value, bool):
            value = "y" if value else "n"
        elif isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        out[name] = str(value)
    return out


class Config:
    """Typed NEZHA_* settings, each with the place its value came from."""

    def __init__(self, values, raw, sources, errors=None, unknown=()):
        self._values, self._raw, self._sources = values, raw, sources
        self.errors: dict[str, str] = dict(errors or {})   # name -> message (strict=False)
        self.unknown: list[tuple[str, str]] = list(unknown)  # (variable, where it was set)

    @classmethod
    def load(cls, overrides: dict | None = None, environ=None, *, strict: bool = True) -> Config:
        """Read every setting; strict=False keeps going past bad values (kept in .errors)."""
        cfg = cls._read(overrides, environ, strict)
        cfg._report()
        return cfg

    @classmethod
    def _read(cls, overrides=None, environ=None, strict=True) -> Config:
        # Reads without logging: the logger itself configures from here.
        env = os.environ if environ is None else environ
        layers = [("argument", _normalize_overrides(overrides))]
        env_values = {}
        unknown = []
        for var, value in env.items():
            if var.startswith(PREFIX):
                if var[len(PREFIX):] in PARAMS:
                    env_values[var[len(PREFIX):]] = value
                elif not var.startswith(PREFIX + "LAB_"):  # set by `nezha lab run`
                    unknown.append((var, "the environment"))
        layers.append(("environment", env_values))
        conf = layers[0][1].get("CONF_FILE") or env_values.get("CONF_FILE", "").strip()
        home = env.get("HOME") or os.path.expanduser("~")
        paths = [(conf, True), (USER_CONF.replace("~", home, 1), False), (SYSTEM_CONF, False)]
        errors = {}
        for path, required in paths:
            if not path or not (required or os.path.isfile(path)):
                continue
            try:
                values, bad_names = _read_file(path, strict)
            except OSError as e:
                msg = f"NEZHA_CONF_FILE={path}: cannot read it ({e.strerror})"
                if strict:
                    raise InvalidUsageError(msg) from None
                errors["CONF_FILE"] = msg
                continue
            layers.append((f"file {path}", values))
            unknown += bad_names

        values, raw, sources = {}, {}, {}
        for name, p in PARAMS.items():
            raw[name], sources[name] = p.default, "default"
            for source, layer in layers:
                if layer.get(name, "").strip():   # an empty value means "not set"
                    raw[name], sources[name] = layer[name], source
                    break
            try:
                values[name] = p.parse(raw[name])
            except ValueError as e:
                shown = "<hidden>" if p.secret else repr(raw[name])
                errors[name] = (f"{PREFIX}{name}={shown} (set by {sources[name]}): {e}; "
                                f"allowed: {p.allowed_text()}")
                values[name] = p.parse(p.default)
        if strict and errors:
            raise InvalidUsageError("; ".join(errors.values()))
        return cls(values, raw, sources, errors, unknown)

    def _report(self) -> None:
        """Warn once per process about unknown variables; log non-default values at INFO/ENV."""
        from nezha import log
        for var, where in self.unknown:
            key = ("unknown", var, where)
            if key not in _REPORTED:
                _REPORTED.add(key)
                log.warn("ENV", f"unknown variable {var} in {where} is ignored"
                                f"{_suggest(var, [PREFIX + n for n in PARAMS])}")
        if not log.enabled("INFO", "ENV"):
            return
        for name, value in self.items():
            key = ("set", name, self._raw[name], self._sources[name])
            if self._sources[name] == "default" or key in _REPORTED:
                continue
            if value != PARAMS[name].parse(PARAMS[name].default):
                _REPORTED.add(key)
                log.info("ENV", f"{PREFIX}{name} set by {self._sources[name]} to "
                                f"{self.display(name)}")

    @staticmethod
    def _name(name: str) -> str:
        n = name.removeprefix(PREFIX)
        if n not in PARAMS:
            raise KeyError(f"unknown nezha setting {name!r}{_suggest(n, PARAMS)}")
        return n

    def __getitem__(self, name: str):
        """Typed value of a setting (name with or without the NEZHA_ prefix)."""
        return self._values[self._name(name)]

    def __contains__(self, name) -> bool:
        """True if `name` (with or without NEZHA_) is a known setting."""
        return isinstance(name, str) and name.removeprefix(PREFIX) in PARAMS

    def raw(self, name: str) -> str:
        """The setting's value as written, before parsing."""
        return self._raw[self._name(name)]

    def source(self, name: str) -> str:
        """Where the value came from: "default", "environment", "file /path" or "argument"."""
        return self._sources[self._name(name)]

    def display(self, name: str) -> str:
        """The value as written, fit for printing: secrets hidden, empty shown as (unset)."""
        n = self._name(name)
        if not self._raw[n]:
            return "(unset)"
        return "(set, hidden)" if PARAMS[n].secret else self._raw[n]

    def items(self) -> Iterator[tuple[str, object]]:
        """(name, typed value) for every setting, in table order."""
        return ((n, self._values[n]) for n in PARAMS)

    def __repr__(self) -> str:
        changed = ", ".join(f"{n}={self.display(n)}" for n in PARAMS
                            if self._sources[n] != "default")
        return f"Config({changed})"


_REPORTED: set = set()
_CURRENT: Config | None = None


def get(name: str):
    """Typed value of one setting from the process-wide Config (environment and files)."""
    global _CURRENT
    if _CURRENT is None:
        _CURRENT = Config.load()
    return _CURRENT[name]


def reset() -> None:
    """Forget the process-wide Config, so the next get() reads the environment again."""
    global _CURRENT
    _CURRENT = None


def env_markdown() -> str:
    """docs/env.md: every setting with its type, default, allowed values and help."""
    def cell(text):
        return text.replace("|", "\\|")

    lines = [
        "# Environment variables",
        "",
        "<!-- Generated from nezha/config.py by `python -m nezha.config > docs/env.md`;"
        " edit the table there. -->",
        "",
        "Every setting is `NEZHA_<NAME>` in the environment, `<NAME>` in a program's config dict "
        "(`Communicator(config={\"SEGMENT_SIZE\": \"512k\"})`) and `NAME=value` (or "
        "`NEZHA_NAME=value`) in a config file. The first place that sets it wins: config dict, "
        "environment, `NEZHA_CONF_FILE`, `~/.nezha.conf`, `/etc/nezha.conf`, default. An empty "
        "value counts as not set. `nezha info` prints every value with where it came from.",
        "",
        "Sizes take `k`, `M`, `G` suffixes (binary: `1k` = 1024) and `inf`; `auto` means the "
        "default. Booleans are `y/n`, `yes/no`, `1/0` or `true/false`. Lists are comma-separated. "
        "Unknown `NEZHA_*` variables produce a warning naming the closest known one.",
        "",
        "| Variable | Type | Default | Allowed | Meaning |",
        "|---|---|---|---|---|",
    ]
    for p in PARAMS.values():
        default = f"`{p.default}`" if p.default else "(unset)"
        lines.append(f"| `{PREFIX}{p.name}` | {p.type} | {default} | {cell(p.allowed_text())} "
                     f"| {cell(p.help)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(env_markdown(), end="")
