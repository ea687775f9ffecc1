"""Rates and tbf parameters for the lab's rail links (see shared/LAB.md §1)."""
import re

from nezha.errors import InvalidUsageError

DEFAULT_RATE = "400mbit"
DEFAULT_MTU = 9000
DEFAULT_GSO = 65536
DEFAULT_BURST_US = 500
DEFAULT_LATENCY_MS = 5.0

# tc's units: decimal multiples of bits per second ("mbit" = 10**6 bit/s).
_UNITS = {"": 1, "bit": 1, "k": 10**3, "kbit": 10**3, "m": 10**6, "mbit": 10**6,
          "g": 10**9, "gbit": 10**9, "t": 10**12, "tbit": 10**12}
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.I)


def parse_rate(text):
    """Parse '400mbit', '1.6gbit', '100m' or a plain bits/s number into bits per second."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        bps = int(text)
    else:
        m = _RATE_RE.match(str(text))
        unit = m.group(2).lower() if m else None
        if not m or unit not in _UNITS:
            # 'bps' is rejected on purpose: in tc it means bytes/s, elsewhere bits/s.
            raise InvalidUsageError(
                f"bad rate {text!r}: use bits per second with a unit, e.g. 400mbit, 1gbit, 800m")
        bps = int(float(m.group(1)) * _UNITS[unit])
    if bps < 8000:
        raise InvalidUsageError(f"rate {text!r} is below 8kbit; tbf cannot shape that usefully")
    return bps


def format_rate(bps):
    """Format bits per second the way tc prints it ('400Mbit', '1.6Gbit')."""
    for unit, mult in (("Gbit", 10**9), ("Mbit", 10**6), ("Kbit", 10**3)):
        if bps >= mult:
            return f"{bps / mult:g}{unit}"
    return f"{bps}bit"


def parse_rates(text, rails):
    """'400mbit' or '400mbit,100mbit' -> one rate (bits/s) per rail; a single value applies to all."""
    if isinstance(text, (int, float)):
        text = [text]
    items = [x for x in (text.split(",") if isinstance(text, str) else list(text)) if str(x).strip()]
    if not items:
        raise InvalidUsageError("no rate given")
    rates = [parse_rate(x) for x in items]
    if len(rates) == 1:
        rates = rates * rails
    if len(rates) != rails:
        raise InvalidUsageError(f"{len(rates)} rates given for {rails} rails: give one or one per rail")
    return rates


def burst_bytes(bps, mtu=DEFAULT_MTU, gso=DEFAULT_GSO, burst_us=DEFAULT_BURST_US):
    """tbf bucket size: max(rate x burst_us, GSO + GSO/16 + 2 MTU).

    The floor lets one whole GSO packet through the bucket; a smaller bucket makes tbf
    re-segment GSO packets in software, which costs several times the CPU (LAB.md §1).
    """
    return max(int(bps / 8 * burst_us / 1e6), gso + gso // 16 + 2 * mtu)


def tbf_args(bps, mtu=DEFAULT_MTU, gso=DEFAULT_GSO, burst_us=DEFAULT_BURST_US,
             latency_ms=DEFAULT_LATENCY_MS):
    """The `tc qdisc ... tbf` arguments for one rail link direction.

    `latency` only caps the queue (limit = rate x latency + burst); it adds no delay.
    """
    return ["tbf", "rate", f"{int(bps)}bit", "burst", str(burst_bytes(bps, mtu, gso, burst_us)),
            "latency", f"{latency_ms:g}ms"]


ETH_HEADER = 14  # bytes tbf counts per frame beyond the IP packet (Ethernet header)


def goodput_ceiling(mtu=DEFAULT_MTU):
    """Largest TCP payload fraction of the shaped rate: MSS / frame (IPv4, TCP timestamps)."""
    return (mtu - 52) / (mtu + ETH_HEADER)
