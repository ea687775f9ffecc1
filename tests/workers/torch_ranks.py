"""One rank of a tests/test_torch.py scenario over the torch.distributed API; prints
RESULT {json}. Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (env:// init)."""
import os
import sys
import traceback
import zlib
from datetime import timedelta

import torch
import torch.distributed as dist

import nezha.torch  # noqa: F401  registers "nezha"
from tests._result import report as _report

R = dist.ReduceOp
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int64": torch.int64}
SIZES = [0, 1, 2, 13, 1021, 65537]


def report(**kw):
    _report(kw)


def data(dtype, count, rank, tag, op=None):
    """Rank's input: small integers, exact in every dtype (bfloat16 holds them exactly)."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{tag}|{rank}|{count}|{op}".encode()))
    if op == R.PRODUCT:
        v = torch.tensor([1, 2, -1, 1])[torch.randint(0, 4, (count,), generator=g)]
    elif op in (R.BAND, R.BOR, R.BXOR):
        v = torch.randint(0, 1 << 20, (count,), generator=g)
    else:
        v = torch.randint(-4, 5, (count,), generator=g)
    return v.to(dtype)


def oracle(op, xs, dtype):
    """op over the ranks' tensors, computed in float64/int64, cast to dtype."""
    wide = [x.to(torch.float64 if dtype.is_floating_point else torch.int64) for x in xs]
    out = wide[0].clone()
    for x in wide[1:]:
        if op in (R.SUM, R.AVG):
            out += x
        elif op == R.PRODUCT:
            out *= x
        elif op == R.MIN:
            out = torch.minimum(out, x)
        elif op == R.MAX:
            out = torch.maximum(out, x)
        elif op == R.BAND:
            out &= x
        elif op == R.BOR:
            out |= x
        elif op == R.BXOR:
            out ^= x
    if op == R.AVG:
        out /= len(xs)
    return out.to(dtype)


def ops_for(dtype):
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    return ops + ([R.AVG] if dtype.is_floating_point else [R.BAND, R.BOR, R.BXOR])


def close(a, b):
    torch.testing.assert_close(a, b, rtol=0, atol=0) if not a.dtype.is_floating_point else \
        torch.testing.assert_close(a, b)


def recorder(results, limit=3, after=None):
    """check(name, fn): run fn, record "ok" or the error in results[name] (the test
    reports every rank's), then call after (e.g. a barrier that keeps ranks in step)."""
    def check(name, fn):
        try:
            fn()
            results[name] = "ok"
        except Exception as exc:  # recorded, reported by the test
            results[name] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=limit)}"
        if after is not None:
            after()
    return check


