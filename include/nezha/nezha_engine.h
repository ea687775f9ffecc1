/* The progress engine: runs one schedule of operations over non-blocking byte-stream
 * endpoints (one per peer per channel, behind the transport contract of
 * nezha_transport.h: tcp, shm, ...), with no Python and no GIL.
 *
 * A schedule is a flat array of ops. Ops on one endpoint run in post order (TCP keeps
 * order, so matching is by position, as in NCCL's net plugin). An op may depend on up to
 * two other ops:
 *   - a dependency of the same byte length *streams*: the op may progress up to as many
 *     bytes as the dependency has finished. This is the pipeline: a ring rank forwards the
 *     first bytes of a chunk while the rest is still arriving and being reduced, so there
 *     is no per-segment bookkeeping at all;
 *   - any other dependency (or NZ_DEP_FULL) must complete before the op starts;
 *   - with NZ_DEP_STARTED the op may go once the dependency has made its first byte: a
 *     header waits for its data this way, so that both leave in one segment.
 * Received data that must be reduced goes through the endpoint's staging area (one
 * segment); it is reduced into the destination as soon as whole elements are there.
 *
 * A transport that can show its arrived bytes in place (NZ_CAP_PEEK, shared memory) is
 * reduced straight out of its memory instead.
 *
 * One loop drives every endpoint of every channel (rail); when nothing can move it sleeps
 * in poll() on exactly what the endpoints it waits for name (their pollfds), plus the
 * control sockets, on which a peer announces an abort. Every wait is bounded by the
 * deadline. */
#ifndef NEZHA_ENGINE_H
#define NEZHA_ENGINE_H

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "nezha/nezha_health.h"
#include "nezha/nezha_reduce.h"
#include "nezha/nezha_transport.h"
#include "nezha/nezha_types.h"
#include "nezha/nezha_wire.h"

enum {
    NZ_SEND = 0,         /* send [ptr, ptr+nbytes) */
    NZ_RECV = 1,         /* receive into [ptr, ptr+nbytes) */
    NZ_RECV_REDUCE = 2,  /* ptr[i] = src[i] OP incoming[i]  (src may equal ptr) */
    NZ_RECV_HDR = 3,     /* receive a header into ptr, compare with src (expected) */
    NZ_LOCAL_REDUCE = 4  /* ptr[i] = ptr[i] OP src[i], no endpoint; paced by deps */
};

#define NZ_DEP_FULL 1    /* op flag: dependencies must complete before the op starts */
#define NZ_DEP_STARTED 2 /* op flag: dependencies must have started (done > 0) */

enum {
    NZ_OK = 0,
    NZ_ERR_TIMEOUT = 1,     /* deadline passed; err_op is an op still waiting */
    NZ_ERR_CLOSED = 2,      /* peer closed the connection (EOF) */
    NZ_ERR_SOCKET = 3,      /* transport error (socket, ring), err_errno tells */
    NZ_ERR_MISMATCH = 4,    /* header differs from the expected one */
    NZ_ERR_CTRL = 5,        /* a control socket is readable: a peer sent an abort */
    NZ_ERR_REDUCE = 6,      /* kernel refused dtype/op (cannot happen after validation) */
    NZ_ERR_INTERNAL = 7,    /* schedule is malformed */
    NZ_ERR_CHANFAIL = 8,    /* some channels failed (chan_failed); the others finished */
    NZ_ERR_VOTE = 9         /* a peer called a vote this run must join (see nz_vote_called) */
};

enum { NZ_WHY_ERROR = 1, NZ_WHY_CLOSED = 2, NZ_WHY_SILENT = 3, NZ_WHY_PEER = 4 };

typedef struct {
    char *ptr;
    const char *src;
    uint64_t nbytes;
    uint64_t done;     /* bytes sent / received / reduced into ptr */
    int32_t ep;        /* endpoint index, -1 for local ops */
    int32_t dep[2];    /* op indices or -1 */
    int16_t chan;      /* channel (rail lane) for per-channel timing */
    uint8_t kind;
    uint8_t flags;
} nz_op_t;

#define NZ_PEER_LOST_NS 1000000000LL  /* silent on every rail this long: unreachable */
/* a vote's STATUS goes once, on one rail; missing from a peer after this, it goes again on
 * every rail, with a poke for the peer's (doubling up to the max): the extra wait of a vote
 * whose copy a just-failed rail ate, far below NEZHA_RAIL_TIMEOUT's detection */
#define NZ_VOTE_RESEND_NS 2000000LL
#define NZ_VOTE_RESEND_MAX_NS 16000000LL
#define NZ_EP_MAXFDS 2  /* pollfds one endpoint may ask the engine to sleep on */
#define NZ_TX_WATCH_MS 2  /* longest sleep while sent bytes are unacknowledged (nz_kick_stuck) */

typedef struct {
    const nz_transport_ops_t *tr;     /* NULL: no endpoint (self, or a closed channel) */
    void *tx;                         /* the transport's endpoint */
    int32_t chan;
    int32_t peer;
    /* staging for NZ_RECV_REDUCE: bytes received but not reduced yet */
    char *stage;
    uint64_t stage_cap;
    uint64_t stage_len;
    /* per-run queues (op indices in post order) */
    int32_t *sq, *rq;
    int32_t nsq, nrq, sh, rh;
    int want_out, want_in;
    int moved;                        /* bytes moved since the last silence check */
    int zc_wait;                      /* the loop waits for this endpoint's zero-copy sends */
    int tx_watch;                     /* sent bytes may be unacknowledged (transport tx_kick) */
    uint64_t bytes_sent, bytes_recv;  /* lifetime counters */
    uint64_t reads;                   /* transport reads that brought bytes (lifetime) */
} nz_ep_t;

