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


TestDistBackendWithSpawn.__name__ = f"TestDistBackendWithSpawn{os.environ['BACKEND'].upper()}"
TestDistBackendWithSpawn.__qualname__ = TestDistBackendWithSpawn.__name__
globals()[TestDistBackendWithSpawn.__name__] = TestDistBackendWithSpawn
del TestDistBackendWithSpawn

if __name__ == "__main__":
    del dist, sys
    run_tests()