def collectives(rank, n):
    """Every collective through the torch API against the oracle; {name: "ok" | error}."""
    results = {}
    check = recorder(results)

    for dn, dt in DTYPES.items():
        for c in SIZES:
            for op in ops_for(dt):
                def ar(op=op, c=c, dt=dt):
                    t = data(dt, c, rank, "ar", op)
                    dist.all_reduce(t, op=op)
                    close(t, oracle(op, [data(dt, c, r, "ar", op) for r in range(n)], dt))
                check(f"all_reduce/{dn}/{c}/{op}", ar)

            def bc(c=c, dt=dt):
                root = n - 1
                t = data(dt, c, rank, "bc")
                dist.broadcast(t, src=root)
                close(t, data(dt, c, root, "bc"))
            check(f"broadcast/{dn}/{c}", bc)

            def red(c=c, dt=dt):
                root = n - 1
                for op in (R.SUM, R.MAX):
                    t = data(dt, c, rank, "red", op)
                    dist.reduce(t, dst=root, op=op)
                    if rank == root:
                        close(t, oracle(op, [data(dt, c, r, "red", op) for r in range(n)], dt))
            check(f"reduce/{dn}/{c}", red)

            def ag(c=c, dt=dt):
                outs = [torch.empty(c, dtype=dt) for _ in range(n)]
                dist.all_gather(outs, data(dt, c, rank, "ag"))
                for r in range(n):
                    close(outs[r], data(dt, c, r, "ag"))
                out = torch.empty(n * c, dtype=dt)
                dist.all_gather_into_tensor(out, data(dt, c, rank, "ag1"))
                close(out, torch.cat([data(dt, c, r, "ag1") for r in range(n)]))
            check(f"all_gather/{dn}/{c}", ag)

            def rs(c=c, dt=dt):
                for op in (R.SUM, R.MIN):
                    ins = [data(dt, c, rank, f"rs{j}", op) for j in range(n)]
                    out = torch.empty(c, dtype=dt)
                    dist.reduce_scatter(out, ins, op=op)
                    close(out, oracle(op, [data(dt, c, r, f"rs{rank}", op) for r in range(n)], dt))
                    full = data(dt, n * c, rank, "rs1", op)
                    out = torch.empty(c, dtype=dt)
                    dist.reduce_scatter_tensor(out, full, op=op)
                    exp = oracle(op, [data(dt, n * c, r, "rs1", op) for r in range(n)], dt)
                    close(out, exp[rank * c:(rank + 1) * c])
            check(f"reduce_scatter/{dn}/{c}", rs)

            def a2a(c=c, dt=dt):
                out = torch.empty(n * c, dtype=dt)
                dist.all_to_all_single(out, data(dt, n * c, rank, "a2a"))
                close(out, torch.cat([data(dt, n * c, r, "a2a")[rank * c:(rank + 1) * c]
                                      for r in range(n)]))
                # uneven: rank r sends (r + j + c) % 5 rows of 3 to rank j
                k = lambda r, j: (r + j + c) % 5  # noqa: E731
                src = data(dt, 3 * sum(k(rank, j) for j in range(n)), rank, "a2av").view(-1, 3)
                out = torch.empty(sum(k(r, rank) for r in range(n)), 3, dtype=dt)
                dist.all_to_all_single(out, src, [k(r, rank) for r in range(n)],
                                       [k(rank, j) for j in range(n)])
                exp = []
                for r in range(n):
                    s = data(dt, 3 * sum(k(r, j) for j in range(n)), r, "a2av").view(-1, 3)
                    off = sum(k(r, j) for j in range(rank))
                    exp.append(s[off:off + k(r, rank)])
                close(out, torch.cat(exp))
                ins = [data(dt, c + j, rank, f"a2al{j}") for j in range(n)]
                outs = [torch.empty(c + rank, dtype=dt) for _ in range(n)]
                dist.all_to_all(outs, ins)
                for r in range(n):
                    close(outs[r], data(dt, c + rank, r, f"a2al{rank}"))
            check(f"all_to_all/{dn}/{c}", a2a)

            def gs(c=c, dt=dt):
                root = n - 1
                outs = [torch.empty(c, dtype=dt) for _ in range(n)] if rank == root else None
                dist.gather(data(dt, c, rank, "ga"), outs, dst=root)
                if rank == root:
                    for r in range(n):
                        close(outs[r], data(dt, c, r, "ga"))
                out = torch.empty(c, dtype=dt)
                ins = [data(dt, c, j, "sc") for j in range(n)] if rank == 0 else None
                dist.scatter(out, ins, src=0)
                close(out, data(dt, c, rank, "sc"))
            check(f"gather_scatter/{dn}/{c}", gs)

            def p2p(c=c, dt=dt):
                if n == 1:
                    return
                nxt, prv = (rank + 1) % n, (rank - 1) % n
                got = torch.empty(c, dtype=dt)
                reqs = [dist.isend(data(dt, c, rank, "p2p"), nxt), dist.irecv(got, prv)]
                for q in reqs:
                    q.wait()
                close(got, data(dt, c, prv, "p2p"))
            check(f"send_recv/{dn}/{c}", p2p)

    def misc():
        dist.barrier()
        # non-contiguous in place, async with the future, bool, coalesced
        t = torch.arange(12.).view(3, 4) * (rank + 1)
        col = t[:, ::2]
        w = dist.all_reduce(col, async_op=True)
        assert w.get_future().wait()[0] is col
        assert torch.equal(col, (torch.arange(12.).view(3, 4) * n * (n + 1) / 2)[:, ::2])
        b = torch.tensor([rank == 0, True, False])
        dist.all_reduce(b, op=R.MIN)
        assert b.tolist() == [n == 1, True, False]
        ts = [torch.ones(3) * (rank + 1), torch.ones(2, 2)]
        dist.all_reduce_coalesced(ts)
        assert ts[0].tolist() == [n * (n + 1) / 2] * 3 and ts[1].tolist() == [[n, n]] * 2
        # a subgroup of the first and last rank, and the functional API
        sub = dist.new_group([0, n - 1]) if n > 1 else dist.group.WORLD
        if rank in (0, n - 1):
            x = torch.ones(5)
            dist.all_reduce(x, group=sub)
            assert x.tolist() == [float(min(n, 2))] * 5, x
            assert dist.get_backend(sub) == "nezha"
        import torch.distributed._functional_collectives as fc
        y = fc.all_reduce(torch.ones(4), "sum", dist.group.WORLD).wait()
        assert y.tolist() == [float(n)] * 4
    check("misc", misc)
    return results


