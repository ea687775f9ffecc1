"""TEST_TREE for the workers: run the small broadcast's tree striped over every live rail
("striped") and/or in one round, the root sending to every rank itself ("flat"), whatever
the model picks (the lab's 4 x 1 picks them by its measured step; loopback rails do not)."""
import os


def force_tree(comm):
    mode = os.environ.get("TEST_TREE", "")
    planner = comm.planner
    if "striped" in mode:
        planner._tree_rails = lambda nbytes, root=0: planner.nchan
    if "flat" in mode:
        planner.flat_tree = lambda chan, nbytes, root=0: True
