/* Health: heartbeats and control frames on the control endpoints (one per rail per peer).
 *
 * A background pthread (no Python, no GIL) sends a heartbeat frame on every control
 * endpoint every interval and reads everything that arrives on them. Any frame refreshes
 * last_heard[ctrl], so a rail that goes silent between two ranks (link down, blackhole) is
 * seen by both within a few intervals, whether or not a collective is running. STATUS
 * frames (votes) are recorded per peer and vote parity in status_*; every other
 * frame (abort, ...) goes to an inbox for Python, and an eventfd wakes the engine.
 *
 * Control endpoints are driven through the transport contract (nezha_transport.h) like
 * data endpoints, so a rail of any transport is watched and voted over alike.
 * They are indexed rail * size + peer. */
#ifndef NEZHA_HEALTH_H
#define NEZHA_HEALTH_H

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "nezha/nezha_transport.h"

#define NZ_CTRL_MAGIC 0x43485A4Eu /* "NZHC" */

/* POKE (seq): "your STATUS for vote seq has not reached me": answered from own[] */
enum { NZ_FRAME_HEARTBEAT = 1, NZ_FRAME_ABORT = 2, NZ_FRAME_STATUS = 3, NZ_FRAME_POKE = 4 };

typedef struct {
    uint32_t magic;
    uint16_t type;
    uint16_t kind;   /* abort kind; STATUS: NZ_VOTE_* flags */
    uint32_t seq;    /* STATUS: vote number */
    uint32_t len;    /* payload bytes after the frame */
    uint64_t mask;   /* STATUS: slices this rank could not finish */
    uint64_t heard;  /* STATUS: rails this rank hears from everyone (for re-admission) */
    int64_t coll;    /* STATUS: index of the collective the voter is in */
} nz_frame_t;

/* STATUS flags: the voter's run was interrupted with slices still moving on live channels;
 * the voter is closing the communicator (it is in no collective) */
enum { NZ_VOTE_RUNNING = 1, NZ_VOTE_CLOSING = 2 };

#define NZ_RBUF 8192
#define NZ_CTRL_MAXFDS 2  /* pollfds one control endpoint may ask for */

typedef struct {
    const nz_transport_ops_t *tr;  /* NULL: no endpoint (self) */
    void *tx;
} nz_ctrl_t;

typedef struct {
    int32_t n;                 /* control endpoints */
    int32_t size;              /* ranks */
    nz_ctrl_t *ctrl;
    int64_t *last_heard;       /* ns, CLOCK_MONOTONIC */
    int64_t *since;            /* ns since the endpoint has been heard without a gap */
    uint8_t *closed;           /* EOF or error seen */
    pthread_mutex_t *wlock;    /* one writer at a time per endpoint */
    pthread_mutex_t *rlock;    /* one reader at a time: the health thread or the engine */
    int64_t interval_ns;
    int busy;                  /* the health thread is between poll() and the end of its reads */
    volatile int stop;
    pthread_t th;
    int started;
    pthread_mutex_t slock;     /* one nz_health_stop at a time (see there) */
    int evfd;
    int gfd;                   /* eventfd: a vote frame arrived (wakes an idle rank's guard) */
    int64_t voting_seq;        /* the vote this rank's caller waits in, or -1 (nz_vote) */
    int parked;                /* the health thread keeps off the control endpoints (a vote) */
    int hwake;                 /* eventfd: the vote ended, a parked health thread goes on */
    /* this rank's own STATUS by vote parity, for answering a POKE: own_seq is set after
     * own[] is written and read before and after it is copied (a later vote reuses it) */
    nz_frame_t own[2];
    int64_t own_seq[2];
    uint64_t vote_resends;     /* STATUS sent again on every rail, with a poke (nz_vote) */
    uint64_t pokes_answered;
    /* the health thread's polls of the control endpoints, and its reads left to another
     * reader (rlock held): how often it wakes, whatever woke it */
    uint64_t polls;
    uint64_t refused;
    /* heartbeats not sent: another thread was writing on that endpoint (nz_health_beat) */
    uint64_t beats_skipped;
    /* vote: latest STATUS per peer and vote parity (2 * size slots) */
    volatile int64_t *status_seq;
    volatile uint64_t *status_mask;
    volatile uint64_t *status_heard;
    volatile int64_t *status_coll;
    volatile uint16_t *status_flags;
    /* inbox of other frames: [int32 ctrl][frame][payload] ... */
    pthread_mutex_t ilock;
    char *inbox;
    size_t ilen, icap;
    /* partial reads per endpoint */
    char *rbuf;                /* n * NZ_RBUF */
    uint32_t *rlen;
} nz_health_t;

