"""DDP training of a small convolutional net on synthetic data (CPU), over nezha or Gloo.

    torchrun --nproc-per-node 2 examples/train_ddp.py --backend nezha
    torchrun --nproc-per-node 2 examples/train_ddp.py --backend gloo
    torchrun --nproc-per-node 2 examples/train_ddp.py --backend gloo+hook   # Gloo group,
                                                                  # buckets through nezha

Prints samples/s and how a step's time splits between compute (the same steps under
ddp.no_sync(), no communication) and communication left exposed (the rest), plus the
allreduce time of one step's gradients alone. --width scales the fully connected layer,
which holds most parameters: wider makes the step more communication-bound.
"""
import argparse
import json
import os
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


def batches(rank, batch, seed=0):
    """Synthetic, learnable data: the label is a function of the image, different per rank."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    w = torch.randn(3 * 32 * 32, 10, generator=torch.Generator().manual_seed(seed))
    while True:
        x = torch.randn(batch, 3, 32, 32, generator=g)
        yield x, (x.flatten(1) @ w).argmax(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="nezha", choices=["nezha", "gloo", "gloo+hook"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--bucket-mb", type=float, default=25.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--losses", help="write rank 0's per-step losses (JSON) to this file")
    args = ap.parse_args()

    EV = []
    import sys
    if os.environ.get("SWITCH"):
        sys.setswitchinterval(float(os.environ["SWITCH"]))
    T0 = [time.perf_counter()]
    if args.backend == "nezha":
        import nezha.torch  # noqa: F401  registers the backend
        from nezha.torch import process_group as _pg
        _orig = _pg.ProcessGroupNezha.allreduce
        def _ar(self, tensors, opts=None):
            n = tensors[0].numel()
            EV.append(("call", n, time.perf_counter()))
            w = _orig(self, tensors, opts)
            w.get_future().then(lambda f: EV.append(("done", n, time.perf_counter())))
            return w
        _pg.ProcessGroupNezha.allreduce = _ar
    dist.init_process_group("gloo" if args.backend.startswith("gloo") else "nezha")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    model = Net(args.width)
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb, gradient_as_bucket_view=os.environ.get("GAV") == "1")
    if args.backend == "gloo+hook":
        import nezha.torch
        ddp.register_comm_hook(None, nezha.torch.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    data = batches(rank, args.batch, args.seed)
    nparams = sum(p.numel() for p in model.parameters())

    def step(sync=True):
        EV.append(("step", 0, time.perf_counter()))
        x, y = next(data)
        opt.zero_grad(set_to_none=True)
        if sync:
            loss = F.cross_entropy(ddp(x), y)
            EV.append(("bwd", 0, time.perf_counter()))
            loss.backward()
            EV.append(("bwd-end", 0, time.perf_counter()))
        else:
            with ddp.no_sync():
                loss = F.cross_entropy(ddp(x), y)
                loss.backward()
        EV.append(("opt", 0, time.perf_counter()))
        opt.step()
        EV.append(("opt-end", 0, time.perf_counter()))
        return loss.item()

    def timed(n, sync):
        dist.barrier()
        t0 = time.perf_counter()
        losses = [step(sync) for _ in range(n)]
        t = torch.tensor([time.perf_counter() - t0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        return t.item() / n, losses

    for _ in range(args.warmup):
        step()
    t_step, losses = timed(args.steps, True)
    def threads():
        out = {}
        for t in os.listdir("/proc/self/task"):
            try:
                st = open(f"/proc/self/task/{t}/stat").read()
                name = open(f"/proc/self/task/{t}/comm").read().strip()
            except OSError:
                continue
            f = st[st.rindex(")") + 2:].split()
            out[t] = (name, int(f[11]) + int(f[12]))
        return out
    th0 = threads()
    if rank == 0:
        st = [i for i, e in enumerate(EV) if e[0] == "step"]
        seg = EV[st[-3]:st[-1]]
        b = seg[0][2]
        print("TIMELINE", " ".join(f"{e[0]}:{e[1]}@{(e[2] - b) * 1e3:.1f}" for e in seg), flush=True)
    t_comp, _ = timed(max(5, args.steps // 3), False)
    th1 = threads()
    if rank == 0:
        print("THREADS", sorted(((v[0], v[1] - th0.get(k, (0, 0))[1]) for k, v in th1.items()), key=lambda x: -x[1])[:8], flush=True)
    # one step's gradients, allreduced alone (as the process group does it)
    grads = torch.randn(nparams)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(5):
        dist.all_reduce(grads)
    t_ar = (time.perf_counter() - t0) / 5
    if rank == 0:
        sps = args.batch * size / t_step
        exposed = max(0.0, t_step - t_comp)
        print(f"backend {args.backend}  ranks {size}  model Net(width={args.width}) "
              f"{nparams / 1e6:.2f} M params ({nparams * 4 / 2**20:.1f} MiB of gradients)  "
              f"batch {args.batch}/rank")
        print(f"samples/s {sps:.1f}  step {t_step * 1e3:.1f} ms = compute {t_comp * 1e3:.1f} ms "
              f"({100 * min(t_comp, t_step) / t_step:.0f} %) + exposed communication "
              f"{exposed * 1e3:.1f} ms ({100 * exposed / t_step:.0f} %)  "
              f"allreduce of all gradients alone {t_ar * 1e3:.1f} ms")
        print(f"loss first {losses[0]:.4f} last {losses[-1]:.4f}")
        if args.losses:
            with open(args.losses, "w") as f:
                json.dump(losses, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