typedef struct {
    nz_ep_t *eps;
    int32_t nep;
    int dtype, op;
    /* results of the last run */
    int err;
    int32_t err_op;
    int32_t err_ep;
    int err_errno;
    int32_t err_ctrl;
    /* per-channel completion time of the last run, ns since its start */
    int64_t *chan_ns;
    uint64_t *chan_bytes;
    int32_t nchan;
    int64_t t0;
    int64_t spin_ns;  /* busy-poll this long (yielding the CPU) before sleeping in poll() */
    int64_t run_spin_ns;  /* this run's: spin_ns, or longer where the schedule asks (Engine.begin) */
    /* failover: with it, a channel that errs or goes silent is set aside (chan_failed) and
     * the run finishes the other channels instead of failing as a whole */
    int failover;
    nz_health_t *health;
    int32_t *chan_rail;        /* channel -> rail (index of its control sockets) */
    int64_t silent_ns;         /* a peer unheard this long on a rail = that rail is down */
    uint64_t live_rails;       /* rails the planner still uses (0: not told) */
    uint64_t chan_failed;      /* bit per channel */
    uint8_t *fail_why;         /* per channel: NZ_WHY_* */
    int32_t *fail_peer;        /* per channel: the peer it failed with */
    int32_t *fail_errno;
    int64_t *fail_ns;          /* per channel: ns after start when it was declared failed */
    /* the vote that will end this run: a peer that already voted "slices i, j unfinished"
     * gave up on their channels, so waiting on those channels is pointless */
    int64_t vote_seq;          /* -1: no vote */
    int64_t vote_coll;         /* index of the collective this run belongs to */
    int lazy;                  /* this run ends without a vote unless a channel fails */
    int32_t *slice_chan;       /* slice -> channel, for the current run */
    int32_t nslices;
    /* last time bytes moved on any endpoint of (rail, peer): proof of life as good as a
     * heartbeat, and the one that survives congestion (a heartbeat dropped by a full queue
     * waits for TCP's 200 ms minimum retransmission timeout) */
    int64_t *data_heard;
    /* scratch for queue building */
    int32_t *qbuf;
    int64_t qcap;
    /* some endpoint sends zero-copy (transport tx_busy): writes and the run's end wait
     * for the sends that still read the memory (nz_tx_busy) */
    int zc_any;
    int zc_wait;
    uint64_t tx_kicks;         /* sends pushed again by nz_kick_stuck (lifetime) */
    uint64_t run_polls;        /* sleeps in poll() of runs (lifetime): how often a run woke */
    /* op trace (Engine.trace_ops; off: trace_cap 0): a run of trace_min..trace_cap ops is
     * copied at its start and each op's finish time (ns after start, -1: not finished)
     * recorded, for a breakdown of a schedule's phases; costs nothing when off */
    nz_op_t *trace_ops;
    int64_t *trace_t;
    const nz_op_t *trace_base; /* the traced run's ops (NULL: this run is not traced) */
    int32_t trace_cap, trace_min, trace_n;
    int64_t trace_t0;
} nz_engine_t;

static inline int64_t nz_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* How far op i may progress given its dependencies. */
static inline uint64_t nz_limit(const nz_op_t *ops, const nz_op_t *o) {
    uint64_t lim = o->nbytes;
    for (int k = 0; k < 2; k++) {
        int32_t d = o->dep[k];
        if (d < 0) continue;
        const nz_op_t *p = &ops[d];
        uint64_t avail;
        if (p->done >= p->nbytes)
            avail = o->nbytes;
        else if (o->flags & NZ_DEP_STARTED)
            avail = p->done > 0 ? o->nbytes : 0;
        else if (!(o->flags & NZ_DEP_FULL) && p->nbytes == o->nbytes)
            avail = p->done;
        else
            avail = 0;
        if (avail < lim) lim = avail;
    }
    return lim;
}

static inline int nz_fail(nz_engine_t *e, int err, int32_t op, int32_t ep, int eno) {
    e->err = err;
    e->err_op = op;
    e->err_ep = ep;
    e->err_errno = eno;
    return err;
}

/* With failover, set a channel aside instead of failing the run. Returns 1 if it did. */
static inline int nz_fail_chan(nz_engine_t *e, int32_t chan, int32_t peer, int why, int eno) {
    if (!e->failover || chan < 0 || chan >= e->nchan || chan >= 64) return 0;
    if (!(e->chan_failed & (1ULL << chan))) {
        e->chan_failed |= 1ULL << chan;
        e->fail_why[chan] = (uint8_t)why;
        e->fail_peer[chan] = peer;
        e->fail_errno[chan] = eno;
        e->fail_ns[chan] = nz_now_ns() - e->t0;
    }
    return 1;
}

/* A peer has started the vote this rank will hold next, and this run must stop to join
 * it: the peer is a collective behind (it needs this rank to re-run that one), or it is in
 * this same collective and the run is lazy (no vote of its own would bring the two
 * together). A peer a collective ahead waits: this rank finishes first, then joins. */
static inline int nz_vote_called(const nz_engine_t *e) {
    nz_health_t *h = e->health;
    if (!h || e->vote_seq < 0) return 0;  /* send/recv: no failover, but interruptible */
    int32_t slot = (int32_t)(e->vote_seq & 1);
    for (int32_t p = 0; p < h->size; p++) {
        if (__atomic_load_n(&h->status_seq[p * 2 + slot], __ATOMIC_ACQUIRE) != e->vote_seq)
            continue;
        int64_t c = h->status_coll[p * 2 + slot];
        if (c < e->vote_coll || (c == e->vote_coll && e->lazy)) return 1;
    }
    return 0;
}

static inline int nz_chan_dead(const nz_engine_t *e, int32_t chan) {
    return chan >= 0 && chan < 64 && (e->chan_failed & (1ULL << chan));
}

static inline void nz_op_finished(nz_engine_t *e, const nz_op_t *o, int64_t t0) {
    if (o->chan >= 0 && o->chan < e->nchan) {
        e->chan_ns[o->chan] = nz_now_ns() - t0;
        e->chan_bytes[o->chan] += o->nbytes;
    }
    if (e->trace_base) {
        ptrdiff_t i = o - e->trace_base;
        if (i >= 0 && i < e->trace_n) e->trace_t[i] = nz_now_ns() - t0;
    }
}

/* Is memory [lo, hi) still read by a zero-copy send that a transport took earlier? Then
 * nothing may be written there yet: the kernel would put the new bytes on the wire (a
 * ring's later step receives into the chunk it sent before). Marks the endpoints the loop
 * must wake for. A channel set aside, or on a rail the planner gave up, is not waited for
 * (its stream is out of step and gets dropped; its peer reads none of it). */
static inline int nz_tx_busy(nz_engine_t *e, const char *lo, const char *hi) {
    int busy = 0;
    for (int32_t i = 0; i < e->nep; i++) {
        nz_ep_t *p = &e->eps[i];
        if (!p->tr || !p->tr->tx_busy || nz_chan_dead(e, p->chan)) continue;
        if (e->live_rails && e->chan_rail && p->chan >= 0 && p->chan < e->nchan &&
            e->chan_rail[p->chan] < 64 && !(e->live_rails >> e->chan_rail[p->chan] & 1))
            continue;
        if (p->tr->tx_busy(p->tx, lo, hi) > 0) { p->zc_wait = 1; busy = 1; }
    }
    e->zc_wait |= busy;
    return busy;
}

/* Reduce as many whole elements from the staging area as the dependencies allow. */
static inline int nz_drain_stage(nz_engine_t *e, nz_ep_t *p, nz_op_t *ops, nz_op_t *o,
                                 int32_t oi, int *progress) {
    size_t es = nezha_dtype_size(e->dtype);
    uint64_t lim = nz_limit(ops, o);
    uint64_t n = p->stage_len;
    if (o->done + n > lim) n = lim - o->done;
    n -= n % es;
    if (n == 0) return 0;
    if (e->zc_any && nz_tx_busy(e, o->ptr + o->done, o->ptr + o->done + n)) return 0;
    if (nezha_reduce3(o->ptr + o->done, o->src + o->done, p->stage, n / es, e->dtype, e->op) != 0)
        return nz_fail(e, NZ_ERR_REDUCE, oi, o->ep, 0);
    o->done += n;
    p->stage_len -= n;
    if (p->stage_len) memmove(p->stage, p->stage + n, p->stage_len);
    *progress = 1;
    return 0;
}

