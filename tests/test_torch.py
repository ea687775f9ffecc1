"""The torch.distributed backend "nezha" (nezha/torch): registration, every collective through
the torch API against an oracle (float32, bfloat16, int64; sizes 0, 1, 2 and primes; 1-3
ranks), DDP against single-process training and against Gloo, and the error paths.

Ranks are subprocesses (tests/workers/torch_ranks.py) with an env:// TCPStore on 127.0.0.1
and NEZHA_SOCKET_IFNAME=lo; each run has a timeout, so nothing here can hang.
"""
import json
import os
import socket
import subprocess
import sys
import types

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "workers", "torch_ranks.py")
FAMILIES = ["all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all",
            "gather_scatter", "send_recv"]
DTYPES = ["float32", "bfloat16", "int64"]
_runs = {}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(n, scenario, timeout=60):
    """Run scenario on n ranks (cached); [result dict per rank]."""
    key = (n, scenario)
    if key in _runs:
        return _runs[key]
    port = _free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, PYTHONPATH=ROOT, RANK=str(r), WORLD_SIZE=str(n),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NEZHA_SOCKET_IFNAME="lo",
                   NEZHA_JOB_SECRET="00" * 16, OMP_NUM_THREADS="1",
                   TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"):
            env.pop(k, None)
        procs.append(subprocess.Popen([sys.executable, WORKER, scenario], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    out = []
    try:
        for r, p in enumerate(procs):
            text, _ = p.communicate(timeout=timeout)
            res = [json.loads(x[7:]) for x in text.splitlines() if x.startswith("RESULT ")]
            assert res, f"rank {r} of {scenario} gave no result (exit {p.returncode}):\n{text[-3000:]}"
            out.append(res[-1])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    _runs[key] = out
    return out


def test_registration():
    import nezha.torch
    assert "nezha" in dist.Backend.backend_list
    assert dist.Backend.NEZHA == "nezha"
    assert dist.Backend.default_device_backend_map.get("cpu") in ("gloo", "nezha")
    assert dist.Backend.backend_capability["nezha"] == ["cpu"]
    assert dist.Backend._plugins["NEZHA"].extended_api
    nezha.torch.register()  # idempotent
    assert issubclass(nezha.torch.ProcessGroupNezha, dist.ProcessGroup)


def test_entry_point_declared():
    text = open(os.path.join(ROOT, "pyproject.toml")).read()
    assert '[project.entry-points."torch.backends"]' in text
    assert 'nezha = "nezha.torch:register"' in text


def test_cuda_tensor_error_names_device():
    from nezha.torch.tensors import check_device
    fake = types.SimpleNamespace(device=torch.device("cuda", 1))
    with pytest.raises(ValueError, match=r"cuda:1.*\.cpu\(\)"):
        check_device(fake)


def test_reduce_op_mapping():
    from nezha.torch.tensors import nezha_op
    from nezha.types import ReduceOp
    R = dist.ReduceOp
    assert nezha_op(R.SUM, torch.float32) == (ReduceOp.SUM, None)
    assert nezha_op(R.PRODUCT, torch.int64) == (ReduceOp.PROD, None)
    assert nezha_op(R.AVG, torch.bfloat16) == (ReduceOp.AVG, None)
    assert nezha_op(R.MIN, torch.bool) == (ReduceOp.BAND, None)
    with pytest.raises(ValueError, match="AVG"):
        nezha_op(R.AVG, torch.int64)
    with pytest.raises(ValueError, match="BXOR"):
        nezha_op(R.BXOR, torch.float32)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("family", FAMILIES)
def test_collective_vs_oracle(n, family):
    if family == "send_recv" and n == 1:
        pytest.skip("send/recv need two ranks")
    results = run(n, "collectives")
    for r, res in enumerate(results):
        assert res["info"]["backend"] == "nezha" and res["info"]["name"] == "nezha"
        checks = {k: v for k, v in res["result"].items() if k.startswith(family + "/")}
        assert {k.split("/")[1] for k in checks} == set(DTYPES)
        bad = {k: v for k, v in checks.items() if v != "ok"}
        assert not bad, f"rank {r}/{n}: " + "\n".join(f"{k}: {v}" for k, v in bad.items())


@pytest.mark.parametrize("n", [1, 2, 3])
def test_misc_async_noncontiguous_bool_coalesced_subgroup_funcol(n):
    for r, res in enumerate(run(n, "collectives")):
        assert res["result"]["misc"] == "ok", f"rank {r}/{n}: {res['result']['misc']}"


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_equals_single_process_on_concatenated_batch(n):
    for res in run(n, "ddp", timeout=90):
        assert res["result"]["single_max_abs_diff"] < 1e-5


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("other", ["gloo", "hook"])
def test_ddp_50_steps_same_losses_as_gloo(n, other):
    for res in run(n, "ddp", timeout=90):
        losses = res["result"]["losses"]
        assert len(losses["nezha"]) == 50
        for a, b in zip(losses["nezha"], losses[other]):
            assert abs(a - b) <= 1e-4 * abs(b), (a, b)


@pytest.mark.parametrize("n", [2, 3])
def test_ddp_uneven_inputs_join_same_as_gloo(n):
    for res in run(n, "ddp", timeout=90):
        assert res["result"]["join_moved"] > 1e-3
        assert res["result"]["join_max_abs_diff"] < 1e-5


def test_non_cpu_tensor_raises_naming_device():
    for res in run(2, "errors"):
        msg = res["result"]["device"]
        assert msg and msg.startswith("ValueError") and "meta" in msg and ".cpu()" in msg


def test_mismatched_shapes_raise_on_every_rank():
    results = run(2, "errors")
    for r, res in enumerate(results):
        msg = res["result"]["mismatch"]
        assert msg and msg.startswith("CollectiveMismatch"), f"rank {r}: {msg}"
        assert "count=100" in msg and "count=107" in msg


def test_env_from_mpi(monkeypatch):
    from nezha.torch.launch import env_from_mpi
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "3")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
    assert env_from_mpi()
    assert (os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"]) == ("3", "4", "1")
    monkeypatch.setenv("RANK", "0")  # torchrun's own values win
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "2")
    env_from_mpi()
    assert os.environ["RANK"] == "0"
