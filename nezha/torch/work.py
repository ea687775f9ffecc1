"""Works whose futures complete by themselves: one completion thread per process group
waits for nezha's requests in the order they were queued (nezha runs them in that order),
runs the copy-backs and completes the torch future. DDP waits only on get_future(), so
completion must never depend on someone calling wait()."""
import queue
import threading
from datetime import timedelta

import torch
import torch.distributed as dist

from nezha.errors import NezhaTimeout


class NezhaWork(dist.Work):
    """The Work of one nezha collective (or of several run as one)."""

    def __init__(self, value, name="collective"):
        super().__init__()
        self.name = name
        self._value = value
        self._fut = torch.futures.Future()
        self._done = threading.Event()
        self._error = None
        self._src = None     # recv: the sender's group rank (from any source: once known)
        self._before = None  # p2p: queue the pending ops before anyone looks (process_group)

    def _kick(self):
        if self._before is not None and not self._done.is_set():
            self._before()

    # completion (called by the Completer thread, or at once for finished work)
    def _complete(self, error=None):
        self._error = error
        self._done.set()
        if error is None:
            self._fut.set_result(self._value)
        else:
            self._fut.set_exception(error)

    # ---- the torch Work interface --------------------------------------------------
    def wait(self, timeout=None):
        """Block until finished (timeout: timedelta or seconds; 0 or None is no limit);
        raise the operation's error. True when done."""
        secs = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        self._kick()
        if not self._done.wait(secs if secs else None):
            raise NezhaTimeout(f"nezha: {self.name} not finished within {secs} s")
        if self._error is not None:
            raise self._error
        return True

    def get_future(self):
        """A torch.futures.Future completed (by the completion thread) with the result."""
        self._kick()
        return self._fut

    def is_completed(self):
        """True once finished (successfully or not)."""
        self._kick()
        return self._done.is_set()

    def is_success(self):
        """True once finished without error."""
        return self._done.is_set() and self._error is None

    def exception(self):
        """The error, or None."""
        return self._error

    def result(self):
        """The output tensors."""
        self.wait()
        return self._value if isinstance(self._value, list) else [self._value]

    def _source_rank(self):
        """The group rank a recv's message came from (what dist.recv(src=None) returns);
        for a recv from any source it waits until the message is there."""
        if self.name != "recv":
            raise RuntimeError(f"nezha: _source_rank() of a {self.name} Work: only a recv "
                               "has a source rank")
        if getattr(self, "_src", None) is None:
            self.wait()
        return self._src

    source_rank = _source_rank

    def synchronize(self):
        """Nothing to do on CPU."""

    def __repr__(self):
        return f"<nezha.torch Work {self.name} {'done' if self.is_completed() else 'pending'}>"


def done_work(value, name="collective"):
    """A Work that is already finished (size-1 groups, empty operations)."""
    w = NezhaWork(value, name)
    w._complete()
    return w


class Completer:
    """One daemon thread: wait for each item's nezha requests, run its finish(), complete
    its Work; items complete in the order they were queued."""

    def __init__(self, timeout, name):
        self.timeout = timeout
        self.q = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=f"nezha-torch-{name}", daemon=True)
        self.thread.start()

    def track(self, work, reqs, finish=None):
        """Queue work: complete it when every request in reqs is done and finish() ran."""
        self.q.put((work, reqs, finish))
        return work

    def _run(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            work, reqs, finish = item
            err = None
            try:
                for r in reqs:
                    r.wait(self.timeout)
                if finish is not None:
                    finish()
            except BaseException as exc:  # handed to the Work's owner
                err = exc
            try:
                work._complete(err)
            except BaseException:  # a then() callback failed: it is the future's owner's
                pass

    def stop(self):
        """End the thread once the queued items completed."""
        self.q.put(None)