static inline int64_t nz_health_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int nz_ctrl_open(const nz_health_t *h, int32_t i) {
    return i >= 0 && i < h->n && h->ctrl[i].tr != NULL && !h->closed[i];
}

/* Fill the pollfds that wake control endpoint i for input (or output): how many,
 * NZ_TR_READY if it can move now, or < 0 if it never will. */
static inline int nz_ctrl_pollfds(nz_health_t *h, int32_t i, int out, struct pollfd *pf) {
    return h->ctrl[i].tr->pollfds(h->ctrl[i].tx, !out, out, pf, NZ_CTRL_MAXFDS);
}

/* Send len bytes of buf (a whole frame) on control endpoint i, its wlock held: 0 if all
 * went. */
static inline int nz_health_send_locked(nz_health_t *h, int32_t i, const char *buf, size_t len) {
    size_t off = 0;
    int64_t give_up = nz_health_now() + 20000000LL;
    const nz_ctrl_t *c = &h->ctrl[i];
    while (off < len) {
        /* iov_base is not const; sendv only reads it */
        struct iovec iov = {(void *)(buf + off), len - off};
        ssize_t k = c->tr->sendv(c->tx, &iov, 1);
        if (k > 0) { off += (size_t)k; continue; }
        if (k == 0 && off > 0 && nz_health_now() < give_up) {
            /* finish a started frame, or the stream loses its framing */
            struct pollfd p[NZ_CTRL_MAXFDS];
            int np = nz_ctrl_pollfds(h, i, 1, p);
            if (np > 0) poll(p, (nfds_t)np, 2);
            else if (np < 0 && np != NZ_TR_READY) break;
            continue;
        }
        break;
    }
    return off == len ? 0 : -1;
}

/* Send one frame (+ payload) whole or not at all-ish: control frames are small and the
 * transport's buffer is large, so a partial write only happens on a dying link. */
static inline int nz_health_send(nz_health_t *h, int32_t i, const nz_frame_t *f,
                                 const char *payload) {
    if (!nz_ctrl_open(h, i)) return -1;
    char buf[sizeof(nz_frame_t) + 4096];
    size_t len = sizeof(nz_frame_t) + (f->len < 4096 ? f->len : 4096);
    memcpy(buf, f, sizeof(nz_frame_t));
    ((nz_frame_t *)buf)->len = (uint32_t)(len - sizeof(nz_frame_t));
    if (payload && len > sizeof(nz_frame_t)) memcpy(buf + sizeof(nz_frame_t), payload, len - sizeof(nz_frame_t));
    pthread_mutex_lock(&h->wlock[i]);
    int rc = nz_health_send_locked(h, i, buf, len);
    pthread_mutex_unlock(&h->wlock[i]);
    return rc;
}

/* A heartbeat on control endpoint i, unless another thread is writing there: its frame is
 * heard as well, and waiting for it would hold every other endpoint's heartbeat (a
 * real-time health thread waiting for an ordinary writer that the ranks' real-time progress
 * threads keep off the cores: heartbeats stop on every rail, false silences). */
static inline void nz_health_beat(nz_health_t *h, int32_t i, const nz_frame_t *beat) {
    if (!nz_ctrl_open(h, i)) return;
    if (pthread_mutex_trylock(&h->wlock[i]) != 0) {
        __atomic_fetch_add(&h->beats_skipped, 1, __ATOMIC_RELAXED);
        return;
    }
    nz_health_send_locked(h, i, (const char *)beat, sizeof(*beat));
    pthread_mutex_unlock(&h->wlock[i]);
}

/* frame f to rank p on every rail (control endpoint r * size + p), the rails in live
 * first: the last live rail may be the one just cut while a given-up one works again */
static inline void nz_health_send_all(nz_health_t *h, int32_t p, const nz_frame_t *f,
                                      uint64_t live) {
    int32_t nrails = h->n / h->size;
    for (int pass = 0; pass < 2; pass++)
        for (int32_t r = 0; r < nrails; r++)
            if (((r < 64 && (live >> r & 1)) ? 0 : 1) == pass) nz_health_send(h, r * h->size + p, f, NULL);
}