static inline int nz_progress_send(nz_engine_t *e, nz_ep_t *p, nz_op_t *ops, int64_t t0,
                                   int *progress) {
    p->want_out = 0;
    while (p->sh < p->nsq) {
        int32_t oi = p->sq[p->sh];
        nz_op_t *o = &ops[oi];
        uint64_t lim = nz_limit(ops, o);
        while (o->done < lim) {
            /* A short op (the header) and what follows it go in one system call and one
             * segment: half the syscalls and wake-ups for small messages. */
            struct iovec iov[2];
            int niov = 1;
            iov[0].iov_base = o->ptr + o->done;
            iov[0].iov_len = lim - o->done;
            nz_op_t *o2 = NULL;
            if (lim == o->nbytes && o->nbytes - o->done <= 64 && p->sh + 1 < p->nsq) {
                o2 = &ops[p->sq[p->sh + 1]];
                uint64_t lim2 = nz_limit(ops, o2);
                if (lim2 > o2->done) {
                    iov[1].iov_base = o2->ptr + o2->done;
                    iov[1].iov_len = lim2 - o2->done;
                    niov = 2;
                }
            }
            ssize_t n = p->tr->sendv(p->tx, iov, niov);
            if (n > 0) {
                uint64_t first = (uint64_t)n < iov[0].iov_len ? (uint64_t)n : iov[0].iov_len;
                o->done += first;
                if (niov == 2) o2->done += (uint64_t)n - first;
                p->bytes_sent += (uint64_t)n;
                p->moved = 1;
                p->tx_watch = 1;
                *progress = 1;
            } else if (n == 0) {
                p->want_out = 1;
                return 0;
            } else {
                int eno = n == NZ_TR_CLOSED ? EPIPE : (int)-n;
                if (nz_fail_chan(e, p->chan, p->peer, NZ_WHY_ERROR, eno)) return 0;
                return nz_fail(e, NZ_ERR_SOCKET, oi, (int32_t)(p - e->eps), eno);
            }
        }
        if (o->done < o->nbytes) return 0; /* waiting on a dependency */
        nz_op_finished(e, o, t0);
        p->sh++;
    }
    return 0;
}

/* Bytes read (> 0), 0 if none would come now, or -1 after an error: then e->err is the
 * run's error, or NZ_OK when failover set the channel aside instead. */
static inline ssize_t nz_tr_result(nz_engine_t *e, nz_ep_t *p, int32_t oi, ssize_t n) {
    if (n > 0) {
        p->bytes_recv += (uint64_t)n;
        p->reads++;
        p->moved = 1;
        return n;
    }
    if (n == 0) {
        p->want_in = 1;
        return 0;
    }
    int closed = n == NZ_TR_CLOSED, eno = closed ? 0 : (int)-n;
    if (!nz_fail_chan(e, p->chan, p->peer, closed ? NZ_WHY_CLOSED : NZ_WHY_ERROR, eno))
        nz_fail(e, closed ? NZ_ERR_CLOSED : NZ_ERR_SOCKET, oi, (int32_t)(p - e->eps), eno);
    return -1;
}

static inline ssize_t nz_recv_some(nz_engine_t *e, nz_ep_t *p, int32_t oi, char *buf,
                                   uint64_t len) {
    return nz_tr_result(e, p, oi, p->tr->recv(p->tx, buf, len));
}

/* Reduce straight out of the transport's memory (NZ_CAP_PEEK): as many whole elements as
 * have arrived contiguously and the dependencies allow. Returns bytes reduced, or -1. */
static inline ssize_t nz_reduce_peeked(nz_engine_t *e, nz_ep_t *p, nz_op_t *ops, nz_op_t *o,
                                       int32_t oi) {
    const char *in;
    ssize_t n = p->tr->peek(p->tx, &in);
    if (n <= 0) return nz_tr_result(e, p, oi, n);
    size_t es = nezha_dtype_size(e->dtype);
    uint64_t lim = nz_limit(ops, o), m = (uint64_t)n;
    if (o->done + m > lim) m = lim - o->done;
    m -= m % es;
    if (m == 0) return 0;  /* an element split by the ring's end: staging takes it */
    if (e->zc_any && nz_tx_busy(e, o->ptr + o->done, o->ptr + o->done + m)) return 0;
    if (nezha_reduce3(o->ptr + o->done, o->src + o->done, in, m / es, e->dtype, e->op) != 0) {
        nz_fail(e, NZ_ERR_REDUCE, oi, o->ep, 0);
        return -1;
    }
    p->tr->consume(p->tx, m);
    o->done += m;
    p->bytes_recv += m;
    p->moved = 1;
    return (ssize_t)m;
}

/* A header and the first bytes of the op after it in one read (NZ_FUSE_MAX of them at
 * most): the sender hands both to one sendv (nz_progress_send), so they arrive together,
 * and reading them apart cost every small message one more system call on its receiver
 * (a tree step: recv of the header, recv of the data). The read goes through the staging
 * area and never past the next op's bytes; the data reaches that op only once the header
 * matched (a mismatch leaves its buffer untouched, as before). Not with a transport that
 * shows its bytes in place (NZ_CAP_PEEK) or zero-copy sends (their memory checks).
 * Returns 1 when the header finished here (the caller goes on with the next op), 2 when
 * nothing had arrived (the caller stops on this endpoint: want_in is set), 0 when this did
 * not apply or the header is not complete yet (the caller's own path then reads the rest),
 * -1 after an error (e->err, or NZ_OK when failover set the channel aside). */
