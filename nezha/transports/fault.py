"""Fault injection for tests: a table of fault words shared by a test and its ranks.

With NEZHA_FAULTS=<file> every endpoint of a communicator (data and control, tcp and shm,
and those made later by failover) goes behind the fault layer (include/nezha/nezha_fault.h),
which reads its word on every call. The test writes words while the ranks run:

    t = FaultTable.create(path, nconns=1)
    t.cut(rail=1, a=[0, 1], b=[2, 3])            # stall rail 1 between the two halves
    t.heal()

A word belongs to one rank's endpoint towards one peer on one slot: data channel c is
slot c, the control endpoint of rail r is slot CTRL + r.
"""
import mmap
import os

import numpy as np

from nezha._core import engine as _eng

MAX_RANKS = 32
CTRL = 64                 # slots 0..63: data channels; 64 + r: rail r's control endpoint
SLOTS = CTRL + 8
TABLE_BYTES = MAX_RANKS * MAX_RANKS * SLOTS * 4

STALL = _eng.FAULT_STALL_TX | _eng.FAULT_STALL_RX
DEAF = _eng.FAULT_STALL_RX
RESET = _eng.FAULT_RESET
CLOSE = _eng.FAULT_CLOSE
CORRUPT = _eng.FAULT_CORRUPT


def index(rank, peer, slot):
    """Word of rank's endpoint towards peer on slot."""
    if not (0 <= rank < MAX_RANKS and 0 <= peer < MAX_RANKS and 0 <= slot < SLOTS):
        raise ValueError(f"fault table holds {MAX_RANKS} ranks and {SLOTS} slots")
    return (rank * MAX_RANKS + peer) * SLOTS + slot


class FaultTable:
    """The shared file, mapped: the test writes it, the ranks' fault layers read it."""

    def __init__(self, path, nconns=1):
        self.path, self.nconns = path, nconns
        fd = os.open(path, os.O_RDWR)
        try:
            self.map = mmap.mmap(fd, TABLE_BYTES)
        finally:
            os.close(fd)
        self.words = np.frombuffer(self.map, dtype=np.uint32)

    @classmethod
    def create(cls, path, nconns=1):
        """A zeroed table (no fault) at path."""
        with open(path, "wb") as f:
            f.truncate(TABLE_BYTES)
        return cls(path, nconns)

    def set(self, rank, peer, slot, bits):
        self.words[index(rank, peer, slot)] = bits

    def get(self, rank, peer, slot):
        return int(self.words[index(rank, peer, slot)])

    def rail_slots(self, rail, ctrl=True):
        """The data channels of rail (all lanes) and, with ctrl, its control endpoint."""
        return ([rail * self.nconns + k for k in range(self.nconns)] +
                ([CTRL + rail] if ctrl else []))

    def cut(self, rail, a, b, bits=STALL, ctrl=True):
        """bits on rail between every rank of a and every rank of b, both ways (a stalled
        link: TCP over a blackholed cable). RESET/CLOSE stall the control endpoints."""
        for x in a:
            for y in b:
                for slot in self.rail_slots(rail, ctrl):
                    self.set(x, y, slot, bits)
                    self.set(y, x, slot, bits)

    def deafen(self, rail, ranks, size):
        """ranks hear nothing on rail (from anyone): one-way, like a host's broken receive."""
        for x in ranks:
            for y in range(size):
                if y != x:
                    for slot in self.rail_slots(rail):
                        self.set(x, y, slot, DEAF)

    def heal(self):
        """No fault anywhere."""
        self.words[:] = 0

    def close(self):
        del self.words
        self.map.close()


def wrap(ep, table, rank, peer, slot):
    """ep behind the fault layer, obeying rank's word towards peer on slot."""
    return _eng.FaultEndpoint(ep, table.map, index(rank, peer, slot), slot >= CTRL)