/* Peer p asked again for this rank's STATUS of vote seq (it did not arrive): resend it on
 * every rail, if this rank has voted so (else it sends it when it gets there). */
static inline void nz_health_answer_poke(nz_health_t *h, int32_t p, uint32_t seq) {
    int32_t par = (int32_t)(seq & 1);
    if (__atomic_load_n(&h->own_seq[par], __ATOMIC_ACQUIRE) != (int64_t)seq) return;
    nz_frame_t f = h->own[par];
    if (__atomic_load_n(&h->own_seq[par], __ATOMIC_ACQUIRE) != (int64_t)seq) return;
    nz_health_send_all(h, p, &f, ~0ULL);
    __atomic_fetch_add(&h->pokes_answered, 1, __ATOMIC_RELAXED);
}

static inline void nz_health_post(nz_health_t *h, int32_t i, const nz_frame_t *f,
                                  const char *payload) {
    size_t need = sizeof(int32_t) + sizeof(nz_frame_t) + f->len;
    pthread_mutex_lock(&h->ilock);
    if (h->ilen + need > h->icap) {
        size_t cap = (h->icap ? h->icap * 2 : 65536);
        while (cap < h->ilen + need) cap *= 2;
        char *p = (char *)realloc(h->inbox, cap);
        if (!p) { pthread_mutex_unlock(&h->ilock); return; }
        h->inbox = p;
        h->icap = cap;
    }
    memcpy(h->inbox + h->ilen, &i, sizeof(int32_t));
    memcpy(h->inbox + h->ilen + sizeof(int32_t), f, sizeof(nz_frame_t));
    if (f->len && payload)
        memcpy(h->inbox + h->ilen + sizeof(int32_t) + sizeof(nz_frame_t), payload, f->len);
    h->ilen += need;
    pthread_mutex_unlock(&h->ilock);
    uint64_t one = 1;
    ssize_t w = write(h->evfd, &one, sizeof(one));
    (void)w;
}

/* Control endpoint i is closed: record it and tell Python (type 0 pseudo-frame). */
static inline void nz_health_closed(nz_health_t *h, int32_t i) {
    h->closed[i] = 1;
    nz_frame_t f;
    memset(&f, 0, sizeof(f));
    f.magic = NZ_CTRL_MAGIC;
    nz_health_post(h, i, &f, NULL);
}

/* 1 if anything moved (bytes, or the endpoint closed), 0 if nothing was there */
static inline int nz_health_read_locked(nz_health_t *h, int32_t i, int64_t now) {
    char *rb = h->rbuf + (size_t)i * NZ_RBUF;
    for (int moved = 0;; moved = 1) {
        ssize_t k = h->ctrl[i].tr->recv(h->ctrl[i].tx, rb + h->rlen[i], NZ_RBUF - h->rlen[i]);
        if (k < 0) {
            nz_health_closed(h, i);
            return 1;
        }
        if (k == 0) return moved;
        h->rlen[i] += (uint32_t)k;
        if (now - h->last_heard[i] > 3 * h->interval_ns) h->since[i] = now;
        h->last_heard[i] = now;
        uint32_t off = 0;
        while (h->rlen[i] - off >= sizeof(nz_frame_t)) {
            nz_frame_t f;
            memcpy(&f, rb + off, sizeof(f));
            if (f.magic != NZ_CTRL_MAGIC || f.len > NZ_RBUF - sizeof(nz_frame_t)) {
                h->closed[i] = 1; /* not our protocol: stop reading it */
                return 1;
            }
            if (h->rlen[i] - off < sizeof(nz_frame_t) + f.len) break;
            if (f.type == NZ_FRAME_STATUS) {
                /* a peer is at most one vote ahead of us: two slots, by parity */
                int32_t slot = (i % h->size) * 2 + (int32_t)(f.seq & 1);
                if ((int64_t)f.seq > h->status_seq[slot]) {  /* duplicates from other rails */
                    h->status_mask[slot] = f.mask;
                    h->status_heard[slot] = f.heard;
                    h->status_coll[slot] = f.coll;
                    h->status_flags[slot] = f.kind;
                    __atomic_store_n(&h->status_seq[slot], (int64_t)f.seq, __ATOMIC_RELEASE);
                    uint64_t one = 1;
                    ssize_t w = write(h->evfd, &one, sizeof(one));
                    /* not for the vote this rank is in: its caller is there, not idle, and
                     * each wake of the (Python) guard cost every rank CPU in the vote */
                    if ((int64_t)f.seq != __atomic_load_n(&h->voting_seq, __ATOMIC_ACQUIRE))
                        w = write(h->gfd, &one, sizeof(one));
                    (void)w;
                }
            } else if (f.type == NZ_FRAME_POKE) {
                nz_health_answer_poke(h, i % h->size, f.seq);
            } else if (f.type != NZ_FRAME_HEARTBEAT) {
                nz_health_post(h, i, &f, rb + off + sizeof(nz_frame_t));
            }
            off += (uint32_t)sizeof(nz_frame_t) + f.len;
        }
        if (off) {
            memmove(rb, rb + off, h->rlen[i] - off);
            h->rlen[i] -= off;
        }
    }
}