#define NZ_FUSE_MAX 4096
static inline int nz_recv_fused(nz_engine_t *e, nz_ep_t *p, nz_op_t *ops, nz_op_t *o,
                                int32_t oi, int64_t t0, int *progress) {
    if (o->kind != NZ_RECV_HDR || o->done != 0 || p->rh + 1 >= p->nrq || !p->stage ||
        p->stage_len || (p->tr->caps & NZ_CAP_PEEK) || e->zc_any)
        return 0;
    nz_op_t *o2 = &ops[p->rq[p->rh + 1]];
    uint64_t hb = o->nbytes, db = 0;
    if (o2->kind == NZ_RECV) {
        uint64_t lim2 = nz_limit(ops, o2);
        if (lim2 > o2->done) db = lim2 - o2->done;
    } else if (o2->kind == NZ_RECV_REDUCE) {
        db = o2->nbytes - o2->done;  /* it stages what arrives whatever its limit */
    }
    if (db > NZ_FUSE_MAX) db = NZ_FUSE_MAX;
    if (hb + db > p->stage_cap) db = p->stage_cap > hb ? p->stage_cap - hb : 0;
    if (db == 0) return 0;
    ssize_t n = nz_recv_some(e, p, oi, p->stage, hb + db);
    if (n < 0) return -1;
    if (n == 0) return 2;  /* nothing there: no second read the ordinary way */
    *progress = 1;
    uint64_t h = (uint64_t)n < hb ? (uint64_t)n : hb, rest = (uint64_t)n - h;
    memcpy(o->ptr, p->stage, h);
    o->done = h;
    if (h < hb) return 0;  /* part of the header: the rest comes the ordinary way */
    if (!nezha_hdr_equal((const nezha_hdr_t *)o->ptr, (const nezha_hdr_t *)o->src)) {
        nz_fail(e, NZ_ERR_MISMATCH, oi, (int32_t)(p - e->eps), 0);
        return -1;
    }
    nz_op_finished(e, o, t0);
    p->rh++;
    if (rest) {
        if (o2->kind == NZ_RECV) {
            memcpy(o2->ptr + o2->done, p->stage + h, rest);
            o2->done += rest;
        } else {
            memmove(p->stage, p->stage + h, rest);
            p->stage_len = rest;
        }
    }
    return 1;
}

static inline int nz_progress_recv(nz_engine_t *e, nz_ep_t *p, nz_op_t *ops, int64_t t0,
                                   int *progress) {
    p->want_in = 0;
    while (p->rh < p->nrq) {
        int32_t oi = p->rq[p->rh];
        nz_op_t *o = &ops[oi];
        int32_t epi = (int32_t)(p - e->eps);
        if (o->kind == NZ_RECV_REDUCE) {
            for (;;) {
                if (nz_drain_stage(e, p, ops, o, oi, progress)) return e->err;
                if (p->stage_len == 0 && (p->tr->caps & NZ_CAP_PEEK) && o->done < o->nbytes) {
                    ssize_t m = nz_reduce_peeked(e, p, ops, o, oi);
                    if (m < 0) return e->err;
                    if (m > 0) { *progress = 1; continue; }
                    if (p->want_in || nz_limit(ops, o) <= o->done) break;
                }
                /* never read past this op: the next bytes belong to the next op */
                uint64_t want = o->nbytes - o->done - p->stage_len;
                uint64_t room = p->stage_cap - p->stage_len;
                if (want > room) want = room;
                if (want == 0) break;
                ssize_t n = nz_recv_some(e, p, oi, p->stage + p->stage_len, want);
                if (n < 0) return e->err;
                if (n == 0) break;
                p->stage_len += (uint64_t)n;
                *progress = 1;
            }
        } else {
            int fused = nz_recv_fused(e, p, ops, o, oi, t0, progress);
            if (fused < 0) return e->err;
            if (fused == 2) return 0;
            if (fused == 1) continue;
            uint64_t lim = nz_limit(ops, o);
            if (o->done < lim && e->zc_any && nz_tx_busy(e, o->ptr + o->done, o->ptr + lim))
                return 0;
            while (o->done < lim) {
                ssize_t n = nz_recv_some(e, p, oi, o->ptr + o->done, lim - o->done);
                if (n < 0) return e->err;
                if (n == 0) return 0;
                o->done += (uint64_t)n;
                *progress = 1;
            }
            if (o->done == o->nbytes && o->kind == NZ_RECV_HDR &&
                !nezha_hdr_equal((const nezha_hdr_t *)o->ptr, (const nezha_hdr_t *)o->src))
                return nz_fail(e, NZ_ERR_MISMATCH, oi, epi, 0);
        }
        if (o->done < o->nbytes) return 0;
        nz_op_finished(e, o, t0);
        p->rh++;
    }
    return 0;
}

/* Build per-endpoint queues in post order (counting sort on ep). */
static inline int nz_build_queues(nz_engine_t *e, nz_op_t *ops, int32_t nops) {
    int64_t need = 2 * (int64_t)nops + 1;
    if (need > e->qcap) {
        int32_t *q = (int32_t *)realloc(e->qbuf, (size_t)need * sizeof(int32_t));
        if (!q) return -1;
        e->qbuf = q;
        e->qcap = need;
    }
    e->zc_any = 0;
    for (int32_t i = 0; i < e->nep; i++) {
        nz_ep_t *p = &e->eps[i];
        p->nsq = p->nrq = p->sh = p->rh = 0;
        p->stage_len = 0;
        /* What the loop sleeps on is this run's. A run that ended with an endpoint still
         * waiting (a channel set aside, a deadline, an error) left its flag set, and the
         * next run polled it with nothing to do there: POLLOUT on a writable socket, or
         * POLLIN on bytes no op of this run reads, returned at once, for as long as the
         * run waited. At SCHED_FIFO (NEZHA_PROGRESS_SCHED=auto/fifo) two ranks doing so
         * held both cores of a 2-core machine from the other ranks' progress threads, which
         * then never sent: every rank waited to receive until NEZHA_TIMEOUT (issue 14,
         * session 26; tests/test_run_wait_flags.py). */
        p->want_in = p->want_out = p->zc_wait = 0;
        if (p->tr && p->tr->tx_busy) e->zc_any = 1;
    }
    for (int32_t i = 0; i < nops; i++) {
        int32_t ep = ops[i].ep;
        if (ep < 0) continue;
        if (ep >= e->nep) return -1;
        if (ops[i].kind == NZ_SEND) e->eps[ep].nsq++;
        else e->eps[ep].nrq++;
    }
    int32_t *cur = e->qbuf;
    for (int32_t i = 0; i < e->nep; i++) {
        nz_ep_t *p = &e->eps[i];
        p->sq = cur; cur += p->nsq;
        p->rq = cur; cur += p->nrq;
        p->nsq = p->nrq = 0;
    }
    for (int32_t i = 0; i < nops; i++) {
        int32_t ep = ops[i].ep;
        if (ep < 0) continue;
        nz_ep_t *p = &e->eps[ep];
        if (ops[i].kind == NZ_SEND) p->sq[p->nsq++] = i;
        else p->rq[p->nrq++] = i;
    }
    return 0;
}

