# Included by engine.pyx: the state of a communicator's runs, in one place.
#
# The executor, the failover layer, the diagnosis code and the fast path all read and
# write it; typed fields make the fast path's reads C loads instead of dict lookups, and
# every field the layers share is declared here rather than grown on the communicator.

import collections
import threading

# planner.ALGO_TREE: a lazy broadcast by this algorithm lets its root and inner ranks return
# before every rank entered (tests/test_bcast_tree.py checks the two agree)
RUN_EARLY_ALGO = 4
# planner.ALGO_HIER: a lazy hierarchical broadcast opens with a barrier (never early)
RUN_HIER_ALGO = 6


cdef class RunState:
    """What is running and what has run: the queue and who drains it, the counters every
    rank keeps alike (seq, ncoll, votes), the last lazy collective, the end state."""
    cdef public bint closed       # close() was called
    cdef public object broken     # the exception that broke the communicator, or None
    cdef public bint busy         # someone drains the queue (one run at a time)
    cdef public object queue      # Requests posted, not started (collections.deque)
    cdef public int64_t seq       # operations posted (collectives and send/recv)
    cdef public int64_t ncoll     # collectives finished (send/recv not counted)
    cdef public int64_t votes     # votes held: every rank counts them alike
    cdef public int64_t base      # seq (and ncoll) when the user's calls begin: the
    #                               library's own start-up calls come before; messages
    #                               and stats() number the user's from 0
    cdef public object pending    # the last lazy collective, while a rank may need it
    # the one before it, while the last is an early-exit tree (it proves nothing of it)
    cdef public object pending_prev
    cdef public bint prev_early   # the last collective was a lazy tree (planner.broadcast)
    cdef public object last_plan  # for stats()
    cdef public int waiters       # threads waiting on cv (Request.wait, close)
    cdef public object worker     # the progress thread of non-blocking calls, once started
    cdef public object lock       # guards queue and busy (an RLock)
    cdef public object cv         # Condition on lock
    cdef public double timeout    # NEZHA_TIMEOUT of this communicator, seconds

    def __init__(self, double timeout):
        self.timeout = timeout
        self.queue = collections.deque()
        self.lock = threading.RLock()  # `with st.lock` is C-level
        self.cv = threading.Condition(self.lock)

    cpdef ran(self, object plan, object final, int64_t seq, object req, bint lazy,
              bint voting, object snap):
        """A collective's run is over and agreed on (final: the plan of its last run):
        count it, keep what a rank behind may need. The executor and the fast path both
        conclude here."""
        self.last_plan = plan
        self.ncoll += 1
        # A lazy tree's root returns before any other rank entered it, so its finishing
        # proves nothing of the collective before either: both stay kept. The next one is
        # never such a tree (planner), and its finishing proves every rank past both.
        early = lazy and plan.algo == RUN_EARLY_ALGO
        self.pending_prev = self.pending if early else None
        self.prev_early = early
        if lazy:  # a rank behind may need it re-run: its request, plan and input
            self.pending = (self.ncoll - 1, seq, req, final, snap)
        elif voting:
            self.pending = None  # everyone voted in this one: all are past the last

    cpdef object kept(self, int64_t k):
        """The kept lazy collective k (index, seq, request, plan, input), or None."""
        for p in (self.pending, self.pending_prev):
            if p is not None and p[0] == k:
                return p
        return None

    cpdef take(self):
        """The next queued request for whoever drains (busy), or None once the queue is
        empty or the communicator broken: then busy is given up and waiters are woken."""
        self.lock.acquire()
        try:
            if self.queue and self.broken is None:
                return self.queue.popleft()
            self.busy = False
            # threads in Request.wait or close; the progress thread only for a queue left
            # (waking it per call for nothing cost the fast path a thread switch)
            if self.waiters or (self.worker is not None and self.queue):
                self.cv.notify_all()
            return None
        finally:
            self.lock.release()
