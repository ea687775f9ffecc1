"""DDP training of a small convolutional net on synthetic data (CPU), over nezha or Gloo.

    torchrun --nproc-per-node 2 examples/train_ddp.py --backend nezha
    torchrun --nproc-per-node 2 examples/train_ddp.py --backend gloo
    torchrun --nproc-per-node 2 examples/train_ddp.py --backend gloo+hook   # Gloo group,
                                                                  # buckets through nezha

Prints samples/s and how a step's time splits between compute (the same steps under
ddp.no_sync(), no communication) and communication left exposed (the rest), plus the
allreduce time of one step's gradients alone: in one tensor, and in DDP's buckets (all
issued at once, as DDP issues them during backward, and waited for together). Exposed
communication below the buckets' time alone is what overlap with backward hid. Then the CPU
time a step takes in this process (every thread), how busy the machine's CPUs were (with
more ranks than cores, overlap needs a core for the communication thread: docs/torch.md,
NEZHA_PROGRESS_SCHED) and torch's thread counts.

--model cnn (the default, the README's numbers): conv 3->32, conv 32->64, fc 4096->width,
fc width->10. --width scales the fully connected layer, which holds 99.8 % of the
parameters at width 2048: one tensor, so DDP has nothing to overlap with backward (its
gradient is ready only at the end of backward).

--model mlp: --depth blocks h = relu(Linear(width, width)(LayerNorm(h))) on width-wide
synthetic vectors, then a head Linear(width, 10). The gradients are spread over depth equal
tensors (width*width + width each, plus the norms' 2*width); with --bucket-mb 4 (the default
for mlp; at width 1024 a layer is 4.0 MiB) DDP makes one bucket per layer (8 at depth 8,
plus the first norm's 8 KiB), and each bucket's allreduce starts while backward still runs
through the layers below it.
Width 1024, depth 8: 8.42 M parameters, 32.1 MiB of gradients, the same volume as cnn at
width 2048.

--losses FILE writes rank 0's per-step losses; --compare-losses FILE checks them, step by
step, against another run's file (equal within --compare-rel, 1e-4 relative, e.g. nezha
against gloo) and exits with status 1 if they differ. With --warmup 0 the first loss is the
one before any allreduce. --dtype float64 runs the model in double precision: against
tools/loss_reference.py (one process, the ranks' batches concatenated) every step agrees to
about 1e-15, whatever the summation order; float32 --act relu (the default) does not repeat
under another summation order (docs/torch.md, "Same losses").
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    """conv 3->32 -> conv 32->64 -> fc (64*8*8 -> width) -> fc (width -> 10), 32x32 inputs."""

    def __init__(self, width=512):
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.f1 = nn.Linear(64 * 8 * 8, width)
        self.f2 = nn.Linear(width, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.f2(F.relu(self.f1(x.flatten(1))))


class DeepMLP(nn.Module):
    """depth blocks h = relu(fc_i(layernorm_i(h))), fc_i: width -> width, then a head
    width -> 10: the parameters sit in depth equal tensors (plus biases, the norms' 2 x width
    and a small head), registered in forward order so that backward produces the gradients
    in the reverse of the parameters' order (DDP's buckets: one layer each, and the first
    norm's 2 x width alone at the end). The norms keep SGD with momentum 0.9 at lr 0.05
    stable. act: relu, or gelu (smooth: a last-bit change of the weights cannot flip a
    ReLU's gradient between 0 and 1, which makes relu runs under another summation order
    part within a few steps; docs/torch.md)."""

    def __init__(self, width=1024, depth=8, act="relu"):
        super().__init__()
        self.act = getattr(F, act)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width))
                                    for _ in range(depth))
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for block in self.blocks:
            x = self.act(block(x))
        return self.head(x)


def batches(rank, batch, seed=0, shape=(3, 32, 32)):
    """Synthetic, learnable data: the label is a function of the input, different per rank."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    n = 1
    for d in shape:
        n *= d
    w = torch.randn(n, 10, generator=torch.Generator().manual_seed(seed))
    while True:
        x = torch.randn(batch, *shape, generator=g)
        yield x, (x.flatten(1) @ w).argmax(1)


