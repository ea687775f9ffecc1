"""The `ina` rail: in-network aggregation through a service standing where a SHARP- or
NetReduce-capable switch would (docs/ina.md).

    from nezha.rails.ina import InaClient
    c = InaClient("10.11.0.254:17017", secret=secret, rank=r, size=n)
    c.allreduce(array)                   # in place, GIL released, timeout-bound
    c.allreduce(array, start=k, stop=m)  # only elements [k, m): run beside the engine

The data path of both ends is C (include/nezha/nezha_ina.h, nezha/_core/ina.pyx).
"""
from nezha.rails.ina.client import (DEFAULT_PORT, DEFAULT_WINDOW_BYTES, InaClient, parse_addr,
                                    parse_addrs, reduce_support)

__all__ = ["InaClient", "reduce_support", "parse_addr", "parse_addrs", "DEFAULT_PORT",
           "DEFAULT_WINDOW_BYTES"]
