"""ProcessGroupNezha: torch.distributed collectives on a nezha Communicator (every rail).

Each call checks its tensors (raising before anything is sent), queues nezha's non-blocking
collective and returns a NezhaWork that the group's completion thread finishes. Tensors are
used in place where contiguous (numpy views; bfloat16 through DLPack as nezha's BFLOAT16);
a non-contiguous tensor goes through a contiguous copy written back at completion.
"""
import collections
import contextlib
import os
import threading
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from nezha.errors import NezhaTimeout
from nezha.types import ReduceOp
from nezha.torch.tensors import Staged, as_buffer, check_device, nezha_op, one
from nezha.torch.work import Completer, NezhaWork, done_work

BACKEND_NAME = "nezha"


def _seconds(timeout, default=1800.0):
    if timeout is None:
        return default
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _flat(t):
    return t.reshape(-1)


class ProcessGroupNezha(dist.ProcessGroup):
    """A torch.distributed process group whose collectives nezha runs over every rail.

    store, rank, size: as torch hands them to a backend (the group's own PrefixStore).
    timeout: the init_process_group/new_group timeout; it bounds the bootstrap, the
    connections and (unless NEZHA_TIMEOUT is set) every collective.
    """

    def __init__(self, store, rank, size, timeout=None, group_name="", global_ranks=None,
                 comm=None):
        super().__init__(rank, size)
        import nezha
        from nezha.bootstrap.store import StoreBootstrap
        self._name, self._desc = group_name or "", ""
        self.global_ranks = list(global_ranks or range(size))
        secs = _seconds(timeout)
        if comm is None:
            cfg = {}
            if "NEZHA_CONNECT_TIMEOUT" not in os.environ:
                cfg["CONNECT_TIMEOUT"] = str(secs)
            op_timeout = None if "NEZHA_TIMEOUT" in os.environ else secs
            boot = StoreBootstrap(dist.PrefixStore("nezha/", store), rank, size, secs)
            comm = nezha.Communicator(boot, timeout=op_timeout, config=cfg)
        self.comm = comm
        self._lock = threading.Lock()
        self._completer = Completer(comm.timeout + 30.0, group_name or "pg")
        self._p2p = []              # pending (kind, peer, tag, Staged, Work), posted order
        self._p2p_cv = threading.Condition(self._lock)
        self._p2p_last = 0.0
        self._p2p_delay = float(os.environ.get("NEZHA_TORCH_P2P_DELAY", "0.05"))
        self._p2p_hold = 0          # > 0 inside batch_isend_irecv: the batch is queued whole
        self._p2p_stop = False
        # recv from any source (groups of 3 ranks and more; with 2 ranks the source is the
        # other rank): every send publishes "<src>><dst>/<n>" = its tag in the group's store
        # when it is queued (n counts the messages src queued for dst); a recv from any
        # source takes the first rank whose next unreceived message to this rank carries
        # its tag (_resolve_any). Keys of received messages are deleted by the flusher.
        self._any_store = dist.PrefixStore("nezha-p2p/", store) \
            if store is not None and size > 2 else None
        self._sent = collections.Counter()  # peer -> messages queued for it (store index)
        self._rcvd = collections.Counter()  # peer -> recvs queued from it
        self._gc = collections.deque()      # store keys of messages received
        self._flushing = False              # a flush waits (lock released) for a sender
        self._any_poll = float(os.environ.get("NEZHA_TORCH_ANY_POLL", "0.02"))
        threading.Thread(target=self._p2p_flusher, name=f"nezha-torch-p2p-{group_name or 'pg'}",
                         daemon=True).start()

    # ---- identity ------------------------------------------------------------------
    def getBackendName(self):
        """The registered backend name, "nezha"."""
        return BACKEND_NAME

    def getGroupName(self):
        """The group name torch gave (functional collectives find the group by it)."""
        return self._name

    def setGroupName(self, name):
        """Keep the group name."""
        self._name = name

    def getGroupDesc(self):
        """The group description torch gave."""
        return self._desc

    def setGroupDesc(self, desc):
        """Keep the group description."""
        self._desc = desc

    @property
    def timeout(self):
        """Seconds a collective may take (the nezha communicator's timeout)."""
        return self.comm.timeout

    # ---- plumbing ------------------------------------------------------------------
    def _run(self, name, start, finish=None, value=None):
        """start(comm) -> nezha requests, queued under the lock; the Work completes when
        they are done and finish() ran."""
        work = NezhaWork(value, name)
        with self._lock:
            self._flush_locked()  # p2p ops posted before this op go first
            reqs = start(self.comm)
        return self._completer.track(work, reqs, finish)

    @staticmethod
    def _finish_all(*fns):
        def run():
            for f in fns:
                if f is not None:
                    f()
        return run

    # ---- allreduce -----------------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        """Every ReduceOp (PREMUL_SUM: scale, then SUM); one tensor per process."""
        t = one(tensors, "allreduce")
        check_device(t)
        op, factor = nezha_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, t.dtype)
        if factor is not None:
            t.mul_(factor)
        s = Staged(t)
        return self._run("allreduce", lambda c: [c.iallreduce(s.buf, op=op)], s.finish, tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        """One allreduce per dtype over the tensors packed into one buffer."""
        red = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        for t in tensors:
            check_device(t)
        groups = {}
        for t in tensors:
            groups.setdefault(t.dtype, []).append(t)
        packs = []
        for dtype, ts in groups.items():
            op, factor = nezha_op(red, dtype)
            flat = torch.cat([_flat(t) for t in ts]) if ts else torch.empty(0, dtype=dtype)
            if factor is not None:
                flat.mul_(factor)
            packs.append((ts, flat, op))

        def start(c):
            return [c.iallreduce(as_buffer(flat), op=op) for _, flat, op in packs]

        def finish():
            for ts, flat, _ in packs:
                off = 0
                for t in ts:
                    n = t.numel()
                    t.copy_(flat[off:off + n].view_as(t))
                    off += n
        return self._run("allreduce_coalesced", start, finish, tensors)

    # ---- broadcast, reduce -----------------------------------------------------------
    def broadcast(self, tensors, opts=None):
        """From opts.rootRank to every rank, in place."""
        t = one(tensors, "broadcast")
        root = opts.rootRank if opts is not None else 0
        s = Staged(t)
        return self._run("broadcast", lambda c: [c.ibroadcast(s.buf, root=root)], s.finish,
                         tensors)

    def reduce(self, tensors, opts=None):
        """op over every rank into opts.rootRank's tensor (the others' are left as they were)."""
        t = one(tensors, "reduce")
        check_device(t)
        op, factor = nezha_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, t.dtype)
        root = opts.rootRank if opts is not None else 0
        if factor is not None:
            t.mul_(factor)
        s = Staged(t)
        fin = s.finish if self.rank() == root else None
        return self._run("reduce", lambda c: [c.ireduce(s.buf, op=op, root=root)], fin, tensors)

    # ---- allgather -------------------------------------------------------------------
    def _check_same(self, t, outs, what):
        if len(outs) != self.size():
            raise ValueError(f"nezha: {what}: the output list has {len(outs)} tensors, the "
                             f"group {self.size()} ranks")
        for i, o in enumerate(outs):
            check_device(o, f"{what} output {i}")
            if o.numel() != t.numel() or o.dtype != t.dtype:
                raise ValueError(f"nezha: {what}: output {i} is {o.dtype} x {o.numel()}, the "
                                 f"input {t.dtype} x {t.numel()}; nezha needs equal sizes")

    def allgather(self, output_tensors, input_tensors, opts=None):
        """Rank i's tensor into output i on every rank (equal sizes)."""
        t = one(input_tensors, "allgather")
        outs = one(output_tensors, "allgather")
        check_device(t)
        self._check_same(t, outs, "allgather")
        s = Staged(t)
        n = t.numel()
        flat = torch.empty(n * self.size(), dtype=t.dtype)

        def finish():
            for i, o in enumerate(outs):
                o.copy_(flat[i * n:(i + 1) * n].view_as(o))
        return self._run("allgather", lambda c: [c.iallgather(s.buf, as_buffer(flat))], finish,
                         output_tensors)

    def _allgather_base(self, output, input, opts=None):
        """Into one tensor: rank i's input at block i of output."""
        check_device(input)
        check_device(output)
        if output.numel() != input.numel() * self.size() or output.dtype != input.dtype:
            raise ValueError(f"nezha: all_gather_into_tensor: output is {output.dtype} x "
                             f"{output.numel()}; it needs {input.dtype} x size * "
                             f"{input.numel()} = {input.numel() * self.size()}")
        s, o = Staged(input), Staged(output, read=False)
        return self._run("all_gather_into_tensor", lambda c: [c.iallgather(s.buf, o.buf)],
                         o.finish, output)

    all_gather_single = _allgather_base

    def allgather_coalesced(self, output_lists, input_tensors, opts=None):
        """output_lists[i][j] = input j of rank i: one allgather of the packed inputs."""
        n = self.size()
        if len(output_lists) != n or any(len(o) != len(input_tensors) for o in output_lists):
            raise ValueError(f"nezha: allgather_coalesced: needs {n} output lists of "
                             f"{len(input_tensors)} tensors each")
        for t in input_tensors:
            check_device(t)
        if len({t.dtype for t in input_tensors}) > 1:
            raise TypeError("nezha: allgather_coalesced: the input tensors have different "
                            "dtypes; call it once per dtype")
        for i, outs in enumerate(output_lists):
            for o, t in zip(outs, input_tensors):
                check_device(o, "allgather_coalesced output")
                if o.numel() != t.numel() or o.dtype != t.dtype:
                    raise ValueError(f"nezha: allgather_coalesced: output {i} holds {o.dtype} x "
                                     f"{o.numel()} where the input is {t.dtype} x {t.numel()}")
        dtype = input_tensors[0].dtype if input_tensors else torch.float32
        packed = torch.cat([_flat(t) for t in input_tensors]) if input_tensors else \
            torch.empty(0, dtype=dtype)
        m = packed.numel()
        flat = torch.empty(n * m, dtype=dtype)

        def finish():
            for i, outs in enumerate(output_lists):
                off = i * m
                for o in outs:
                    o.copy_(flat[off:off + o.numel()].view_as(o))
                    off += o.numel()
        return self._run("allgather_coalesced",
                         lambda c: [c.iallgather(as_buffer(packed), as_buffer(flat))], finish,
                         output_lists)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        """Several into-one-tensor allgathers as one Work."""
        works = [self._allgather_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return self._chain("allgather_into_tensor_coalesced", works, outputs)

    all_gather_single_coalesced = allgather_into_tensor_coalesced

    def _chain(self, name, works, value):
        """One Work completing after works (which complete in order on the same thread)."""
        work = NezhaWork(value, name)

        class _All:  # request-shaped: the completer waits for every work
            @staticmethod
            def wait(timeout=None):
                for x in works:
                    x.wait(timeout)
        return self._completer.track(work, [_All] if works else [])

    # ---- reduce_scatter --------------------------------------------------------------
    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        """op over every rank's list; rank i gets the reduced input i."""
        out = one(output_tensors, "reduce_scatter")
        ins = one(input_lists, "reduce_scatter")
        check_device(out)
        self._check_same(out, ins, "reduce_scatter")
        op, factor = nezha_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, out.dtype)
        flat = torch.cat([_flat(i) for i in ins])
        if factor is not None:
            flat.mul_(factor)
        o = Staged(out, read=False)
        return self._run("reduce_scatter",
                         lambda c: [c.ireduce_scatter(as_buffer(flat), o.buf, op=op)], o.finish,
                         output_tensors)

    def _reduce_scatter_base(self, output, input, opts=None):
        """From one tensor: rank i gets block i of the reduced input."""
        check_device(input)
        check_device(output)
        if input.numel() != output.numel() * self.size() or output.dtype != input.dtype:
            raise ValueError(f"nezha: reduce_scatter_tensor: input is {input.dtype} x "
                             f"{input.numel()}; it needs {output.dtype} x size * "
                             f"{output.numel()} = {output.numel() * self.size()}")
        op, factor = nezha_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM,
                              input.dtype)
        if factor is not None:
            input = input * factor
        s, o = Staged(input), Staged(output, read=False)
        return self._run("reduce_scatter_tensor",
                         lambda c: [c.ireduce_scatter(s.buf, o.buf, op=op)], o.finish, output)

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        """Several one-tensor reduce_scatters as one Work."""
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return self._chain("reduce_scatter_tensor_coalesced", works, outputs)

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    # ---- all-to-all ------------------------------------------------------------------
    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        """all_to_all_single: equal splits run as nezha's alltoall; uneven splits pad every
        block to the largest block any rank sends (agreed by a small MAX allreduce)."""
        check_device(input)
        check_device(output)
        n = self.size()
        if not output_split_sizes and not input_split_sizes:
            if input.numel() != output.numel() or input.numel() % n:
                raise ValueError(f"nezha: all_to_all_single: input has {input.numel()} and "
                                 f"output {output.numel()} elements; with equal splits both "
                                 f"need the same multiple of the group size {n}")
            s, o = Staged(input), Staged(output, read=False)
            return self._run("all_to_all_single", lambda c: [c.ialltoall(s.buf, o.buf)],
                             o.finish, output)
        row_in = input[0].numel() if input.dim() and input.shape[0] else (
            int(torch.tensor(input.shape[1:]).prod()) if input.dim() else 1)
        row_out = output[0].numel() if output.dim() and output.shape[0] else (
            int(torch.tensor(output.shape[1:]).prod()) if output.dim() else 1)
        ins = list(input_split_sizes) or [input.shape[0] // n] * n
        outs = list(output_split_sizes) or [output.shape[0] // n] * n
        if sum(ins) != (input.shape[0] if input.dim() else 1) or \
                sum(outs) != (output.shape[0] if output.dim() else 1):
            raise ValueError(f"nezha: all_to_all_single: splits {ins} / {outs} do not add up to "
                             f"the first dimensions {tuple(input.shape)} / {tuple(output.shape)}")
        src = _flat(input.contiguous()).split([k * row_in for k in ins])
        o = Staged(output, read=False)
        dst = _flat(o.tmp if o.tmp is not None else output)
        return self._alltoallv("all_to_all_single", list(src),
                               list(dst.split([k * row_out for k in outs])), o.finish, output)

    all_to_all_single = alltoall_base

    def alltoall(self, output_tensors, input_tensors, opts=None):
        """List form: input j goes to rank j, which stores it as output i (any sizes)."""
        n = self.size()
        if len(input_tensors) != n or len(output_tensors) != n:
            raise ValueError(f"nezha: all_to_all: lists of {len(input_tensors)} inputs and "
                             f"{len(output_tensors)} outputs; the group has {n} ranks")
        for t in list(input_tensors) + list(output_tensors):
            check_device(t)
        stages = [Staged(o, read=False) for o in output_tensors]
        dsts = [_flat(s.tmp if s.tmp is not None else s.tensor) for s in stages]
        return self._alltoallv("all_to_all", [_flat(t.contiguous()) for t in input_tensors],
                               dsts, self._finish_all(*(s.finish for s in stages)),
                               output_tensors)

    def _alltoallv(self, name, src, dst, finish, value):
        n = self.size()
        dtype = (src[0] if src else dst[0]).dtype
        for t in src + dst:
            if t.dtype != dtype:
                raise TypeError(f"nezha: {name}: mixed dtypes {t.dtype} and {dtype}")
        local = torch.tensor([max([t.numel() for t in src] + [0])], dtype=torch.int64)
        with self._lock:
            self._flush_locked()
            self.comm.allreduce(local.numpy(), op=ReduceOp.MAX)
        m = int(local[0])
        if m == 0:
            if finish is not None:
                finish()
            return done_work(value, name)
        for j, t in enumerate(dst):
            if t.numel() > m:
                raise ValueError(f"nezha: {name}: output block {j} expects {t.numel()} elements "
                                 f"but no rank sends more than {m}")
        send = torch.zeros(n * m, dtype=dtype)
        for j, t in enumerate(src):
            send[j * m:j * m + t.numel()] = t
        recv = torch.empty(n * m, dtype=dtype)

        def done():
            for j, t in enumerate(dst):
                t.copy_(recv[j * m:j * m + t.numel()])
            if finish is not None:
                finish()
        return self._run(name, lambda c: [c.ialltoall(as_buffer(send), as_buffer(recv))], done,
                         value)

    # ---- gather, scatter (built from allgather and broadcast) ------------------------
    def gather(self, output_tensors, input_tensors, opts=None):
        """Every rank's tensor into opts.rootRank's list (an allgather the others drop)."""
        t = one(input_tensors, "gather")
        check_device(t)
        root = opts.rootRank if opts is not None else 0
        at_root = self.rank() == root
        if at_root:
            outs = one(output_tensors, "gather")
            self._check_same(t, outs, "gather")
        elif output_tensors and any(len(x) for x in output_tensors):
            raise ValueError("nezha: gather: only the root passes output tensors")
        s = Staged(t)
        n = t.numel()
        flat = torch.empty(n * self.size(), dtype=t.dtype)

        def finish():
            if at_root:
                for i, o in enumerate(outs):
                    o.copy_(flat[i * n:(i + 1) * n].view_as(o))
        return self._run("gather", lambda c: [c.iallgather(s.buf, as_buffer(flat))], finish,
                         output_tensors)

    def scatter(self, output_tensors, input_tensors, opts=None):
        """opts.rootRank's list i to rank i (a broadcast of the packed list)."""
        out = one(output_tensors, "scatter")
        check_device(out)
        root = opts.rootRank if opts is not None else 0
        n = out.numel()
        if self.rank() == root:
            ins = one(input_tensors, "scatter")
            self._check_same(out, ins, "scatter")
            flat = torch.cat([_flat(i) for i in ins])
        else:
            if input_tensors and any(len(x) for x in input_tensors):
                raise ValueError("nezha: scatter: only the root passes input tensors")
            flat = torch.empty(n * self.size(), dtype=out.dtype)
        me = self.rank()

        def finish():
            out.copy_(flat[me * n:(me + 1) * n].view_as(out))
        return self._run("scatter", lambda c: [c.ibroadcast(as_buffer(flat), root=root)],
                         finish, output_tensors)

    # ---- barrier, point to point -----------------------------------------------------
    def barrier(self, opts=None):
        """Returns (its Work completes) when every rank entered."""
        return self._run("barrier", lambda c: [c.ibarrier()], None, [])

    # Point to point. nezha runs a group's operations one after another in the order they
    # were queued, and a send or recv holds the queue until its peer takes part. So p2p ops
    # are not queued at once: they wait until the end of batch_isend_irecv (batch() below),
    # until a Work of theirs is waited on or looked at, another op of the group is called,
    # or NEZHA_TORCH_P2P_DELAY s (default 0.05) passed after the last one was posted; then
    # the pending ops are queued in an order every rank derives alike (_flush_locked).
    # Each message is preceded by its tag (one int64), which the receiver checks.
    def _check_peer(self, peer, what):
        if not isinstance(peer, int) or not 0 <= peer < self.size():
            raise ValueError(f"nezha: {what}={peer!r} is not a rank of this group "
                             f"(0..{self.size() - 1})")
        if peer == self.rank():
            raise ValueError(f"nezha: {what}={peer} is this rank; send/recv need another rank")

    def _post_p2p(self, kind, t, peer, tag):
        if peer is not None:  # None: a recv from any source
            self._check_peer(peer, "dst" if kind == "send" else "src")
        s = Staged(t, read=(kind == "send"))
        work = NezhaWork([t], kind)
        work._src = peer
        work._before = self._flush_p2p
        with self._p2p_cv:
            self._p2p.append((kind, peer, int(tag), s, work))
            self._p2p_last = time.monotonic()
            self._p2p_cv.notify()
        return work

    def send(self, tensors, dst, tag=0):
        """To group rank dst. Messages between two ranks are matched in order, per tag:
        within one batch (ops posted together, as batch_isend_irecv does) sends and recvs
        are ordered by tag on both ends; a recv whose message carries another tag raises
        ValueError on its Work (see docs/torch.md)."""
        return self._post_p2p("send", one(tensors, "send"), dst, tag)

    def recv(self, tensors, src, tag=0):
        """From group rank src (matched as send says)."""
        return self._post_p2p("recv", one(tensors, "recv"), src, tag)

    @contextlib.contextmanager
    def batch(self):
        """Hold the p2p ops posted inside; queue them together at the end (what
        torch.distributed.batch_isend_irecv does for this group, see hook in backend.py)."""
        with self._p2p_cv:
            self._p2p_hold += 1
        try:
            yield self
        finally:
            with self._p2p_cv:
                self._p2p_hold -= 1
                if not self._p2p_hold:
                    self._flush_locked()

    def _flush_p2p(self):
        """Queue the pending p2p ops now (a Work of theirs is being waited on)."""
        if self._p2p and not self._p2p_hold:
            with self._lock:
                self._flush_locked()

    def _flush_locked(self):
        """Queue the pending p2p ops (caller holds self._lock). The order is the same on
        both ends of every pair, whatever order they were posted in: peers in ascending
        rank; with one peer, sends and recvs each in (tag, posted) order, and where a batch
        goes both ways the lower rank sends first while the higher receives first. So a
        batch in which two ranks each receive before they send (batch_isend_irecv's
        examples) runs without waiting for buffer space. Sends are published in the store
        (groups of 3+) before any recv from any source of the batch waits for a sender, so
        two ranks that each receive from any source and then send do not wait for each
        other."""
        while self._flushing:  # another thread's flush waits for an any-source sender
            self._p2p_cv.wait()
        ops, self._p2p = self._p2p, []
        if not ops:
            return
        self._flushing = True
        try:
            try:
                self._publish_sends(ops)
            except Exception as exc:  # the store failed: nothing of this batch can match
                for op in ops:
                    op[4]._complete(exc)
                return
            ops = self._resolve_any(ops)
            self._queue_ops(ops)
        finally:
            self._flushing = False
            self._p2p_cv.notify_all()

    @staticmethod
    def _per_peer(ops):
        """{peer: ([sends], [recvs])}, each in (tag, posted) order (the queue's order)."""
        peers = {}
        for op in ops:
            peers.setdefault(op[1], ([], []))[0 if op[0] == "send" else 1].append(op)
        for sends, recvs in peers.values():
            sends.sort(key=lambda o: o[2])
            recvs.sort(key=lambda o: o[2])
        return peers

    def _publish_sends(self, ops):
        """Groups of 3+ ranks: "<me>><peer>/<n>" = tag for every send, in queue order."""
        if self._any_store is None:
            return
        me, keys, vals = self.rank(), [], []
        for peer, (sends, _) in sorted(self._per_peer(
                [o for o in ops if o[0] == "send"]).items()):
            for op in sends:
                keys.append(f"{me}>{peer}/{self._sent[peer]}")
                vals.append(str(op[2]))
                self._sent[peer] += 1
        if keys:
            self._any_store.multi_set(keys, vals)

    def _resolve_any(self, ops):
        """Give every recv from any source of this batch its sender: the first rank (lowest
        first among those already there) whose next message to this rank not taken by an
        earlier recv carries the recv's tag, as published in the store. Waits (the lock
        released, polling) at most the group's timeout, then fails that Work."""
        anys = sorted((op[2], i) for i, op in enumerate(ops) if op[1] is None)
        if not anys:
            return ops
        ops = list(ops)
        me, n = self.rank(), self.size()
        for tag, i in anys:
            kind, _, _, s, work = ops[i]
            before = collections.Counter(  # recvs queued ahead of this one in the batch
                o[1] for j, o in enumerate(ops)
                if o is not None and o[0] == "recv" and o[1] is not None
                and (o[2], j) < (tag, i))
            peer, seen = None, {}
            deadline = time.monotonic() + self.comm.timeout
            poll = 0.0005
            try:
                while peer is None:
                    for p in range(n):
                        if p == me:
                            continue
                        key = f"{p}>{me}/{self._rcvd[p] + before[p]}"
                        if self._any_store.check([key]):
                            seen[p] = int(self._any_store.get(key))
                            if seen[p] == tag:
                                peer = p
                                break
                        else:
                            seen[p] = None
                    if peer is not None:
                        break
                    left = deadline - time.monotonic()
                    if left <= 0:
                        nxt = ", ".join(f"rank {p}: " + ("none yet" if t is None else f"tag {t}")
                                        for p, t in sorted(seen.items()))
                        raise NezhaTimeout(
                            f"nezha: recv from any source with tag {tag}: no rank's next "
                            f"message to rank {me} carried tag {tag} within "
                            f"{self.comm.timeout:g} s (next message from {nxt}). Messages "
                            "from one rank are received in the order it sent them")
                    self._p2p_cv.wait(min(poll, left))  # lets others post meanwhile
                    poll = min(poll * 2, self._any_poll)
            except Exception as exc:  # the timeout, or the store failed
                work._complete(exc)
                ops[i] = None
                continue
            work._src = peer
            ops[i] = (kind, peer, tag, s, work)
        return [o for o in ops if o is not None]

    def _queue_ops(self, ops):
        me = self.rank()
        c = self.comm
        for peer, (sends, recvs) in sorted(self._per_peer(ops).items()):
            for group in ((sends, recvs) if me < peer else (recvs, sends)):
                for kind, _, tag, s, work in group:
                    try:
                        if kind == "send":
                            reqs = [c.isend(np.array([tag], dtype=np.int64), peer),
                                    c.isend(s.buf, peer)]
                            fin = None
                        else:
                            got = np.empty(1, dtype=np.int64)
                            reqs = [c.irecv(got, peer), c.irecv(s.buf, peer)]
                            key = None
                            if self._any_store is not None:
                                key = f"{peer}>{me}/{self._rcvd[peer]}"
                                self._rcvd[peer] += 1
                            fin = self._recv_check(got, tag, peer, s, key, self._gc)
                    except Exception as exc:  # the communicator is closed or broken
                        work._complete(exc)
                        continue
                    self._completer.track(work, reqs, fin)

    @staticmethod
    def _recv_check(got, tag, peer, staged, key=None, gc=None):
        def finish():
            if key is not None:  # the message is here: its store key can go
                gc.append(key)
            if int(got[0]) != tag:
                raise ValueError(
                    f"nezha: recv from rank {peer} with tag {tag}: the message that arrived "
                    f"next from that rank has tag {int(got[0])} (its data is in the tensor "
                    "now). nezha matches tags within a batch of ops posted together (and "
                    "batch_isend_irecv); across batches messages between two ranks are "
                    "received in the order they were sent")
            staged.finish()
        return finish

    def _p2p_flusher(self):
        """Queue pending p2p ops once none was posted for the delay (nobody waited); delete
        the store keys of received messages."""
        with self._p2p_cv:
            while not self._p2p_stop:
                if self._gc and not self._flushing:
                    self._lock.release()  # store round trips without the lock
                    try:
                        while self._gc:
                            self._any_store.delete_key(self._gc.popleft())
                    except Exception:  # the store is gone: the group is closing
                        self._gc.clear()
                    finally:
                        self._lock.acquire()
                    continue
                if not self._p2p or self._p2p_hold or self._flushing:
                    self._p2p_cv.wait(None if not self._p2p and not self._gc
                                      else self._p2p_delay)
                    continue
                left = self._p2p_last + self._p2p_delay - time.monotonic()
                if left > 0:
                    self._p2p_cv.wait(left)
                    continue
                try:
                    self._flush_locked()
                except Exception:  # each Work already carries its error
                    pass

    def recv_anysource(self, tensors, tag=0):
        """From whichever rank sends this rank a message with this tag (the Work's
        _source_rank() says which; dist.recv returns it). With 2 ranks that is the other
        rank; with more, each send publishes (source, index, tag) in the group's store and
        the recv takes the first rank whose next message to this rank has the tag (see
        _resolve_any). Messages from each rank keep their order."""
        t = one(tensors, "recv")
        if self.size() < 2:
            raise ValueError("nezha: recv from any source in a group of one rank: no rank "
                             "can send")
        if self.size() == 2:
            return self._post_p2p("recv", t, 1 - self.rank(), tag)
        if self._any_store is None:
            raise ValueError("nezha: recv from any source needs the group's store (this "
                             "group was made without one); name the source rank")
        return self._post_p2p("recv", t, None, tag)

    # ---- lifetime --------------------------------------------------------------------
    def shutdown(self):
        """Finish queued work and close the nezha communicator."""
        if self.comm is not None:
            with self._p2p_cv:
                try:
                    self._flush_locked()
                finally:
                    self._p2p_stop = True
                    self._p2p_cv.notify_all()
            self._completer.stop()
            try:
                self.comm.close()
            finally:
                self.comm = None

    def abort(self):
        """Close at once (queued work fails)."""
        self.shutdown()

    def __repr__(self):
        return f"<ProcessGroupNezha rank {self.rank()}/{self.size()} group {self._name!r}>"