def ddp(rank, n):
    """DDP over nezha == single-process training on the concatenated batch; 50 steps over
    nezha, Gloo and Gloo with nezha's hook give the same losses."""
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    def net():
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(),
                             nn.Linear(8 * 6 * 6, 32), nn.ReLU(), nn.Linear(32, 5))

    def batch(step, r, bs=4):
        g = torch.Generator().manual_seed(step * 100 + r)
        return torch.randn(bs, 3, 8, 8, generator=g), torch.randint(0, 5, (bs,), generator=g)

    out = {}
    # equivalence with one process on the concatenated batch
    ref, model = net(), DDP(net())
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        x, y = batch(step, rank)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        xs, ys = zip(*[batch(step, r) for r in range(n)])
        opt_ref.zero_grad()
        nn.functional.cross_entropy(ref(torch.cat(xs)), torch.cat(ys)).backward()
        opt_ref.step()
    out["single_max_abs_diff"] = max((p - q).abs().max().item()
                                     for p, q in zip(model.module.parameters(), ref.parameters()))
    # 50 steps: nezha, gloo, gloo + nezha.torch.allreduce_hook
    gloo = dist.new_group(backend="gloo")
    runs = {"nezha": DDP(net()), "gloo": DDP(net(), process_group=gloo),
            "hook": DDP(net(), process_group=gloo)}
    runs["hook"].register_comm_hook(None, nezha.torch.allreduce_hook)
    losses = {}
    for name, m in runs.items():
        o = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        ls = []
        for step in range(50):
            x, y = batch(1000 + step, rank, 16)
            o.zero_grad()
            loss = nn.functional.cross_entropy(m(x), y)
            loss.backward()
            o.step()
            t = loss.detach().clone()
            dist.all_reduce(t, group=gloo)
            ls.append(t.item() / n)
        losses[name] = ls
    out["losses"] = losses
    nezha.torch.hook.forget(None)
    # uneven inputs: rank r has 3 + 2r batches; DDP's join() shadows the missing allreduces
    params = {}
    for name, pg in (("nezha", None), ("gloo", gloo)):
        m = DDP(net(), process_group=pg)
        o = torch.optim.SGD(m.parameters(), lr=0.1)
        with m.join():
            for step in range(3 + 2 * rank):
                x, y = batch(2000 + step, rank)
                o.zero_grad()
                nn.functional.cross_entropy(m(x), y).backward()
                o.step()
        params[name] = [p.detach().clone() for p in m.module.parameters()]
    out["join_max_abs_diff"] = max((a - b).abs().max().item()
                                   for a, b in zip(params["nezha"], params["gloo"]))
    out["join_moved"] = max((a - b).abs().max().item()
                            for a, b in zip(params["nezha"], net().parameters()))
    return out


def errors(rank, n):
    """A tensor not on the CPU, and shapes that differ between ranks."""
    out = {}
    try:
        dist.all_reduce(torch.empty(3, device="meta"))
        out["device"] = None
    except Exception as exc:
        out["device"] = f"{type(exc).__name__}: {exc}"
    try:
        t = torch.ones(100 + 7 * rank)
        dist.all_reduce(t)
        out["mismatch"] = None
    except Exception as exc:
        out["mismatch"] = f"{type(exc).__name__}: {exc}"
    return out


def main(scenario):
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("nezha", timeout=timedelta(seconds=60))
    pg = dist.group.WORLD
    info = {"backend": dist.get_backend(), "name": pg.name(), "rank": rank}
    res = {"collectives": collectives, "ddp": ddp, "errors": errors}[scenario](rank, n)
    report(info=info, result=res)
    if scenario != "errors":
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
