"""Token buckets on links: the lab's tbf shaper, at fluid level.

tbf (nezha/lab/shaping.py) holds up to `burst` bytes of tokens, earned at the shaped rate.
A packet leaves at once while tokens cover it, otherwise it waits for them. As a fluid:
a link with tokens runs at its `peak` (what the path moves unshaped), one without runs at
its rate, and tokens move by (rate - use) per second, between 0 and burst. So a short
transfer after an idle gap gets through faster than the rate, and a long one pays the rate
for everything beyond the burst.

The network asks three things at every event (network.simulate): the capacities in force
(`caps`), when the next bucket empties (`until_empty`), and to move the clock (`advance`).
A bucket switches to peak only once it holds a whole packet (`packet` bytes), as tbf sends
nothing on a part of one.
"""
import numpy as np

from nezha.lab import shaping

# Unshaped rate of one stream through the lab's veth + bridge path with 8 streams busy:
# LAB.md §1, the ring at 3200 Mbit/s reached 60.4-63.4 % (about 2 Gbit/s a stream).
LAB_PEAK_BPS = 2e9
# What a lab rail's bucket gives nezha's ring: tbf's burst less LAB_BURST_LOSS_S at the rate.
# One TCP stream through tbf gets nearly all its 87 632 B back after an idle (256 KiB-1 MiB
# 1.5 ms faster, 1.75 ms in theory), with bbr and cubic alike; nezha's 4 x 2 ring at
# 400 Mbit/s gets at most 0.6 ms (1 MiB none, 256 KiB 0.1-0.6 ms after a 1.5 ms idle), and
# unshaped the same calls run 0.1-1 ms slower after an idle: a time lost per idle, which eats
# 1.15 ms of a bucket's credit (docs/results/session22/sim-burst). At 100 Mbit/s (7 ms of
# bucket) most is left, as session 13's run, whose slow rail drew 256-512 KiB on bursts, needs.
LAB_BURST_LOSS_S = 1.15e-3


class Buckets:
    """Token buckets on some links of a fabric (the others: rate = peak, never shaped)."""

    def __init__(self, fabric, links, burst, peak, packet=shaping.DEFAULT_MTU, full=True):
        """links: ids of the shaped links; burst: bytes per bucket (one or one per link);
        peak: B/s a shaped link moves while it has tokens (one or one per link)."""
        n = fabric.nlinks
        self.links = np.asarray(links, np.int64)
        self.burst = np.full(n, np.inf)
        self.burst[self.links] = burst
        self.rate = fabric.cap.astype(np.float64).copy()
        self.peak = self.rate.copy()
        self.peak[self.links] = np.maximum(peak, self.rate[self.links])
        self.shaped = np.zeros(n, bool)
        self.shaped[self.links] = True
        self.packet = float(packet)
        self.tokens = np.where(self.shaped, self.burst if full else 0.0, 0.0)

    def caps(self, cap):
        """Capacities in force: peak where a bucket holds a packet (0 stays 0: failed)."""
        on = self.shaped & (self.tokens >= self.packet) & (cap > 0)
        return np.where(on, self.peak, cap)

    def until_empty(self, use):
        """Seconds until the first bucket that is spent faster than it fills runs out."""
        drain = use - self.rate
        hot = self.shaped & (drain > 0) & (self.tokens >= self.packet)
        return float((self.tokens[hot] / drain[hot]).min()) if hot.any() else np.inf

    def advance(self, use, dt):
        """dt seconds at link use `use` (B/s): tokens earned at the rate, spent by use."""
        with np.errstate(invalid="ignore"):  # unshaped links of infinite rate (an aggregator)
            t = self.tokens + (self.rate - use) * dt
        self.tokens = np.where(self.shaped, np.clip(t, 0.0, self.burst), 0.0)

    def fill(self):
        """Every bucket full (after an idle gap longer than burst / rate)."""
        self.tokens = np.where(self.shaped, self.burst, 0.0)

    def idle(self, dt):
        """dt seconds with nothing sent (between two collectives)."""
        self.advance(np.zeros_like(self.rate), dt)


def ring_burst_bytes(bps, loss_s=LAB_BURST_LOSS_S, mtu=9000):
    """Bytes of a lab rail's tbf bucket that nezha's ring gets back after an idle: tbf's
    burst less loss_s at the rate (0: tbf's own, what one TCP stream gets)."""
    return max(shaping.burst_bytes(bps, mtu) - bps / 8 * loss_s, 0.0)


def lab_buckets(fabric, rates_bps=None, peak_bps=LAB_PEAK_BPS, full=True,
                loss_s=LAB_BURST_LOSS_S):
    """Buckets as `nezha lab` sets tbf on both ends of every rail veth (host->switch and
    switch->host): burst from shaping.burst_bytes for each rail's rate less loss_s at the rate
    (what nezha's ring gets of it; 0: the tbf's own, what one TCP stream gets)."""
    rates_bps = rates_bps or [r * 1e9 for r in fabric.rates]
    links, burst = [], []
    for r, bps in enumerate(rates_bps):
        for side in (fabric.up[r], fabric.down[r]):
            links += list(side)
            burst += [ring_burst_bytes(bps, loss_s)] * len(side)
    return Buckets(fabric, links, np.array(burst, float), peak_bps / 8, full=full)