/* Prepare a run of a schedule: queues, counters, the start time. */
static inline int nz_start(nz_engine_t *e, nz_op_t *ops, int32_t nops, int dtype, int op) {
    e->err = NZ_OK;
    e->err_op = e->err_ep = e->err_ctrl = -1;
    e->err_errno = 0;
    e->dtype = dtype;
    e->op = op;
    e->t0 = nz_now_ns();
    for (int32_t c = 0; c < e->nchan; c++) { e->chan_ns[c] = 0; e->chan_bytes[c] = 0; }
    e->trace_base = NULL;
    if (e->trace_cap && nops >= e->trace_min && nops <= e->trace_cap) {
        memcpy(e->trace_ops, ops, (size_t)nops * sizeof(nz_op_t));
        for (int32_t i = 0; i < nops; i++) e->trace_t[i] = -1;
        e->trace_n = nops;
        e->trace_t0 = e->t0;
        e->trace_base = ops;
    }
    if (nz_build_queues(e, ops, nops)) return nz_fail(e, NZ_ERR_INTERNAL, -1, -1, ENOMEM);
    e->chan_failed = 0;
    /* An abort a peer sent after our last run (e.g. it found a mismatch in a collective
     * this rank had already finished) must surface now, not after a timeout. */
    if (e->health && __atomic_load_n(&e->health->ilen, __ATOMIC_ACQUIRE) > 0)
        return nz_fail(e, NZ_ERR_CTRL, -1, -1, 0);
    if (nz_vote_called(e)) return nz_fail(e, NZ_ERR_VOTE, -1, -1, 0);
    return NZ_OK;
}

/* Is `peer` silent on `rail` (last heard at heard_r, more than silent_ns ago) in a way
 * that blames the rail? A cut or blackholed link is silence on one rail while the peer
 * talks on another. Silence on every rail at once is a starved process (more ranks than
 * cores: its health thread or ours got no CPU), a stopped or a dead one: giving up rails
 * for it would only have them re-admitted later, or leave none; it counts only after the
 * peer-lost wait, and then the vote finds out which. While the peer talks elsewhere, a
 * rail that still delivers something (the transport's rx_age_ns) is congested, not cut:
 * on a full link a lost heartbeat holds every later one back in TCP's byte stream until
 * its retransmission gets through (seen in the lab with 2 ranks per host: 100-700 ms on
 * one rail while segments kept arriving). Timestamps a health thread is still writing
 * (busy) are not compared. */
static inline int nz_rail_silent(nz_engine_t *e, int32_t rail, int32_t peer, int64_t heard_r,
                                 int64_t now) {
    nz_health_t *h = e->health;
    int64_t lost = 2 * e->silent_ns > NZ_PEER_LOST_NS ? 2 * e->silent_ns : NZ_PEER_LOST_NS;
    int32_t nrails = h->n / h->size, elsewhere = 0;
    for (int32_t q = 0; q < nrails && !elsewhere; q++) {
        if (q == rail) continue;
        int32_t c = q * h->size + peer;
        /* heartbeats only: the peer's health thread sends them on every rail in one go, so
         * their arrival times compare; data on another rail's channel (shm between ranks of
         * one host) moves while this rail's heartbeats wait for a starved health thread */
        elsewhere = !h->closed[c] && h->last_heard[c] - heard_r > e->silent_ns;
    }
    /* the last rail in use goes only after the peer-lost wait: giving it up ends the job,
     * and on a full link its heartbeats can lag the dead rail's (lab: 76 ms, 2 per host) */
    if (!elsewhere || e->live_rails == (1ULL << rail)) return now - heard_r > lost;
    if (__atomic_load_n(&h->busy, __ATOMIC_ACQUIRE)) return 0;
    int32_t c = rail * h->size + peer;
    const nz_ctrl_t *ct = &h->ctrl[c];
    if (ct->tr && !h->closed[c] && ct->tr->rx_age_ns) {
        int64_t age = ct->tr->rx_age_ns(ct->tx);
        if (age >= 0 && age <= e->silent_ns) return 0;
    }
    return 1;
}

/* Set aside every channel that waits on a peer it has not heard from on that channel's
 * rail for silent_ns while the peer talks on another rail (a blackholed or cut link sends
 * no error, only silence; see nz_rail_silent). */
static inline int nz_check_silence(nz_engine_t *e, int64_t now) {
    nz_health_t *h = e->health;
    if (!e->failover || !h || e->nchan == 0) return 0;
    int32_t size = e->nep / e->nchan, hit = 0;
    if (e->vote_seq >= 0) {
        int32_t slot = (int32_t)(e->vote_seq & 1);
        for (int32_t p = 0; p < size; p++) {
            if (__atomic_load_n(&h->status_seq[p * 2 + slot], __ATOMIC_ACQUIRE) != e->vote_seq ||
                h->status_coll[p * 2 + slot] != e->vote_coll)
                continue;
            uint64_t m = h->status_mask[p * 2 + slot];
            /* only channels not set aside yet count as news: a hit makes nz_progress loop
             * again without looking at the deadline, so a vote naming a channel already
             * dead (e.g. a hostile peer's STATUS frame) spun forever (tests/test_fuzz.py) */
            for (int32_t i = 0; i < e->nslices && i < 64; i++)
                if ((m & (1ULL << i)) && !nz_chan_dead(e, e->slice_chan[i]))
                    hit |= nz_fail_chan(e, e->slice_chan[i], p, NZ_WHY_PEER, 0);
        }
    }
    for (int32_t i = 0; i < e->nep; i++) {
        nz_ep_t *p = &e->eps[i];
        if (!p->tr) continue;
        int32_t c = e->chan_rail[p->chan] * size + p->peer;
        if (p->moved) { e->data_heard[c] = now; p->moved = 0; }
    }
    for (int32_t i = 0; i < e->nep; i++) {
        nz_ep_t *p = &e->eps[i];
        if (nz_chan_dead(e, p->chan) || (p->sh >= p->nsq && p->rh >= p->nrq)) continue;
        int32_t c = e->chan_rail[p->chan] * size + p->peer;
        int64_t heard = h->last_heard[c] > e->data_heard[c] ? h->last_heard[c] : e->data_heard[c];
        if (h->closed[c]) hit |= nz_fail_chan(e, p->chan, p->peer, NZ_WHY_CLOSED, 0);
        else if (now - heard > e->silent_ns &&
                 nz_rail_silent(e, e->chan_rail[p->chan], p->peer, heard, now))
            hit |= nz_fail_chan(e, p->chan, p->peer, NZ_WHY_SILENT, 0);
    }
    return hit;
}

/* Ask every endpoint that sent since its bytes were last all acknowledged (tx_kick): bytes
 * that wait unsent are pushed again. A sender that hands its whole message to the kernel at
 * once has no later send to do that: a segment a full shaper dropped before it left waited
 * for an acknowledgement or a TCP timer, 200 ms (2 hosts x 4 ranks, striped hierarchical
 * allgather of 1 MiB per rank: 225 ms against 45 ms, docs/results/session15). Returns
 * whether some endpoint still has bytes on their way. */