def machine_cpu():
    """(busy, total) jiffies of the whole machine (/proc/stat: every rank on this host, lab
    namespaces included, share it), or None."""
    from nezha.lab.launch import cpu_times
    try:
        return cpu_times()
    except (OSError, ValueError, IndexError):
        return None


def machine_busy(a, b):
    """Percent of the machine's CPU time busy between two machine_cpu() readings."""
    if a is None or b is None or b[1] <= a[1]:
        return float("nan")
    return 100.0 * (b[0] - a[0]) / (b[1] - a[1])


def ddp_bucket_sizes(model, cap_mb):
    """The element counts of the buckets DDP makes given bucket_cap_mb (an explicit cap also
    caps the first bucket): gradients in the order backward produces them (for these models
    the reverse of the parameters'), a bucket closed once it holds cap_mb MiB or more."""
    sizes, n, size = [], 0, 0
    for p in reversed(list(model.parameters())):
        n += p.numel()
        size += p.numel() * p.element_size()
        if size >= cap_mb * 2**20:
            sizes.append(n)
            n, size = 0, 0
    return sizes + ([n] if n else [])


def ddp_buckets(model, cap_mb):
    """How many buckets DDP makes given bucket_cap_mb (ddp_bucket_sizes)."""
    return len(ddp_bucket_sizes(model, cap_mb))


