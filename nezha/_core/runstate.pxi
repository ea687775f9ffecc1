# Included by engine.pyx: the state of a communicator's runs, in one place.
#
# The executor, the failover layer, the diagnosis code and the fast path all read and
# write it; typed fields make the fast path's reads C loads instead of dict lookups, and
# every field the layers share is declared here rather than grown on the communicator.

import collections
import threading


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
    cdef public object pending    # the last lazy collective, while a rank may need it
    cdef public object last_plan  # for stats()
    cdef public int waiters       # threads in Request.wait()
    cdef public object worker     # the progress thread of non-blocking calls, once started
    cdef public object lock       # guards queue and busy (an RLock)
    cdef public object cv         # Condition on lock
    cdef public double timeout    # NEZHA_TIMEOUT of this communicator, seconds

    def __init__(self, double timeout):
        self.timeout = timeout
        self.queue = collections.deque()
        self.lock = threading.RLock()  # `with st.lock` is C-level
        self.cv = threading.Condition(self.lock)