/* Read what arrived on control endpoint i, unless another thread is already at it (the
 * engine reads control endpoints itself while it runs, to learn of votes without a wake-up
 * of this thread in between): 1 if anything moved, 0 if nothing, -1 if left to the other. */
static inline int nz_health_read(nz_health_t *h, int32_t i, int64_t now) {
    if (pthread_mutex_trylock(&h->rlock[i]) != 0) return -1;
    int moved = nz_ctrl_open(h, i) ? nz_health_read_locked(h, i, now) : 1;
    pthread_mutex_unlock(&h->rlock[i]);
    return moved;
}

/* Another thread reads control endpoint i right now: leave it to that reader, which reads
 * what arrives and wakes the engine (evfd) for what concerns it. Polled meanwhile, its fd
 * is ready at once while the bytes wait for that reader: a busy loop for as long as it
 * holds it, and at SCHED_FIFO above a reader descheduled on the same core, for ever. */
static inline int nz_ctrl_taken(nz_health_t *h, int32_t i) {
    if (pthread_mutex_trylock(&h->rlock[i]) != 0) return 1;
    pthread_mutex_unlock(&h->rlock[i]);
    return 0;
}

/* The control endpoint i cannot move again: record it as closed and tell Python. */
static inline void nz_health_lost(nz_health_t *h, int32_t i) {
    if (pthread_mutex_trylock(&h->rlock[i]) != 0) return;
    if (!h->closed[i]) nz_health_closed(h, i);
    pthread_mutex_unlock(&h->rlock[i]);
}

/* Add control endpoint i's wake-up fds (for input) to pf at *nfd, map entries set to
 * tag, unless another thread reads it now; returns 1 if it can be read right now (do not
 * sleep). */
static inline int nz_health_watch(nz_health_t *h, int32_t i, struct pollfd *pf, int32_t *map,
                                  int32_t tag, int32_t *nfd, int32_t max) {
    if (!nz_ctrl_open(h, i) || *nfd + NZ_CTRL_MAXFDS > max || nz_ctrl_taken(h, i)) return 0;
    int k = nz_ctrl_pollfds(h, i, 0, pf + *nfd);
    if (k == NZ_TR_READY) return 1;
    if (k < 0) { nz_health_lost(h, i); return 0; }
    for (int j = 0; j < k; j++) map[(*nfd)++] = tag;
    return 0;
}