static inline int nz_kick_stuck(nz_engine_t *e) {
    int watching = 0;
    for (int32_t i = 0; i < e->nep; i++) {
        nz_ep_t *p = &e->eps[i];
        if (!p->tx_watch) continue;
        if (!p->tr || !p->tr->tx_kick || nz_chan_dead(e, p->chan)) { p->tx_watch = 0; continue; }
        int k = p->tr->tx_kick(p->tx);
        if (k == NZ_TX_STUCK) e->tx_kicks++;
        if (k) watching = 1;
        else p->tx_watch = 0;
    }
    return watching;
}

/* Drive a started schedule until it completes, fails, passes deadline_ns (absolute,
 * CLOCK_MONOTONIC) or a control socket becomes readable (NZ_ERR_CTRL; the caller reads
 * the message and may call again: the run's state is kept). */
/* Set in a thread that must never busy-poll: a real-time progress thread (NEZHA_PROGRESS_SCHED
 * = fifo) that spun would keep its core from every ordinary thread, since sched_yield()
 * yields only to threads of its own class. */
static __thread int nz_no_spin;
static inline void nz_set_no_spin(int on) { nz_no_spin = on; }

static inline int nz_progress(nz_engine_t *e, nz_op_t *ops, int32_t nops, int64_t deadline_ns) {
    int dtype = e->dtype, op = e->op;
    int64_t t0 = e->t0;
    e->err = NZ_OK;

    struct pollfd stackfds[64];
    int32_t stackmap[65];
    struct pollfd *pfd = stackfds;
    int32_t *pmap = stackmap; /* pollfd slot -> endpoint index */
    int32_t maxfds = NZ_EP_MAXFDS * e->nep + 1 + (e->health ? NZ_CTRL_MAXFDS * e->health->n : 0);
    if (maxfds > 64) {  /* the heap only for many endpoints: a small run makes no malloc */
        pfd = (struct pollfd *)malloc(sizeof(struct pollfd) * (size_t)maxfds);
        if (!pfd) return nz_fail(e, NZ_ERR_INTERNAL, -1, -1, ENOMEM);
        pmap = (int32_t *)malloc(sizeof(int32_t) * (size_t)(maxfds + 1));
        if (!pmap) { free(pfd); return nz_fail(e, NZ_ERR_INTERNAL, -1, -1, ENOMEM); }
    }

    int rc = NZ_OK;
    int64_t idle_since = 0;
    for (;;) {
        int progress = 0, pending = 0;
        if (e->zc_wait) {
            e->zc_wait = 0;
            for (int32_t i = 0; i < e->nep; i++) e->eps[i].zc_wait = 0;
        }
        for (int32_t i = 0; i < nops; i++) {
            nz_op_t *o = &ops[i];
            if (o->kind != NZ_LOCAL_REDUCE || o->done >= o->nbytes || nz_chan_dead(e, o->chan))
                continue;
            size_t es = nezha_dtype_size(dtype);
            uint64_t lim = nz_limit(ops, o);
            uint64_t n = lim - o->done;
            n -= n % es;
            if (n && e->zc_any && nz_tx_busy(e, o->ptr + o->done, o->ptr + o->done + n))
                n = 0;
            if (n) {
                if (nezha_reduce(o->ptr + o->done, o->src + o->done, n / es, dtype, op)) {
                    rc = nz_fail(e, NZ_ERR_REDUCE, i, -1, 0);
                    goto out;
                }
                o->done += n;
                progress = 1;
                if (o->done == o->nbytes) nz_op_finished(e, o, t0);
            }
            if (o->done < o->nbytes) pending = 1;
        }
        for (int32_t i = 0; i < e->nep; i++) {
            nz_ep_t *p = &e->eps[i];
            if (nz_chan_dead(e, p->chan)) continue;
            if (!p->tr && (p->sh < p->nsq || p->rh < p->nrq)) {
                /* a closed endpoint (a channel cut by a vote) with work queued on it: the
                 * channel fails at once, as a closed socket would */
                int32_t oi = p->rh < p->nrq ? p->rq[p->rh] : p->sq[p->sh];
                if (!nz_fail_chan(e, p->chan, p->peer, NZ_WHY_ERROR, EBADF)) {
                    rc = nz_fail(e, NZ_ERR_SOCKET, oi, i, EBADF);
                    goto out;
                }
                continue;
            }
            if (p->sh < p->nsq && (rc = nz_progress_send(e, p, ops, t0, &progress))) goto out;
            if (nz_chan_dead(e, p->chan)) continue;
            if (p->rh < p->nrq && (rc = nz_progress_recv(e, p, ops, t0, &progress))) goto out;
            if (nz_chan_dead(e, p->chan)) continue;
            if (p->sh < p->nsq || p->rh < p->nrq) pending = 1;
        }
        /* The run ends once no zero-copy send reads the memory any more: the caller may
         * change or free it as soon as we return. */
        if (!pending && e->zc_any && nz_tx_busy(e, NULL, (const char *)UINTPTR_MAX)) pending = 1;
        if (!pending) {
            if (e->chan_failed) rc = nz_fail(e, NZ_ERR_CHANFAIL, -1, -1, 0);
            break;
        }
        if (progress) { idle_since = 0; continue; }
        if (nz_vote_called(e)) { rc = nz_fail(e, NZ_ERR_VOTE, -1, -1, 0); goto out; }
        /* Small messages arrive within microseconds: retrying (and yielding the core to
         * the ranks that share it) beats a sleep and a wake-up in poll(). */
        if (e->run_spin_ns > 0 && !nz_no_spin) {
            int64_t now = nz_now_ns();
            if (!idle_since) idle_since = now;
            if (now - idle_since < e->run_spin_ns && now < deadline_ns) { sched_yield(); continue; }
        }
        /* Nothing moved: sleep on what we wait for, and on the health thread's news. */
        int64_t now = nz_now_ns();
        if (nz_check_silence(e, now)) continue;
        int watching = nz_kick_stuck(e);
        int32_t nfd = 0, ready = 0;
        for (int32_t i = 0; i < e->nep; i++) {
            nz_ep_t *p = &e->eps[i];
            /* waiting for zero-copy completions only: no direction, POLLERR wakes us */
            if (!(p->want_in || p->want_out || p->zc_wait) || !p->tr || nz_chan_dead(e, p->chan))
                continue;
            int k = p->tr->pollfds(p->tx, p->want_in, p->want_out, pfd + nfd, NZ_EP_MAXFDS);
            if (k == NZ_TR_READY) { ready = 1; continue; }
            if (k < 0) {  /* the transport knows it will never move again (peer died) */
                int32_t oi = p->rh < p->nrq ? p->rq[p->rh] : (p->sh < p->nsq ? p->sq[p->sh] : -1);
                nz_tr_result(e, p, oi, k);
                if (e->err) { rc = e->err; goto out; }
                ready = 1;  /* set aside: the others go on */
                continue;
            }
            for (int j = 0; j < k; j++) pmap[nfd++] = i;
        }
        if (ready) continue;
        int32_t nep_fds = nfd;
        if (e->health) {
            pfd[nfd].fd = e->health->evfd; pfd[nfd].events = POLLIN; pfd[nfd].revents = 0;
            pmap[nfd++] = -1;
            if (e->failover)  /* read votes and heartbeats here, without a thread hop */
                for (int32_t c = 0; c < e->health->n; c++)
                    if (nz_health_watch(e->health, c, pfd, pmap, -2 - c, &nfd, maxfds))
                        nz_health_read(e->health, c, now);
        }
        if (now >= deadline_ns) {
            /* report the first op still waiting: that names the peer we wait for */
            int32_t w = -1, wep = -1;
            for (int32_t i = 0; i < e->nep && w < 0; i++) {
                nz_ep_t *p = &e->eps[i];
                if (nz_chan_dead(e, p->chan)) continue;
                if (p->rh < p->nrq) { w = p->rq[p->rh]; wep = i; }
                else if (p->sh < p->nsq) { w = p->sq[p->sh]; wep = i; }
            }
            rc = nz_fail(e, NZ_ERR_TIMEOUT, w, wep, ETIMEDOUT);
            goto out;
        }
        int64_t wait_ms = (deadline_ns - now + 999999) / 1000000;
        if (wait_ms > 1000) wait_ms = 1000;
        /* a completion wakes poll (POLLERR); 1 ms in case a transport's pollfds cannot say */
        if (e->zc_wait && wait_ms > 1) wait_ms = 1;
        /* bytes on their way: look again soon, in case the next segment is dropped before
         * it leaves with none in flight (nz_kick_stuck) */
        if (watching && wait_ms > NZ_TX_WATCH_MS) wait_ms = NZ_TX_WATCH_MS;
        if (e->failover && e->health && wait_ms > e->silent_ns / 4000000 + 1)
            wait_ms = e->silent_ns / 4000000 + 1;  /* wake to look for silent peers */
        int r = poll(pfd, (nfds_t)nfd, (int)wait_ms);
        e->run_polls++;
        if (r < 0 && errno != EINTR) { rc = nz_fail(e, NZ_ERR_INTERNAL, -1, -1, errno); goto out; }
        if (e->health && r > 0) {
            int64_t t = nz_now_ns();
            for (int32_t k = nep_fds + 1; k < nfd; k++)
                if (pfd[k].revents) nz_health_read(e->health, -2 - pmap[k], t);
            if (pfd[nep_fds].revents) {
                uint64_t cnt;
                ssize_t k = read(e->health->evfd, &cnt, sizeof(cnt));
                (void)k;
            }
            if (__atomic_load_n(&e->health->ilen, __ATOMIC_ACQUIRE) > 0) {
                rc = nz_fail(e, NZ_ERR_CTRL, -1, -1, 0);
                goto out;
            }
        }
        /* POLLERR/POLLHUP on a data socket: the next send/recv reports the cause */
    }
out:
    if (pfd != stackfds) free(pfd);
    if (pmap != stackmap) free(pmap);
    return rc;
}

