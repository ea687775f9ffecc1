"""Topology: packages, NUMA nodes, NICs and GPUs (hwloc, or sysfs without it), and rails across hosts."""