/* Sleep until a vote frame has arrived (1) or ms pass (0): an idle rank's guard. */
static inline int nz_health_wait_vote(nz_health_t *h, int ms) {
    struct pollfd p = {h->gfd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return 0;
    uint64_t cnt;
    return read(h->gfd, &cnt, sizeof(cnt)) > 0;
}

static void *nz_health_main(void *arg) {
    nz_health_t *h = (nz_health_t *)arg;
    int32_t max = NZ_CTRL_MAXFDS * h->n + 1;
    struct pollfd *pf = (struct pollfd *)calloc((size_t)max, sizeof(struct pollfd));
    int32_t *map = (int32_t *)calloc((size_t)max, sizeof(int32_t));
    /* endpoints that woke this thread and gave nothing (read refused: another thread
     * took it between poll and read; or a readiness the transport's recv cannot use):
     * left out of the next poll, so a wake-up either moves bytes or is not repeated */
    uint8_t *skip = (uint8_t *)calloc((size_t)h->n + 1, 1);
    if (!pf || !map || !skip) { free(pf); free(map); free(skip); return NULL; }
    int64_t next_beat = 0;
    nz_frame_t beat;
    memset(&beat, 0, sizeof(beat));
    beat.magic = NZ_CTRL_MAGIC;
    beat.type = NZ_FRAME_HEARTBEAT;
    while (!h->stop) {
        int64_t now = nz_health_now();
        if (now >= next_beat) {
            for (int32_t i = 0; i < h->n; i++)
                nz_health_beat(h, i, &beat);
            next_beat = now + h->interval_ns;
        }
        int wait_ms = (int)((next_beat - now) / 1000000);
        if (wait_ms < 1) wait_ms = 1;
        /* A vote reads every control endpoint itself: reading them here too woke this
         * thread for every frame on every rank (a vote cost ~2x). Park until it ends (the
         * store/load order pairs with nz_vote's, so a wake-up is never missed). */
        if (__atomic_load_n(&h->voting_seq, __ATOMIC_SEQ_CST) != -1) {
            __atomic_store_n(&h->parked, 1, __ATOMIC_SEQ_CST);
            if (__atomic_load_n(&h->voting_seq, __ATOMIC_SEQ_CST) != -1) {
                struct pollfd p = {h->hwake, POLLIN, 0};
                if (poll(&p, 1, wait_ms) > 0) {
                    uint64_t cnt;
                    ssize_t k = read(h->hwake, &cnt, sizeof(cnt));
                    (void)k;
                }
            }
            __atomic_store_n(&h->parked, 0, __ATOMIC_SEQ_CST);
            continue;
        }
        int32_t nfd = 0;
        __atomic_store_n(&h->busy, 1, __ATOMIC_RELEASE);
        for (int32_t i = 0; i < h->n; i++) {
            if (skip[i]) { skip[i] = 0; continue; }
            if (nz_health_watch(h, i, pf, map, i, &nfd, max)) nz_health_read(h, i, now);
        }
        __atomic_store_n(&h->busy, 0, __ATOMIC_RELEASE);
        int r = poll(pf, (nfds_t)nfd, wait_ms);
        __atomic_fetch_add(&h->polls, 1, __ATOMIC_RELAXED);
        if (r <= 0) continue;
        /* until every endpoint is read, last_heard mixes old and new times (nz_rail_silent) */
        __atomic_store_n(&h->busy, 1, __ATOMIC_RELEASE);
        now = nz_health_now();
        for (int32_t k = 0; k < nfd; k++) {
            if (!pf[k].revents || skip[map[k]]) continue;
            int moved = nz_health_read(h, map[k], now);
            if (moved <= 0) skip[map[k]] = 1;
            if (moved < 0) __atomic_fetch_add(&h->refused, 1, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&h->busy, 0, __ATOMIC_RELEASE);
    }
    free(pf);
    free(map);
    free(skip);
    return NULL;
}

static inline int nz_health_start(nz_health_t *h) {
    if (h->started) return 0;
    h->stop = 0;
    if (pthread_create(&h->th, NULL, nz_health_main, h) != 0) return -1;
    h->started = 1;
    return 0;
}

/* SCHED_FIFO at prio for the health thread (0, or an errno), asked for when the progress
 * thread is real-time: with more ranks than cores, ranks' real-time progress threads busy
 * on every core (FIFO: no time slices among them) starve an ordinary health thread, its
 * heartbeats stop, and a peer waiting on this rank declares the rail dead although it
 * works (session 23: once in the lab's DDP rounds, 4 ranks on 2 cores). It sleeps between
 * heartbeats and reads small frames: above the progress threads, it costs them nothing. */
static inline int nz_health_realtime(nz_health_t *h, int prio) {
    struct sched_param sp;
    int rc = EINVAL;
    memset(&sp, 0, sizeof(sp));
    sp.sched_priority = prio;
    pthread_mutex_lock(&h->slock);  /* not while nz_health_stop joins it */
    if (h->started) rc = pthread_setschedparam(h->th, SCHED_FIFO, &sp);
    pthread_mutex_unlock(&h->slock);
    return rc;
}

/* Stop and join the health thread; idempotent, and safe from two threads at once (a
 * communicator can be torn down by its caller and by its guard thread, and Engine.close
 * runs without the GIL): a second pthread_join of one thread is undefined, and in glibc
 * it can join whichever thread reuses the descriptor (tests/fuzzpeer.py: rank 0 hung in
 * this join with no health thread left). The second caller waits for the first. */
static inline void nz_health_stop(nz_health_t *h) {
    pthread_mutex_lock(&h->slock);
    if (h->started) {
        h->stop = 1;
        pthread_join(h->th, NULL);
        h->started = 0;
    }
    pthread_mutex_unlock(&h->slock);
}

#endif