/* Rails on which this rank has heard every peer (health heartbeats only, not data) within
 * quiet_ns, without a gap for at least steady_ns (a silence of more than 3 heartbeats going
 * on now is a gap too: since[] only learns of a gap once the peer is heard again, and a
 * rail reset while its heartbeats had been silent for less than quiet_ns was re-admitted
 * in the middle of its fault, session 21): with quiet_ns = e->silent_ns the rank's
 * vote for re-admitting a rail; with steady_ns = 0 and the peer-lost wait, the rails a
 * vote that would leave none may take back (nezha/failover.py, _vote). One C loop: done
 * in Python per rail x peer it cost O(size x rails) interpreter work per striped vote. */
static inline uint64_t nz_heard_rails(nz_engine_t *e, int32_t nrails, int32_t rank,
                                      int64_t steady_ns, int64_t quiet_ns) {
    nz_health_t *h = e->health;
    if (!h) return 0;
    int64_t now = nz_now_ns();
    uint64_t m = 0;
    for (int32_t r = 0; r < nrails && r < 64; r++) {
        int ok = 1;
        for (int32_t p = 0; p < h->size && ok; p++) {
            if (p == rank) continue;
            int32_t c = r * h->size + p;
            /* steady_ns 0: no since test (the health thread may set since after our now) */
            ok = !h->closed[c] && now - h->last_heard[c] <= quiet_ns &&
                 (steady_ns <= 0 || (now - h->since[c] >= steady_ns &&
                                     now - h->last_heard[c] <= 3 * h->interval_ns));
        }
        if (ok) m |= 1ULL << r;
    }
    return m;
}

/* Rail r failed here (a channel of it set aside by a vote): its steadiness for re-admission
 * starts over now. The heartbeats heard before the failure prove nothing about the rail
 * after it: a rail whose data connections were reset while its heartbeats went on, or had
 * been silent only a moment, came back at the next vote and failed again at once, a dozen
 * times in 0.2 s (tests/test_loop_faults.py, session 21). */
static inline void nz_rail_restart_steady(nz_engine_t *e, int32_t r) {
    nz_health_t *h = e->health;
    if (!h) return;
    int64_t now = nz_now_ns();
    for (int32_t p = 0; p < h->size; p++)
        if (r * h->size + p < h->n) h->since[r * h->size + p] = now;
}

/* A vote (failover on): every rank tells every other, over every rail, which
 * collective it is in (coll), which of its slices it could not finish (mask), flags, and
 * which rails it hears well (heard); then waits for everyone's. Results per rank in
 * colls/masks/flags (size entries; this rank's own included) and the intersection of
 * heard. Every rank gets the same table, so every rank decides the same. */
static inline int nz_vote_wait(nz_engine_t *e, int32_t rank, uint32_t seq, int64_t coll,
                               uint64_t mask, uint16_t flags, uint64_t heard,
                               uint64_t live_rails, int32_t nrails, int64_t deadline_ns,
                               int64_t *colls, uint64_t *masks, uint16_t *oflags,
                               uint64_t *iheard);

static inline int nz_vote(nz_engine_t *e, int32_t rank, uint32_t seq, int64_t coll,
                          uint64_t mask, uint16_t flags, uint64_t heard, uint64_t live_rails,
                          int32_t nrails, int64_t deadline_ns, int64_t *colls,
                          uint64_t *masks, uint16_t *oflags, uint64_t *iheard) {
    /* while here, this vote's frames need not wake the guard (nz_health_read_locked) and
     * the health thread parks (nz_health_main): this thread reads the control endpoints */
    nz_health_t *h = e->health;
    __atomic_store_n(&h->voting_seq, (int64_t)seq, __ATOMIC_SEQ_CST);
    int rc = nz_vote_wait(e, rank, seq, coll, mask, flags, heard, live_rails, nrails,
                          deadline_ns, colls, masks, oflags, iheard);
    __atomic_store_n(&h->voting_seq, (int64_t)-1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&h->parked, __ATOMIC_SEQ_CST)) {
        uint64_t one = 1;
        ssize_t w = write(h->hwake, &one, sizeof(one));
        (void)w;
    }
    return rc;
}

