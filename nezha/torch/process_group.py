"""ProcessGroupNezha: torch.distributed collectives on a nezha Communicator (every rail).

Each call checks its tensors (raising before anything is sent), queues nezha's non-blocking
collective and returns a NezhaWork that the group's completion thread finishes. Tensors are
used in place where contiguous (numpy views; bfloat16 through DLPack as nezha's BFLOAT16);
a non-contiguous tensor goes through a contiguous copy written back at completion.
"""
import os
import threading
from datetime import timedelta

import torch
import torch.distributed as dist

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

    def send(self, tensors, dst, tag=0):
        """To group rank dst; matched in order with dst's recvs from this rank (tags are
        not matched: messages between two ranks arrive in the order they were sent)."""
        t = one(tensors, "send")
        s = Staged(t)
        return self._run("send", lambda c: [c.isend(s.buf, dst)], None, tensors)

    def recv(self, tensors, src, tag=0):
        """From group rank src (in the order src sent)."""
        t = one(tensors, "recv")
        s = Staged(t, read=False)
        return self._run("recv", lambda c: [c.irecv(s.buf, src)], s.finish, tensors)

    def recv_anysource(self, tensors, tag=0):
        """Not supported: nezha receives from a named rank."""
        raise ValueError("nezha: recv from any source is not supported; name the source rank "
                         "(dist.recv(tensor, src=...))")

    # ---- lifetime --------------------------------------------------------------------
    def shutdown(self):
        """Finish queued work and close the nezha communicator."""
        if self.comm is not None:
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
