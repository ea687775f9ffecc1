"""nezha sim: a flow-level simulator of nezha's own schedules on fabrics built from a few
parameters (docs/sim.md).

  fabric.py       multi-rail planes, leaf-spine, fat-tree: links as arrays, paths by arithmetic
  workload.py     transfers and local reductions with FULL / STREAM / STARTED dependencies
  ops.py          the engine Schedule's ops, read as a numpy record array
  nezha_sched.py  workloads from nezha's planner and schedule builders (what nezha runs)
  ina_sched.py    INA allreduces from nezha's INA rail: its route, split, datagrams, window
  textbook.py     all-to-all, halving-doubling, ring, double binary tree as step DAGs
  routing.py      path choice: ECMP, ideal spraying, Ethereal's split-and-assign, rails
  maxmin.py       max-min fair rates by progressive filling
  network.py      the event loop: tasks, flows, link failures with a reroute delay
  calibrate.py    alpha/beta per rail kind and CPU cost per byte from benchmark JSON
  training.py     a data-parallel training step: buckets, compute, overlap
  cli.py          `nezha sim`
"""