static inline int nz_vote_wait(nz_engine_t *e, int32_t rank, uint32_t seq, int64_t coll,
                               uint64_t mask, uint16_t flags, uint64_t heard,
                               uint64_t live_rails, int32_t nrails, int64_t deadline_ns,
                               int64_t *colls, uint64_t *masks, uint16_t *oflags,
                               uint64_t *iheard) {
    nz_health_t *h = e->health;
    e->err = NZ_OK;
    e->err_ep = -1;
    nz_frame_t f;
    memset(&f, 0, sizeof(f));
    f.magic = NZ_CTRL_MAGIC;
    f.type = NZ_FRAME_STATUS;
    f.seq = seq;
    f.mask = mask;
    f.heard = heard;
    f.coll = coll;
    f.kind = flags;
    /* one copy per peer, on the first live rail: every copy more is kernel work on every
     * rank (a vote cost ~2x with one per rail); a copy lost on a rail that just died is
     * made up for by the resend below */
    int32_t first = -1;
    for (int32_t r = 0; r < nrails && r < 64 && first < 0; r++)
        if (live_rails >> r & 1) first = r;
    int32_t par = (int32_t)(seq & 1);
    h->own[par] = f;
    __atomic_store_n(&h->own_seq[par], (int64_t)seq, __ATOMIC_RELEASE);
    for (int32_t p = 0; p < h->size; p++) {
        if (p == rank) continue;
        if (first >= 0) nz_health_send(h, first * h->size + p, &f, NULL);
        else nz_health_send_all(h, p, &f, live_rails);
    }
    *iheard = heard;
    int64_t spin_from = 0;
    /* a peer not heard from within NZ_VOTE_RESEND_NS: send ours again on every rail and
     * poke it for its own (it may have left this vote already, its copy lost), backing off */
    int64_t resend_gap = NZ_VOTE_RESEND_NS, resend_at = nz_now_ns() + resend_gap;
    for (;;) {
        int missing = 0;
        for (int32_t p = 0; p < h->size; p++) {
            if (p == rank) continue;
            if (__atomic_load_n(&h->status_seq[p * 2 + (seq & 1)], __ATOMIC_ACQUIRE) != (int64_t)seq) {
                missing = 1;
                /* a peer that closed every control connection is gone */
                int open = 0, heard = 0;
                int64_t t = nz_now_ns();
                /* giving up on a peer ends the job: wait longer than for a rail, so that a
                 * rank starved of CPU for a moment (more ranks than cores) is not taken
                 * for one cut off on every rail */
                int64_t lost = 2 * e->silent_ns > NZ_PEER_LOST_NS ? 2 * e->silent_ns : NZ_PEER_LOST_NS;
                for (int32_t r = 0; r < nrails; r++) {
                    int32_t c = r * h->size + p;
                    open |= !h->closed[c];
                    heard |= !h->closed[c] && t - h->last_heard[c] <= lost;
                }
                if (!open) { e->err_ep = p; return nz_fail(e, NZ_ERR_CLOSED, -1, p, 0); }
                /* silent on every rail: no path is left to this peer */
                if (!heard) { e->err_ep = p; return nz_fail(e, NZ_ERR_TIMEOUT, -1, p, EHOSTUNREACH); }
            }
        }
        if (!missing) break;
        if (__atomic_load_n(&h->ilen, __ATOMIC_ACQUIRE) > 0) return nz_fail(e, NZ_ERR_CTRL, -1, -1, 0);
        int64_t now = nz_now_ns();
        if (now >= resend_at) {
            nz_frame_t poke = f;
            poke.type = NZ_FRAME_POKE;
            for (int32_t p = 0; p < h->size; p++)
                if (p != rank && __atomic_load_n(&h->status_seq[p * 2 + par], __ATOMIC_ACQUIRE) != (int64_t)seq) {
                    nz_health_send_all(h, p, &f, live_rails);
                    nz_health_send_all(h, p, &poke, live_rails);
                    __atomic_fetch_add(&h->vote_resends, 1, __ATOMIC_RELAXED);
                }
            resend_gap = resend_gap * 2 < NZ_VOTE_RESEND_MAX_NS ? resend_gap * 2 : NZ_VOTE_RESEND_MAX_NS;
            resend_at = now + resend_gap;
        }
        if (now >= deadline_ns) {
            for (int32_t p = 0; p < h->size; p++)
                if (p != rank && h->status_seq[p * 2 + (seq & 1)] != (int64_t)seq) { e->err_ep = p; break; }
            return nz_fail(e, NZ_ERR_TIMEOUT, -1, e->err_ep, ETIMEDOUT);
        }
        /* read the peers' control sockets ourselves: a vote arrives within microseconds
         * of the last rank finishing, and a thread hop would cost more than the wait */
        struct pollfd pf[129];
        int32_t pc[129];
        int32_t np = 0, ready = 0;
        pf[np].fd = h->evfd; pf[np].events = POLLIN; pf[np].revents = 0; pc[np++] = -1;
        for (int32_t c = 0; c < h->n; c++)
            if (c % h->size != rank && nz_health_watch(h, c, pf, pc, c, &np, 129)) {
                nz_health_read(h, c, now);
                ready = 1;
            }
        if (ready) continue;
        if (!spin_from) spin_from = now;
        int spinning = !nz_no_spin && now - spin_from < e->spin_ns;
        int64_t ms = ((resend_at < deadline_ns ? resend_at : deadline_ns) - now) / 1000000 + 1;
        if (ms > 10) ms = 10;
        /* this rank's run is over, but what it sent may not have left: the peers that wait
         * for it vote only once it has */
        if (!spinning && nz_kick_stuck(e) && ms > NZ_TX_WATCH_MS) ms = NZ_TX_WATCH_MS;
        int r = poll(pf, (nfds_t)np, spinning ? 0 : (int)ms);
        for (int k = 1; r > 0 && k < np; k++)
            if (pf[k].revents) nz_health_read(h, pc[k], nz_now_ns());
        if (r > 0 && pf[0].revents) {
            uint64_t cnt;
            ssize_t k = read(h->evfd, &cnt, sizeof(cnt));
            (void)k;
        }
        if (spinning && r == 0) sched_yield();
    }
    for (int32_t p = 0; p < h->size; p++) {
        int32_t slot = p * 2 + (int32_t)(seq & 1);
        if (p == rank) {
            colls[p] = coll; masks[p] = mask; oflags[p] = flags;
            continue;
        }
        colls[p] = h->status_coll[slot];
        masks[p] = h->status_mask[slot];
        oflags[p] = h->status_flags[slot];
        *iheard &= h->status_heard[slot];
    }
    return NZ_OK;
}

#endif
