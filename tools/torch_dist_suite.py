"""Run torch's own distributed test suite (torch/testing/_internal/distributed/
distributed_test.py, shipped in the wheel) against the "nezha" backend, the way pytorch's
test/distributed/test_distributed_spawn.py drives it for gloo/nccl/ucc:

    mkdir -p /tmp/tdt && touch /tmp/tdt/barrier
    BACKEND=nezha WORLD_SIZE=2 TEMP_DIR=/tmp/tdt NEZHA_SOCKET_IFNAME=lo \
        .venv/bin/python tools/torch_dist_suite.py -v [-k pattern ...]

The suite's skip logic knows gloo/nccl/ucc by name. A plugin backend declares what it
supports in DistTestCases before the suite is imported; nezha declares "plugin" (it is
available), "ddp" and "subgroup" (both run on CPU). Tests still gated on
BACKEND == "gloo" or on GPUs are skipped with the suite's own reason (docs/torch.md).

WORLD_SIZE=3 or 4 runs the tests that need more ranks (new_subgroups_with_group_param needs
exactly 4); the suite's subset-group tests (all_reduce_group_sum, ...) skip below
WORLD_SIZE=8 ("small world size"). Select with -k or test ids: every test spawns all ranks.

NEZHA_SUITE_AS=gloo is a second, separate pass (it runs batch_isend_irecv_gloo[_tags]): the suite is told BACKEND=gloo (so its
Gloo-only gates open) while every process group it asks for as "gloo" is created as "nezha".
Tests that compare the backend's name with "gloo" fail there by construction.
"""
import os
import sys

import torch
import torch.distributed as dist

import nezha.torch  # noqa: F401  registers "nezha" (also in the spawned ranks, which import this file)

torch.backends.cuda.matmul.allow_tf32 = False

from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

if os.environ.get("BACKEND") == "nezha":
    for feature in ("plugin", "ddp", "subgroup"):
        DistTestCases.backend_feature[feature].add("nezha")

AS = os.environ.get("NEZHA_SUITE_AS")
if AS:
    os.environ["BACKEND"] = AS
    _init, _new = dist.init_process_group, dist.new_group

    def _swap(backend):
        return "nezha" if isinstance(backend, str) and backend.lower() == AS else backend

    def init_process_group(backend=None, *args, **kwargs):
        return _init(_swap(backend), *args, **kwargs)

    def new_group(*args, **kwargs):
        if "backend" in kwargs:
            kwargs["backend"] = _swap(kwargs["backend"])
        elif len(args) >= 3:
            args = args[:2] + (_swap(args[2]),) + args[3:]
        return _new(*args, **kwargs)

    dist.init_process_group, dist.new_group = init_process_group, new_group

if "BACKEND" not in os.environ or "WORLD_SIZE" not in os.environ or "TEMP_DIR" not in os.environ:
    raise SystemExit("set BACKEND=nezha, WORLD_SIZE=2 and TEMP_DIR (holding a file named "
                     "barrier); see the docstring")

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


TestDistBackendWithSpawn.__name__ = "TestDistBackendWithSpawnNEZHA"
TestDistBackendWithSpawn.__qualname__ = TestDistBackendWithSpawn.__name__
globals()[TestDistBackendWithSpawn.__name__] = TestDistBackendWithSpawn
del TestDistBackendWithSpawn

if __name__ == "__main__":
    del dist, sys
    run_tests()
