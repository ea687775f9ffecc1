"""Two float64 copies of examples/train_ddp.py's DeepMLP trained side by side on the 4
ranks' concatenated batches (as tools/loss_reference.py), the second's initial weights
changed by --perturb relative: per step, the relative loss difference and how many ReLU
inputs have another sign in the second copy (a flip switches that unit's gradient between
0 and 1). Run from the repository root with PYTHONPATH=. ."""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.getcwd(), "examples"))
from train_ddp import DeepMLP, batches  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--perturb", type=float, default=1e-7)
ap.add_argument("--steps", type=int, default=14)
ap.add_argument("--act", default="relu")
args = ap.parse_args()
torch.set_num_threads(1)
models = []
for k in range(2):
    torch.manual_seed(0)
    m = DeepMLP(1024, 8, args.act).double()
    if k:
        g = torch.Generator().manual_seed(12345)
        with torch.no_grad():
            for p in m.parameters():
                p.mul_(1 + args.perturb * torch.randn(p.shape, generator=g, dtype=p.dtype))
    models.append((m, torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)))
data = [batches(r, 16, 0, (1024,)) for r in range(4)]
for step in range(args.steps):
    xs, ys = zip(*(next(d) for d in data))
    x, y = torch.cat(xs).double(), torch.cat(ys)
    pre, losses = [], []
    for m, opt in models:
        h, signs = x, []
        for block in m.blocks:
            z = block(h)
            signs.append(z > 0)
            h = m.act(z)
        out = m.head(h)
        opt.zero_grad(set_to_none=True)
        per_rank = [F.cross_entropy(o, t) for o, t in zip(out.split(16), y.split(16))]
        torch.stack(per_rank).mean().backward()
        opt.step()
        pre.append(signs)
        losses.append(per_rank[0].item())
    flips = sum(int((a != b).sum()) for a, b in zip(*pre))
    print(f"step {step:2d}  loss diff {abs(losses[1] - losses[0]) / losses[0]:.1e}  "
          f"ReLU inputs of another sign {flips}")
