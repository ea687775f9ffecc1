"""Request: the handle of a non-blocking operation."""
import threading

from nezha.errors import NezhaTimeout


class Request:
    """A collective in flight: test() polls, wait() blocks (with a timeout) and returns
    the result buffer or raises the operation's error. Its buffers are the operation's
    until it finished: the caller must not change them before (with failover an in-place
    input may be copied when the call is posted, for a re-run: executor._presnap)."""

    def __init__(self, comm, name, seq, result=None):
        self.comm = comm
        self.name = name            # "allreduce", ...
        self.seq = seq
        self.result = result        # what wait() returns (the output buffer)
        self.schedule = None
        self.keep = ()              # buffers that must outlive the run
        self.retarget = None        # (buf=None) -> build writing into scratch, or into buf
        self.error = None
        self.ina = None             # (kind, a, out, dtype, op, algo): a collective INA may share
        self.host = None            # (a, out, dtype, op): an allreduce run in the host area
        self.offloaded = False      # part of it ran on the INA rail (or could: no fast path)
        self.fast = None            # (the user's sendbuf and recvbuf, their views, input the
        #                             run reads, op, output must be writeable, library buffer
        #                             the run writes or None): for the fast path (fastpath.pxi)
        self.presnap = None         # (lent buffer, view): its failover snapshot, taken when
        #                             it was posted (executor._presnap)
        self.spans = None           # posted with failover: what it may write into
        self._done = False

    def _finish(self, error=None):
        if self.spans is not None:  # forgotten before anyone sees it done (executor._forget)
            self.spans = None
            self.comm._forget(self)
        self.error = error
        self.schedule = None
        self.keep = ()
        self.fast = None
        self._done = True
        if self.comm._st.waiters:  # only wake threads that wait (cheap when nobody does)
            with self.comm._st.cv:
                self.comm._st.cv.notify_all()

    def test(self):
        """True when the operation has finished (successfully or not); never blocks."""
        return self._done

    def wait(self, timeout=None):
        """Block until done (at most timeout seconds), then return the result or raise."""
        if not self._done:
            cv = self.comm._st.cv
            with cv:
                self.comm._st.waiters += 1
                try:
                    done = cv.wait_for(lambda: self._done, timeout)
                finally:
                    self.comm._st.waiters -= 1
            if not done:
                raise NezhaTimeout(f"nezha: {self.name} #{self.seq - self.comm._st.base} not "
                                   f"finished within {timeout} s (it is still running; wait again "
                                   "or close the communicator)")
        if self.error is not None:
            raise self.error
        return self.result

    def _block(self):
        return self.comm._run_blocking(self)

    def get_future(self):
        """A concurrent.futures.Future completed with the result (for DDP-style hooks)."""
        from concurrent.futures import Future
        fut = Future()

        def waiter():
            try:
                fut.set_result(self.wait())
            except BaseException as exc:  # handed to the future's owner
                fut.set_exception(exc)

        threading.Thread(target=waiter, daemon=True).start()
        return fut

    def __repr__(self):
        state = "done" if self.test() else "pending"
        return f"<nezha.Request {self.name} #{self.seq - self.comm._st.base} {state}>"