def compare_losses(mine, path, rel=1e-4):
    """Check per-step losses against another run's --losses file; (ok, message)."""
    with open(path) as f:
        other = json.load(f)
    if len(other) != len(mine):
        return False, f"{path} has {len(other)} steps, this run {len(mine)}"
    worst, at = 0.0, None
    for i, (a, b) in enumerate(zip(mine, other)):
        d = abs(a - b) / max(abs(b), 1e-12)
        if d != d:  # NaN
            return False, f"step {i}: loss {a!r} against {b!r} in {path}"
        if d > worst:
            worst, at = d, i
    if worst > rel:
        return False, (f"losses differ from {path}: step {at}: {mine[at]!r} against "
                       f"{other[at]!r} (relative {worst:.3g} > {rel:g})")
    return True, f"losses equal to {path}'s within {rel:g} relative ({len(mine)} steps, " \
                 f"largest relative difference {worst:.3g})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="nezha", choices=["nezha", "gloo", "gloo+hook"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    ap.add_argument("--model", default="cnn", choices=["cnn", "mlp"])
    ap.add_argument("--width", type=int, default=None, help="cnn: 512, mlp: 1024")
    ap.add_argument("--depth", type=int, default=8, help="mlp: number of width x width layers")
    ap.add_argument("--act", default="relu", choices=["relu", "gelu"], help="mlp's activation")
    ap.add_argument("--bucket-mb", type=float, default=None,
                    help="DDP's bucket_cap_mb (cnn: 25, DDP's default; mlp: 4, one layer each "
                         "at width 1024)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"],
                    help="of the model and data; float64 gives a reference for the losses "
                         "(tools/loss_reference.py)")
    ap.add_argument("--losses", help="write rank 0's per-step losses (JSON) to this file")
    ap.add_argument("--compare-losses", metavar="FILE",
                    help="check rank 0's per-step losses against this --losses file")
    ap.add_argument("--compare-rel", type=float, default=1e-4,
                    help="largest relative difference per step --compare-losses allows")
    args = ap.parse_args()
    if args.width is None:
        args.width = 512 if args.model == "cnn" else 1024
    if args.bucket_mb is None:
        args.bucket_mb = 25.0 if args.model == "cnn" else 4.0

    if args.backend == "nezha":
        import nezha.torch  # noqa: F401  registers the backend
    dist.init_process_group("gloo" if args.backend.startswith("gloo") else "nezha")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    dtype = getattr(torch, args.dtype)
    if args.model == "cnn":
        model, shape, desc = Net(args.width), (3, 32, 32), f"Net(width={args.width})"
    else:
        model, shape = DeepMLP(args.width, args.depth, args.act), (args.width,)
        desc = f"DeepMLP(width={args.width}, depth={args.depth}" + \
            (f", act={args.act})" if args.act != "relu" else ")")
    model = model.to(dtype)  # after init: float64 starts from the float32 weights
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb)
    if args.backend == "gloo+hook":
        import nezha.torch
        ddp.register_comm_hook(None, nezha.torch.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    data = batches(rank, args.batch, args.seed, shape)
    nparams = sum(p.numel() for p in model.parameters())

    def step(sync=True):
        x, y = next(data)
        x = x.to(dtype)
        opt.zero_grad(set_to_none=True)
        if sync:
            loss = F.cross_entropy(ddp(x), y)
            loss.backward()
        else:
            with ddp.no_sync():
                loss = F.cross_entropy(ddp(x), y)
                loss.backward()
        opt.step()
        return loss.item()

    def timed(n, sync):
        dist.barrier()
        t0, c0, m0 = time.perf_counter(), time.process_time(), machine_cpu()
        losses = [step(sync) for _ in range(n)]
        cpu = (time.process_time() - c0) / n
        busy = machine_busy(m0, machine_cpu())
        t = torch.tensor([time.perf_counter() - t0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        return t.item() / n, losses, cpu, busy

    for _ in range(args.warmup):
        step()
    t_step, losses, cpu_step, busy_step = timed(args.steps, True)
    t_comp, _, cpu_comp, busy_comp = timed(max(5, args.steps // 3), False)
    # one step's gradients, allreduced alone (as the process group does it)
    grads = torch.randn(nparams, dtype=dtype)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(5):
        dist.all_reduce(grads)
    t_ar = (time.perf_counter() - t0) / 5
    # the same gradients in DDP's buckets, all issued at once (as DDP issues them during
    # backward) and waited for together: what the buckets' communication takes with nothing
    # to overlap; exposed communication below this is what overlap with backward hid
    sizes = ddp_bucket_sizes(model, args.bucket_mb)
    nbuckets = len(sizes)
    bufs = [torch.randn(k, dtype=dtype) for k in sizes]
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(5):
        for w in [dist.all_reduce(b, async_op=True) for b in bufs]:
            w.wait()
    t_bk = (time.perf_counter() - t0) / 5
    status = 0
    if rank == 0:
        sps = args.batch * size / t_step
        exposed = max(0.0, t_step - t_comp)
        print(f"backend {args.backend}  ranks {size}  model {desc} "
              f"{nparams / 1e6:.2f} M params ({nparams * torch.finfo(dtype).bits / 8 / 2**20:.1f} MiB of gradients, "
              f"{nbuckets} buckets of <= {args.bucket_mb:g} MiB)  batch {args.batch}/rank")
        print(f"samples/s {sps:.1f}  step {t_step * 1e3:.1f} ms = compute {t_comp * 1e3:.1f} ms "
              f"({100 * min(t_comp, t_step) / t_step:.0f} %) + exposed communication "
              f"{exposed * 1e3:.1f} ms ({100 * exposed / t_step:.0f} %)  "
              f"allreduce of all gradients alone {t_ar * 1e3:.1f} ms, in the {nbuckets} "
              f"buckets alone {t_bk * 1e3:.1f} ms")
        print(f"CPU a step, this process (every thread): {cpu_step * 1e3:.1f} ms with DDP, "
              f"{cpu_comp * 1e3:.1f} ms under no_sync; the machine's {os.cpu_count()} CPUs busy "
              f"{busy_step:.0f} % / {busy_comp:.0f} %  (torch threads: {torch.get_num_threads()} "
              f"intra-op, {torch.get_num_interop_threads()} inter-op)")
        print(f"loss first {losses[0]:.4f} last {losses[-1]:.4f}")
        if args.losses:
            with open(args.losses, "w") as f:
                json.dump(losses, f)
        if args.compare_losses:
            ok, msg = compare_losses(losses, args.compare_losses, args.compare_rel)
            print(msg)
            status = 0 if ok else 1
    # Gloo (torch 2.13) aborts now and then at teardown ("terminate called without an active
    # exception": a thread of its group destroyed while joinable), even after meeting here
    # first (CI, 2026-11-24 13:37): the Gloo baseline leaves without running destructors.
    dist.barrier()
    if args.backend == "gloo":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    dist.destroy_process_group()
    raise SystemExit(status)


if __name__ == "__main__":
    main()
