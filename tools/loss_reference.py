"""Per-step losses of examples/train_ddp.py --model mlp without DDP: one process trains on
the ranks' batches concatenated (what DDP computes, up to rounding: the mean of the ranks'
mean-loss gradients is the gradient of the mean loss over all of them) and records rank 0's
loss, as the example's --losses does with --warmup 0. In float64 it is the reference the
float32 runs are judged against; --perturb gives every initial weight a relative error of
that size (float32: 6e-8 is about one ulp) to see how a last-bit difference grows.

    python tools/loss_reference.py --ranks 4 --steps 50 --dtype float64 --out ref64.json
    python tools/loss_spread.py ref64.json gloo.json nezha.json
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from train_ddp import DeepMLP, batches  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=16, help="samples per rank per step")
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--act", default="relu", choices=["relu", "gelu"])
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    ap.add_argument("--perturb", type=float, default=0.0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    dtype = getattr(torch, args.dtype)
    model = DeepMLP(args.width, args.depth, args.act).to(dtype)
    if args.perturb:
        g = torch.Generator().manual_seed(12345)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + args.perturb * torch.randn(p.shape, generator=g, dtype=dtype))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    data = [batches(r, args.batch, args.seed, (args.width,)) for r in range(args.ranks)]
    losses = []
    for _ in range(args.steps):
        xs, ys = zip(*(next(d) for d in data))
        x, y = torch.cat(xs).to(dtype), torch.cat(ys)
        opt.zero_grad(set_to_none=True)
        out = model(x)
        per_rank = [F.cross_entropy(o, t) for o, t in zip(out.split(args.batch),
                                                           y.split(args.batch))]
        torch.stack(per_rank).mean().backward()
        opt.step()
        losses.append(per_rank[0].item())
    with open(args.out, "w") as f:
        json.dump(losses, f)
    print(f"loss first {losses[0]:.6f} last {losses[-1]:.6f} -> {args.out}")


if __name__ == "__main__":
    main()
