"""Timeline of DDP's gradient buckets over the nezha backend (issue 14): the order of events.

Run it in place of examples/train_ddp.py, same arguments after the output directory; every
rank writes OUTDIR/timeline.RANK.txt (time.perf_counter stamps: CLOCK_MONOTONIC, one clock
for all the ranks of a machine, lab namespaces included):

    torchrun --nproc-per-node 2 tools/ddp_timeline.py /tmp/tl -- --backend nezha --model mlp
    nezha lab run --env-rendezvous -x NEZHA_SOCKET_IFNAME=rail0,rail1 -- \\
        .venv/bin/python tools/ddp_timeline.py /tmp/tl -- --backend nezha --model mlp --steps 4
    python tools/ddp_timeline.py --summary /tmp/tl      # the last DDP step, every rank

Events: backward() entered/returned; the first parameter's gradient computed (the last one
backward computes: its compute is over); each ProcessGroupNezha.allreduce call entered and
returned; each run of the progress thread (Communicator._execute: start, end, thread CPU
time), its closing vote (Failover.agree); each Work completed (the completion thread);
DDP's forward; torch's thread counts. Every event carries its thread's CPU time and time
spent waiting for a CPU (/proc/thread-self/schedstat): the summary splits the main and
progress threads' wall time into on a CPU, waiting for one, and blocked.
Seq numbers >= 2**31 are the cost model's syncs. The wrappers only stamp and call through.
"""
import ast
import os
import re
import runpy
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRST = "first parameter's gradient"


def record(outdir, argv):
    sys.path.insert(0, ROOT)
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    import nezha.torch  # noqa: F401  registers the backend
    from nezha import communicator, failover
    from nezha.torch import process_group, work

    events = []
    # CPU threads torch computes with (intra-op, inter-op): on a shared 2-core host they
    # compete with the ranks' progress threads
    events.append((time.perf_counter(), "main", "torch threads",
                   {"intra": torch.get_num_threads(), "interop": torch.get_num_interop_threads()}))

    def ev(what, **kw):
        # the thread's CPU time and its time waiting for a CPU (runnable, not running),
        # ms: a stretch of wall time in neither was spent blocked (a lock, the GIL, I/O)
        try:
            with open("/proc/thread-self/schedstat") as f:
                run, wait = f.read().split()[:2]
            kw["run_wait_ms"] = (round(int(run) / 1e6, 1), round(int(wait) / 1e6, 1))
        except OSError:
            pass
        events.append((time.perf_counter(), threading.current_thread().name, what, kw))

    def wrap(cls, name, before, after):
        orig = getattr(cls, name)

        def f(self, *a, **k):
            info = before(self, *a, **k)
            t0, c0 = time.perf_counter(), time.thread_time()
            r = orig(self, *a, **k)
            after(self, info, r, time.perf_counter() - t0, time.thread_time() - c0)
            return r
        setattr(cls, name, f)

    def ar_before(self, tensors, opts=None):
        ev("allreduce call", n=tensors[0].numel())
        return tensors[0].numel()

    def ar_after(self, n, w, dt, dc):
        w._tl_n = n
        ev("allreduce returned", n=n)
    wrap(process_group.ProcessGroupNezha, "allreduce", ar_before, ar_after)

    def ex_before(self, req):
        ev("run start", seq=req.seq, n=req.spec[3])
        return req

    def ex_after(self, req, r, dt, dc):
        ev("run end", seq=req.seq, n=req.spec[3], cpu_ms=round(dc * 1e3, 1))
    wrap(communicator.Communicator, "_execute", ex_before, ex_after)

    def vote_before(self, req, *a, **k):
        ev("vote start", seq=req.seq)
        return req

    def vote_after(self, req, r, dt, dc):
        ev("vote end", seq=req.seq)
    wrap(failover.Failover, "agree", vote_before, vote_after)

    orig_complete = work.NezhaWork._complete

    def _complete(self, error=None):
        r = orig_complete(self, error)
        ev("work completed", n=getattr(self, "_tl_n", None))
        return r
    work.NezhaWork._complete = _complete

    orig_backward = torch.Tensor.backward

    def backward(self, *a, **k):
        ev("backward enter")
        c0 = time.thread_time()
        r = orig_backward(self, *a, **k)
        ev("backward return", cpu_ms=round((time.thread_time() - c0) * 1e3, 1))
        return r
    torch.Tensor.backward = backward

    orig_fwd = DDP.forward

    def forward(self, *a, **k):
        ev("forward enter")
        r = orig_fwd(self, *a, **k)
        ev("forward return")
        return r
    DDP.forward = forward

    orig_ddp = DDP.__init__

    def ddp_init(self, module, *a, **k):
        orig_ddp(self, module, *a, **k)
        first = next(module.parameters())
        first.register_hook(lambda g: (ev(FIRST), g)[1])
    DDP.__init__ = ddp_init

    def dump():
        os.makedirs(outdir, exist_ok=True)
        rank = os.environ.get("RANK", "0")
        with open(os.path.join(outdir, f"timeline.{rank}.txt"), "w") as f:
            for t, th, what, kw in events:
                f.write(f"{t * 1e3:.3f} r{rank} {th} | {what} {kw if kw else ''}\n")

    sys.argv = [os.path.join(ROOT, "examples", "train_ddp.py")] + argv
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    finally:
        dump()


