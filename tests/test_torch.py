"""The torch.distributed backend "nezha" (nezha/torch): registration, every collective through
the torch API against an oracle (float32, bfloat16, int64; sizes 0, 1, 2 and primes; 1-3
ranks), DDP against single-process training and against Gloo, and the error paths.

Ranks are subprocesses (tests/workers/torch_ranks.py) with an env:// TCPStore on 127.0.0.1
and NEZHA_SOCKET_IFNAME=lo; each run has a timeout, so nothing here can hang.
"""
import json
import os
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
    from tests.spawn import free_port
    return free_port()


def run(n, scenario, timeout=60, worker=WORKER):
    """Run scenario on n ranks (cached); [result dict per rank]."""
    key = (n, scenario, worker)
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
        procs.append(subprocess.Popen([sys.executable, worker, scenario], env=env, text=True,
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


def test_train_ddp_mlp_same_losses_as_gloo(tmp_path):
    """examples/train_ddp.py --model mlp (many gradient tensors, one DDP bucket each), tiny:
    over Gloo, then over nezha with --compare-losses on Gloo's per-step losses, bitwise: on
    2 ranks each sum has two terms, the same in either order."""
    out = _train_ddp_against_gloo(tmp_path, ["--width", "32", "--bucket-mb", "0.004"])
    assert "DeepMLP(width=32, depth=5)" in out[0] and "6 buckets" in out[0], out[0]
    assert "losses equal to" in out[1], out[1]


def test_train_ddp_mlp_with_failover_same_losses_as_gloo(tmp_path):
    """The same over two loop rails (failover on) with buckets above the lazy limit: each
    bucket's in-place input copied when DDP posts it (executor._presnap, in the autograd
    thread), while earlier buckets run."""
    out = _train_ddp_against_gloo(tmp_path, ["--width", "384", "--bucket-mb", "0.5"],
                                  {"NEZHA_RAILS": "loop", "NEZHA_LOOP_RAILS": "2",
                                   "NEZHA_RAIL_TIMEOUT": "5"})
    assert "6 buckets of <= 0.5 MiB" in out[0], out[0]
    assert "losses equal to" in out[1], out[1]


def test_train_ddp_float64_equals_single_process(tmp_path):
    """DDP over nezha in float64 (3 ranks, two loop rails, 6 buckets of up to 1.1 MiB, split
    over both) gives the losses of one process trained on the ranks' batches concatenated
    (tools/loss_reference.py) within 1e-10 per step, from the first loss (before any
    allreduce) on. Other data or init, AVG applied differently, a bucket reduced twice or
    not at all would show; the summation order cannot (about 1e-16). float32 is no such
    check: there a last-bit difference flips ReLUs (docs/torch.md, "Same losses")."""
    common = ["--model", "mlp", "--width", "384", "--depth", "5", "--batch", "4",
              "--steps", "12", "--dtype", "float64"]
    ref = tmp_path / "ref.json"
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "loss_reference.py"),
                        "--ranks", "3", *common[2:], "--out", str(ref)],
                       env=env, text=True, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    env.update(NEZHA_SOCKET_IFNAME="lo", NEZHA_JOB_SECRET="00" * 16,
               TORCH_DEVICE_BACKEND_AUTOLOAD="0", NEZHA_RAILS="loop", NEZHA_LOOP_RAILS="2")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "3",
           "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
           os.path.join(ROOT, "examples", "train_ddp.py"), "--backend", "nezha", *common,
           "--bucket-mb", "0.5", "--warmup", "0",
           "--compare-losses", str(ref), "--compare-rel", "1e-10"]
    p = subprocess.run(cmd, env=env, text=True, capture_output=True, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "6 buckets" in p.stdout and "losses equal to" in p.stdout, p.stdout


def _train_ddp_against_gloo(tmp_path, args, nezha_env=None):
    out = []
    for backend in ("gloo", "nezha"):
        env = dict(os.environ, PYTHONPATH=ROOT, NEZHA_SOCKET_IFNAME="lo",
                   NEZHA_JOB_SECRET="00" * 16, OMP_NUM_THREADS="1",
                   TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
               "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
               os.path.join(ROOT, "examples", "train_ddp.py"), "--backend", backend,
               "--model", "mlp", "--depth", "5", *args,
               "--steps", "8", "--warmup", "2", "--batch", "4",
               "--losses", str(tmp_path / f"{backend}.json")]
        if backend == "nezha":
            cmd += ["--compare-losses", str(tmp_path / "gloo.json"), "--compare-rel", "0"]
            env.update(nezha_env or {})
        p = subprocess.run(cmd, env=env, text=True, capture_output=True, timeout=120)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
        out.append(p.stdout)
    return out


# ---- point to point: batch_isend_irecv, tags, a 3-rank subgroup -------------------------
# The ranks run _p2p_rank below (this file as a script), each check recorded as "ok" or
# the error; tensors are compared exactly with what the sender sent.

def _p2p_rank(rank, n):
    from tests.workers.torch_ranks import recorder
    res = {}
    check = recorder(res, limit=4)

    big = 1 << 20  # 4 MiB of float32 each way: more than a socket or ring buffer holds

    def val(src, dst, k=0, count=big):
        return torch.arange(count, dtype=torch.float32) + 1000.0 * src + 100.0 * dst + k

    def batch(recv_first):
        def go():
            ops, outs = [], {}
            for p in range(n):
                if p == rank:
                    continue
                outs[p] = torch.full((big,), -1.0)
                r = dist.P2POp(dist.irecv, outs[p], p)
                s = dist.P2POp(dist.isend, val(rank, p), p)
                ops += [r, s] if recv_first else [s, r]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            for p, t in outs.items():
                assert torch.equal(t, val(p, rank)), (p, t[:4])
        return go

    def ring():
        out = torch.full((big,), -1.0)
        nxt, prv = (rank + 1) % n, (rank - 1) % n
        ops = [dist.P2POp(dist.isend, val(rank, nxt), nxt), dist.P2POp(dist.irecv, out, prv)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        assert torch.equal(out, val(prv, rank))

    def irecv_then_isend():  # plain non-blocking calls, each rank receiving first
        if rank > 1:
            return
        p = 1 - rank
        out = torch.full((1000,), -1.0)
        ws = [dist.irecv(out, p), dist.isend(val(rank, p, count=1000), p)]
        for w in ws:
            w.wait()
        assert torch.equal(out, val(p, rank, count=1000))

    def tags_batch():  # matched by tag, whatever the order in each rank's list
        if rank > 1:
            return
        p = 1 - rank
        tags = [7, 3, 11, 0]
        outs = {t: torch.full((500 + t,), -1.0) for t in tags}
        ops = [dist.P2POp(dist.isend, val(rank, p, t, 500 + t), p, tag=t) for t in tags]
        order = tags if rank == 0 else list(reversed(tags))
        ops += [dist.P2POp(dist.irecv, outs[t], p, tag=t) for t in order]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        for t in tags:
            assert torch.equal(outs[t], val(p, rank, t, 500 + t)), t

    def tags_blocking():  # isends with tags 2, 1 against blocking recvs of tag 1, then 2
        if rank == 0:
            ws = [dist.isend(val(0, 1, 2, 64), 1, tag=2), dist.isend(val(0, 1, 1, 64), 1, tag=1)]
            for w in ws:
                w.wait()
        elif rank == 1:
            for t in (1, 2):
                out = torch.empty(64)
                dist.recv(out, 0, tag=t)
                assert torch.equal(out, val(0, 1, t, 64)), t

    def tag_mismatch():  # a clear error on the receiver; the group goes on working
        if rank == 0:
            dist.send(torch.ones(8), 1, tag=5)
        elif rank == 1:
            try:
                dist.recv(torch.empty(8), 0, tag=6)
            except ValueError as exc:
                assert "tag 6" in str(exc) and "tag 5" in str(exc), str(exc)
            else:
                raise AssertionError("recv with tag 6 of a message with tag 5 did not raise")
        x = torch.tensor([float(rank + 1)])
        dist.all_reduce(x)
        assert x.item() == n * (n + 1) / 2

    def subgroup():  # ranks 0 and 2 of 3 (rank 1 is not in it), then ranks 1 and 2
        if n < 3:
            return
        g02 = dist.new_group([0, 2], backend="nezha")
        g12 = dist.new_group([1, 2], backend="nezha")
        if rank in (0, 2):
            x = torch.full((1001,), float(rank + 1))
            dist.all_reduce(x, group=g02)
            assert torch.equal(x, torch.full((1001,), 4.0)), x[:4]
            y = torch.arange(13.0) * (rank + 1)
            dist.broadcast(y, src=2, group=g02)
            assert torch.equal(y, torch.arange(13.0) * 3)
            outs = [torch.empty(5) for _ in range(2)]
            dist.all_gather(outs, torch.full((5,), float(rank)), group=g02)
            assert torch.equal(torch.stack(outs), torch.tensor([[0.0] * 5, [2.0] * 5]))
            peer = 2 - rank
            out = torch.empty(big)
            ops = [dist.P2POp(dist.irecv, out, peer, g02), dist.P2POp(dist.isend, val(rank, peer), peer, g02)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            assert torch.equal(out, val(peer, rank))
            assert dist.get_group_rank(g02, rank) == rank // 2
        if rank in (1, 2):
            z = torch.tensor([rank * 10])
            dist.all_reduce(z, group=g12, op=dist.ReduceOp.MAX)
            assert z.item() == 20
            if rank == 1:
                dist.send(torch.tensor([42, 43]), 2, group=g12, tag=9)
            else:
                got = torch.empty(2, dtype=torch.int64)
                dist.recv(got, 1, group=g12, tag=9)
                assert got.tolist() == [42, 43]
        dist.barrier()

    check("batch_recv_first", batch(True))
    check("batch_send_first", batch(False))
    check("ring", ring)
    check("irecv_then_isend", irecv_then_isend)
    check("tags_batch", tags_batch)
    check("tags_blocking", tags_blocking)
    check("tag_mismatch", tag_mismatch)
    check("subgroup", subgroup)
    return res


P2P_CHECKS = ["batch_recv_first", "batch_send_first", "ring", "irecv_then_isend", "tags_batch",
              "tags_blocking", "tag_mismatch", "subgroup"]


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("name", P2P_CHECKS)
def test_p2p_batch_tags_subgroup(n, name):
    for r, res in enumerate(run(n, "p2p", timeout=90, worker=os.path.abspath(__file__))):
        assert res["result"][name] == "ok", f"rank {r}/{n}: {res['result'][name]}"


# ---- recv from any source (dist.recv(t) / dist.irecv(t) without src) ----------------------
# The ranks run _anysrc_rank below. Each message's values name its sender, its receiver and
# its index k among that sender's messages, so a tensor is checked exactly against what the
# rank that the recv names as source sent, and the k's show the order per sender.

def _anysrc_rank(rank, n):
    import time
    from nezha.torch import ProcessGroupNezha
    from tests.workers.torch_ranks import recorder
    res = {}
    check = recorder(res, limit=4, after=dist.barrier)

    def val(src, dst, k, count=100):
        return torch.arange(count, dtype=torch.float32) + 1000.0 * src + 100.0 * dst + k

    def each_receiver_in_turn():  # torch's test_send_recv_any_source, checked exactly
        per = 3
        for dst in range(n):
            if dst != rank:
                for k in range(per):
                    dist.send(val(rank, dst, k), dst)
                continue
            got = {}
            for i in range(per * (n - 1)):
                out = torch.full((100,), -1.0)
                if i % 2:
                    w = dist.irecv(out)
                    w.wait()
                    src = w._source_rank()
                else:
                    src = dist.recv(out)
                k = len(got.setdefault(src, []))
                assert src != rank and 0 <= src < n, src
                assert torch.equal(out, val(src, rank, k)), (src, k, out[:3])
                got[src].append(k)
            assert sorted(got) == [p for p in range(n) if p != rank], got
            assert all(len(v) == per for v in got.values()), got

    def many_senders_at_once():  # every other rank sends to rank 0 at the same time
        per, big = 4, 1 << 18  # 1 MiB messages: more than a socket buffer holds
        if rank:
            ws = [dist.isend(val(rank, 0, k, big), 0) for k in range(per)]
            for w in ws:
                w.wait()
            return
        nxt = {p: 0 for p in range(1, n)}
        for _ in range(per * (n - 1)):
            out = torch.empty(big)
            src = dist.recv(out)
            assert torch.equal(out, val(src, 0, nxt[src], big)), (src, nxt[src], out[:3])
            nxt[src] += 1  # each sender's messages arrive in its order
        assert nxt == {p: per for p in range(1, n)}, nxt

    def tags():  # the tag decides: a rank whose next message has another tag is passed over
        if n < 3:
            if rank == 1:
                dist.send(val(1, 0, 0), 0, tag=3)
                dist.send(val(1, 0, 1), 0, tag=7)
            elif rank == 0:
                for k, t in enumerate((3, 7)):
                    out = torch.empty(100)
                    assert dist.recv(out, tag=t) == 1
                    assert torch.equal(out, val(1, 0, k)), t
            return
        if rank == 1:
            dist.send(val(1, 0, 0), 0, tag=7)
        elif rank == 2:
            time.sleep(0.5)  # rank 1's message (tag 7) is there well before this one
            dist.send(val(2, 0, 0), 0, tag=3)
        elif rank == 0:
            time.sleep(0.2)
            out3, out7 = torch.empty(100), torch.empty(100)
            assert dist.recv(out3, tag=3) == 2
            assert torch.equal(out3, val(2, 0, 0))
            assert dist.recv(out7, tag=7) == 1
            assert torch.equal(out7, val(1, 0, 0))

    def named_and_any():  # a named recv keeps its message; the any-source ones get the rest
        if rank == 1:
            for k in range(2):
                dist.send(val(1, 0, k), 0)
        elif rank == 2:
            dist.send(val(2, 0, 0), 0)
        elif rank == 0:
            first = torch.empty(100)
            dist.recv(first, 1)
            assert torch.equal(first, val(1, 0, 0))
            seen = {}
            for _ in range(1 if n == 2 else 2):
                out = torch.empty(100)
                src = dist.recv(out)
                k = 1 if src == 1 else 0
                assert torch.equal(out, val(src, 0, k)), (src, out[:3])
                seen[src] = k
            assert seen == ({1: 1} if n == 2 else {1: 1, 2: 0}), seen

    def irecv_any_then_isend():  # every rank: irecv from any source, then isend to the next
        nxt, prv = (rank + 1) % n, (rank - 1) % n
        out = torch.full((1 << 18,), -1.0)
        ws = [dist.irecv(out), dist.isend(val(rank, nxt, 0, 1 << 18), nxt)]
        for w in ws:
            w.wait()
        assert ws[0]._source_rank() == prv
        assert torch.equal(out, val(prv, rank, 0, 1 << 18))

    def timeout_error():  # nobody sends tag 99: a clear error after the group's timeout
        if n >= 3 and rank == 0:
            _no_sender()
        x = torch.tensor([1.0])  # the group still works
        dist.all_reduce(x)
        assert x.item() == n

    def _no_sender():
        pg = dist.distributed_c10d._get_default_group()
        pg = pg if isinstance(pg, ProcessGroupNezha) else pg._get_backend(torch.device("cpu"))
        old = pg.comm.timeout
        pg.comm.timeout = 1.0
        try:
            t0 = time.monotonic()
            dist.recv(torch.empty(4), tag=99)
        except Exception as exc:
            assert "any source" in str(exc) and "tag 99" in str(exc), str(exc)
            assert time.monotonic() - t0 < 10
        else:
            raise AssertionError("recv from any source of a tag nobody sends returned")
        finally:
            pg.comm.timeout = old

    check("each_receiver_in_turn", each_receiver_in_turn)
    check("many_senders_at_once", many_senders_at_once)
    check("tags", tags)
    check("named_and_any", named_and_any)
    check("irecv_any_then_isend", irecv_any_then_isend)
    check("timeout_error", timeout_error)
    return res


ANYSRC_CHECKS = ["each_receiver_in_turn", "many_senders_at_once", "tags", "named_and_any",
                 "irecv_any_then_isend", "timeout_error"]


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("name", ANYSRC_CHECKS)
def test_recv_any_source(n, name):
    for r, res in enumerate(run(n, "anysrc", timeout=90, worker=os.path.abspath(__file__))):
        assert res["result"][name] == "ok", f"rank {r}/{n}: {res['result'][name]}"


# ---- overlap (issue 14): Works return at once and complete by themselves during backward ---
# The ranks run _overlap_rank below. Order and state only, no timing: a rank that must not
# have joined yet waits for a store key the other rank sets after its checks.

def _overlap_rank(rank, n):
    import time
    from datetime import timedelta
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from nezha.torch import ProcessGroupNezha
    from tests.workers.torch_ranks import recorder
    res = {}
    check = recorder(res, limit=4, after=dist.barrier)
    store = dist.distributed_c10d._get_default_store()

    def two_in_flight_before_peer_joins():
        # rank 0 queues two allreduces while rank 1 has not called its own (it waits for
        # "go", which rank 0 sets only after its checks): both calls must return at once
        # (a backend that blocked until completion would never get to "go") and both Works
        # be pending, the second queued behind the first; then both complete, in order.
        a = torch.full((1 << 20,), float(rank + 1))
        b = torch.full((1 << 18,), float(10 * (rank + 1)))
        if rank != 0:
            store.wait(["nz14/go"], timedelta(seconds=30))
        wa = dist.all_reduce(a, async_op=True)
        wb = dist.all_reduce(b, async_op=True)
        fa, fb = wa.get_future(), wb.get_future()
        if rank == 0:
            state = (wa.is_completed(), wb.is_completed(), fa.done(), fb.done())
            assert state == (False,) * 4, f"completed before rank 1 joined: {state}"
            order = []
            fa.then(lambda f: order.append("a"))
            fb.then(lambda f: order.append("b"))
            store.set("nz14/go", "1")
        wb.wait(timeout=timedelta(seconds=30))
        assert wa.is_completed(), "the second allreduce completed before the first"
        want = float(sum(range(1, n + 1)))
        assert torch.equal(a, torch.full_like(a, want)), a[:4]
        assert torch.equal(b, torch.full_like(b, 10 * want)), b[:4]
        if rank == 0:
            deadline = time.monotonic() + 30
            while len(order) < 2 and time.monotonic() < deadline:  # then() runs on the
                time.sleep(0.001)                                # completion thread
            assert order == ["a", "b"], order

    def ddp_bucket_completes_during_backward():
        # DDP with one bucket per layer: inside backward, in a hook on the first layer's
        # weight (its gradient comes last), the buckets DDP issued so far must complete
        # while backward is still running on every rank (their Works complete by
        # themselves; nobody waits on them before the end of backward).
        torch.manual_seed(0)
        width, depth = 256, 4
        model = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])
        ddp = DDP(model, bucket_cap_mb=0.2)  # a layer is 0.25 MiB: one bucket each
        works, seen = [], {}
        orig = ProcessGroupNezha.allreduce

        def allreduce(self, tensors, opts=None):
            w = orig(self, tensors, opts)
            works.append(w)
            return w

        def hook(grad):
            seen["issued"] = len(works)
            if not works:
                return grad
            deadline = time.monotonic() + 30
            while not works[0].is_completed() and time.monotonic() < deadline:
                time.sleep(0.001)
            seen["first_done"] = works[0].is_completed()
            seen["done"] = sum(w.is_completed() for w in works)
            return grad

        ProcessGroupNezha.allreduce = allreduce
        try:
            x = torch.randn(8, width)
            # the first step puts the first 1 MiB of gradients in one bucket (torch's
            # first-bucket cap); DDP rebuilds its buckets after it: one per layer from then on
            F.mse_loss(ddp(x + rank), torch.zeros(8, width)).backward()
            for step in range(2):
                works.clear()
                seen.clear()
                h = model[0].weight.register_hook(hook)
                F.mse_loss(ddp(x + rank), torch.zeros(8, width)).backward()
                h.remove()
                assert seen.get("issued", 0) >= 2, f"step {step}: {seen}: DDP issued " \
                    "fewer than 2 buckets before the first layer's gradient"
                assert seen["first_done"], f"step {step}: {seen}: the first bucket did " \
                    "not complete while backward ran"
                assert all(w.is_completed() for w in works), f"step {step}: {seen}"
        finally:
            ProcessGroupNezha.allreduce = orig

    check("two_in_flight_before_peer_joins", two_in_flight_before_peer_joins)
    check("ddp_bucket_completes_during_backward", ddp_bucket_completes_during_backward)
    return res


OVERLAP_CHECKS = ["two_in_flight_before_peer_joins", "ddp_bucket_completes_during_backward"]


@pytest.mark.parametrize("name", OVERLAP_CHECKS)
def test_overlap_async_works(name):
    for r, res in enumerate(run(2, "overlap", timeout=90, worker=os.path.abspath(__file__))):
        assert res["result"][name] == "ok", f"rank {r}/2: {res['result'][name]}"


if __name__ == "__main__":  # one rank of a scenario above (run() starts it)
    from datetime import timedelta as _td
    import nezha.torch  # noqa: F401
    dist.init_process_group("nezha", timeout=_td(seconds=40))
    _out = {"p2p": _p2p_rank, "anysrc": _anysrc_rank,
            "overlap": _overlap_rank}[sys.argv[1]](dist.get_rank(), dist.get_world_size())
    from tests._result import report
    report({"result": _out})
    dist.destroy_process_group()