def load(outdir):
    rows = []
    for name in sorted(os.listdir(outdir)):
        if not name.startswith("timeline."):
            continue
        for line in open(os.path.join(outdir, name)):
            m = re.match(r"([\d.]+) r(\d+) (\S+) \| (.*?)\s*(\{.*\})?\s*$", line)
            if m:
                t, r, th, what, kw = m.groups()
                rows.append((float(t), int(r), th, what, ast.literal_eval(kw) if kw else {}))
    return sorted(rows)


def last_backward(rows):
    """{rank: its rows from entering to leaving the last backward() that issued two or more
    bucket allreduces}."""
    last = {}
    for r in sorted({x[1] for x in rows}):
        ev = [x for x in rows if x[1] == r]
        for i, x in enumerate(ev):
            if x[3] != "backward enter":
                continue
            j = next((k for k in range(i, len(ev)) if ev[k][3] == "backward return"), None)
            if j is not None and sum(y[3] == "allreduce call" for y in ev[i:j]) >= 2:
                last[r] = ev[i:j + 1]
    return last


def summary(outdir, out=sys.stdout):
    """The last backward() that issued two or more bucket allreduces, every rank: times in ms
    from the earliest rank's entry into that backward (one clock for all ranks)."""
    last = last_backward(load(outdir))
    if not last:
        print("no backward with 2 or more bucket allreduces", file=out)
        return
    t0 = min(seg[0][0] for seg in last.values())
    for r, seg in sorted(last.items()):
        def at(what):
            return " ".join(f"{y[0] - t0:.0f}" for y in seg if y[3] == what)
        runs, votes = {}, {}
        for y in seg:
            if y[3] in ("run start", "run end"):
                runs.setdefault(y[4]["seq"], {})[y[3]] = (y[0] - t0, y[4])
            elif y[3] == "vote start":
                votes.setdefault(y[4]["seq"], y[0] - t0)
        desc = []
        for seq in sorted(runs):
            s, e = runs[seq].get("run start"), runs[seq].get("run end")
            if seq >= 1 << 31 or s is None or e is None:
                continue
            v = votes.get(seq)
            desc.append(f"#{seq} {s[0]:.0f}-{e[0]:.0f}"
                        + (f" (data until {v:.0f})" if v is not None else "")
                        + f" cpu {e[1]['cpu_ms']:.0f}")
        nsync = sum(1 for seq in runs if seq >= 1 << 31)
        th = next((x[4] for x in rows if x[1] == r and x[3] == "torch threads"), {})
        fwd = [x for x in rows if x[1] == r and x[3] == "forward enter" and x[0] < seg[0][0]]
        print(f"rank {r}: torch threads {th}; forward entered at "
              f"{(fwd[-1][0] - t0) if fwd else float('nan'):.0f}, backward() entered at "
              f"{seg[0][0] - t0:.0f}, returned at {seg[-1][0] - t0:.0f} ms (its thread's CPU "
              f"{seg[-1][4].get('cpu_ms', float('nan')):.0f} ms); compute over (first "
              f"parameter's gradient) at {at(FIRST)}", file=out)
        print(f"  bucket allreduce calls returned at {at('allreduce returned')}", file=out)
        print(f"  runs of the progress thread: {'; '.join(desc)}; cost-model syncs: {nsync}",
              file=out)
        print(f"  Works completed at {at('work completed')}", file=out)
        # where the main thread's and the progress thread's wall time went (schedstat)
        def split(a, b):
            if a is None or b is None or "run_wait_ms" not in a[4] or "run_wait_ms" not in b[4]:
                return "?"
            wall = b[0] - a[0]
            run = b[4]["run_wait_ms"][0] - a[4]["run_wait_ms"][0]
            wait = b[4]["run_wait_ms"][1] - a[4]["run_wait_ms"][1]
            return (f"{wall:.0f} ms = on a CPU {run:.0f} + waiting for one {wait:.0f} + "
                    f"blocked {wall - run - wait:.0f}")
        calls = [y for y in seg if y[3] == "allreduce call"]
        over = [y for y in seg if y[3] == FIRST]
        print(f"  main thread, backward() to its first bucket call: "
              f"{split(seg[0], calls[0] if calls else None)}; to its last gradient: "
              f"{split(seg[0], over[-1] if over else None)}", file=out)
        prog = [y for y in seg if y[2] == "nezha-progress" and y[3] in ("run start", "run end")]
        if prog:
            print(f"  progress thread, first run start to last run end: "
                  f"{split(prog[0], prog[-1])}", file=out)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--summary":
        summary(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[2] == "--":
        record(sys.argv[1], sys.argv[3:])
    else:
        sys.exit(__doc__)
