/* The host area: one shared-memory segment for all ranks of a communicator that lives on
 * one host, where a large allreduce is staged chunk by chunk and every rank reduces its
 * block straight out of the others' slots.
 *
 * Why: the pairwise shm rings copy every byte into a ring and then reduce or copy it out,
 * for 2(N-1)/N of the data in each half of a ring allreduce (about 6.75 S of memory traffic
 * per rank). Here each rank copies in the N-1 blocks others reduce (0.75 S each way), reduces
 * its own block from its input and the N-1 slots (S read, 0.5 S written: the result goes to
 * its output and its slot) and copies the N-1 other results out (0.75 S each way): 4.5 S.
 * Chunks of NEZHA_SHM_COLL_CHUNK per rank keep the working set in the caches. With 4 ranks
 * on 2 cores, memory traffic is the cost (a prototype: 16 MiB 5.5-6.2 ms against 7.8 ms on
 * the rings and 6.4 ms for Open MPI's sm in the same minute).
 *
 * Round g (counted over the communicator's life, the same on every rank) uses half g & 1:
 *   1. copy my chunk's blocks k != me into my slot; ready[me] = g
 *   2. wait ready[k] >= g for all k (round 0 of a call: compare everyone's descriptor)
 *   3. reduce block me (my input + every other slot's block me) into my slot and my output;
 *      done[me] = g
 *   4. for each k != me: wait done[k] >= g, copy slot k's block k into my output.
 * Writing my slot in half h again (round g + 2) is safe: every rank's ready >= g + 1, which
 * I waited for in round g + 1, is published only after its copy-out of round g.
 *
 * Waiting: spin (sched_yield) for spin_us, then sleep on one futex word (bell) that every
 * publish bumps when someone sleeps; each wake-up (at most every 10 ms) checks the abort
 * word, the peers' pidfds (a killed rank is an error at once) and the deadline. */
#ifndef NEZHA_HOSTCOLL_H
#define NEZHA_HOSTCOLL_H

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nezha/nezha_copy.h"
#include "nezha/nezha_reduce.h"

#define NZ_HC_MAGIC 0x314C4F4354534F48ULL /* "HOSTCOL1" */
#define NZ_HC_NONCE 32
#define NZ_HC_MAX 256
#define NZ_HC_SUB 16384 /* bytes reduced at a time: the sum stays in L1 over the N inputs */

enum { NZ_HC_OK = 0, NZ_HC_EMISMATCH = -1, NZ_HC_EDEAD = -2, NZ_HC_ETIMEOUT = -3,
       NZ_HC_EABORT = -4, NZ_HC_EOP = -5 };

typedef struct {              /* one rank's words, a cache line of its own */
    uint64_t ready, done;     /* the last round it published */
    uint64_t seq, count;      /* its current collective (seq + 1), here or on the rings */
    uint32_t coll, dtype, op, pid;
    uint32_t dgen;            /* the descriptor's seqlock: odd while it is written */
    uint8_t pad[64 - 52];
} nz_hc_rank_t;

typedef struct { uint64_t seq, count; uint32_t coll, dtype, op; } nz_hc_desc_t;

typedef struct {
    uint64_t magic;
    uint8_t nonce[NZ_HC_NONCE];
    uint32_t nranks, bell, sleepers;
    uint32_t pad0;
    uint64_t abort;           /* 0: none; else who gave up, why and on whom (nz_hc_abort) */
    uint64_t chunk;           /* bytes per slot */
    uint8_t pad[128 - 72];
    nz_hc_rank_t r[];
} nz_hc_hdr_t;

typedef struct {
    nz_hc_hdr_t *hdr;
    char *data;
    size_t maplen;
    int me, n;
    uint64_t chunk, round;
    int64_t spin_us;
    int pidfd[NZ_HC_MAX];
    int bad_peer;             /* after an error: the rank it names */
    uint64_t bad_seq, bad_count;
    uint32_t bad_dtype, bad_op, bad_coll;
} nz_hc_t;

static inline size_t nz_hc_data_off(int n) {
    size_t h = sizeof(nz_hc_hdr_t) + (size_t)n * sizeof(nz_hc_rank_t);
    return (h + 4095) & ~(size_t)4095;
}
static inline size_t nz_hc_len(int n, uint64_t chunk) {
    return nz_hc_data_off(n) + 2 * (size_t)n * chunk;
}
static inline char *nz_hc_slot(nz_hc_t *h, uint64_t g, int k) {
    return h->data + ((size_t)(g & 1) * h->n + k) * h->chunk;
}
static inline int64_t nz_hc_now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static inline void nz_hc_init(nz_hc_t *h) {
    memset(h, 0, sizeof *h);
    for (int i = 0; i < NZ_HC_MAX; i++) h->pidfd[i] = -1;
}

/* Map name: create it (me == 0: mode 0600, O_EXCL, pages reserved) or open and check it
 * (owner, mode, size, magic, the job's nonce). Returns 0 or -errno (-EPERM: not ours). */
static inline int nz_hc_map(nz_hc_t *h, const char *name, int me, int n, uint64_t chunk,
                            const uint8_t *nonce) {
    if (n < 2 || n > NZ_HC_MAX || me < 0 || me >= n || chunk == 0 || chunk % 64) return -EINVAL;
    size_t len = nz_hc_len(n, chunk);
    int create = me == 0, rc = 0;
    int fd = create ? shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)
                    : shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) return -errno;
    struct stat st;
    if (create) {
        int fa = posix_fallocate(fd, 0, (off_t)len); /* a full /dev/shm: ENOSPC, not SIGBUS */
        if (fa) rc = -fa;
    } else if (fstat(fd, &st) != 0) {
        rc = -errno;
    } else if (st.st_uid != geteuid() || (st.st_mode & 077) || (size_t)st.st_size != len) {
        rc = -EPERM;
    }
    void *p = rc ? MAP_FAILED : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!rc && p == MAP_FAILED) rc = -errno;
    close(fd);
    if (rc) {
        if (create) shm_unlink(name);
        return rc;
    }
    h->hdr = (nz_hc_hdr_t *)p;
    h->maplen = len;
    h->data = (char *)p + nz_hc_data_off(n);
    h->me = me;
    h->n = n;
    h->chunk = chunk;
    if (create) {
        h->hdr->nranks = (uint32_t)n;
        h->hdr->chunk = chunk;
        memcpy(h->hdr->nonce, nonce, NZ_HC_NONCE);
        __atomic_store_n(&h->hdr->magic, NZ_HC_MAGIC, __ATOMIC_RELEASE);
    } else if (__atomic_load_n(&h->hdr->magic, __ATOMIC_ACQUIRE) != NZ_HC_MAGIC ||
               h->hdr->nranks != (uint32_t)n || h->hdr->chunk != chunk ||
               memcmp(h->hdr->nonce, nonce, NZ_HC_NONCE) != 0) {
        munmap(p, len);
        h->hdr = NULL;
        return -EPERM;  /* not made by a rank of this job */
    }
    h->hdr->r[me].pid = (uint32_t)getpid();
    return 0;
}

static inline void nz_hc_unmap(nz_hc_t *h) {
    for (int i = 0; i < NZ_HC_MAX; i++) {
        if (h->pidfd[i] >= 0) close(h->pidfd[i]);
        h->pidfd[i] = -1;
    }
    if (h->hdr) munmap((void *)h->hdr, h->maplen);
    h->hdr = NULL;
}

static inline void nz_hc_ring(nz_hc_t *h) {
    if (__atomic_load_n(&h->hdr->sleepers, __ATOMIC_SEQ_CST)) {
        __atomic_add_fetch(&h->hdr->bell, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, &h->hdr->bell, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    }
}

static inline void nz_hc_publish(nz_hc_t *h, uint64_t *word, uint64_t g) {
    __atomic_store_n(word, g, __ATOMIC_SEQ_CST);
    nz_hc_ring(h);
}

/* Who gave up first (-1: nobody), why (an NZ_HC_E* code) and on whom. */
static inline int nz_hc_abort_rank(nz_hc_t *h) {
    return (int)(__atomic_load_n(&h->hdr->abort, __ATOMIC_SEQ_CST) >> 40) - 1;
}
static inline int nz_hc_abort_code(nz_hc_t *h) {
    return -(int)((__atomic_load_n(&h->hdr->abort, __ATOMIC_SEQ_CST) >> 32) & 0xff);
}
static inline int nz_hc_abort_peer(nz_hc_t *h) {
    return (int)(__atomic_load_n(&h->hdr->abort, __ATOMIC_SEQ_CST) & 0xffffffffu) - 1;
}

/* Give up, and tell every rank of the host why (they stop waiting at once). */
static inline void nz_hc_abort(nz_hc_t *h, int code, int peer) {
    if (!h->hdr) return;
    /* one word, set once: the first rank to give up says why (a later abort, e.g. the
     * Python layer's after the C one, must not overwrite the cause) */
    uint64_t none = 0, w = ((uint64_t)(h->me + 1) << 40) | ((uint64_t)(uint8_t)(-code) << 32) |
                           (uint32_t)(peer + 1);
    __atomic_compare_exchange_n(&h->hdr->abort, &none, w, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&h->hdr->bell, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &h->hdr->bell, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* This rank is in collective seq (here, or on the rings: then the ranks in the area see a
 * mismatch at once instead of a timeout). */
static inline void nz_hc_announce(nz_hc_t *h, uint64_t seq, uint32_t coll, uint64_t count,
                                  uint32_t dtype, uint32_t op) {
    nz_hc_rank_t *m = &h->hdr->r[h->me];
    __atomic_add_fetch(&m->dgen, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&m->seq, seq + 1, __ATOMIC_RELAXED); /* 0: nothing announced yet */
    __atomic_store_n(&m->count, count, __ATOMIC_RELAXED);
    __atomic_store_n(&m->coll, coll, __ATOMIC_RELAXED);
    __atomic_store_n(&m->dtype, dtype, __ATOMIC_RELAXED);
    __atomic_store_n(&m->op, op, __ATOMIC_RELAXED);
    __atomic_add_fetch(&m->dgen, 1, __ATOMIC_SEQ_CST);
    nz_hc_ring(h);
}

static inline void nz_hc_read_desc(nz_hc_t *h, int k, nz_hc_desc_t *d) {
    nz_hc_rank_t *o = &h->hdr->r[k];
    for (;;) {
        uint32_t g = __atomic_load_n(&o->dgen, __ATOMIC_SEQ_CST);
        d->seq = __atomic_load_n(&o->seq, __ATOMIC_RELAXED);
        d->count = __atomic_load_n(&o->count, __ATOMIC_RELAXED);
        d->coll = __atomic_load_n(&o->coll, __ATOMIC_RELAXED);
        d->dtype = __atomic_load_n(&o->dtype, __ATOMIC_RELAXED);
        d->op = __atomic_load_n(&o->op, __ATOMIC_RELAXED);
        if (!(g & 1) && __atomic_load_n(&o->dgen, __ATOMIC_SEQ_CST) == g) return;
        sched_yield();
    }
}

/* Is rank k in a collective that cannot be mine (m: this call's descriptor, as announced)?
 * Sets bad_* if so. A rank still in an earlier collective (or not yet announced) is not a
 * mismatch: it is behind. */
static inline int nz_hc_differs(nz_hc_t *h, int k, int arrived, const nz_hc_desc_t *m) {
    nz_hc_desc_t d;
    nz_hc_read_desc(h, k, &d);
    if (!arrived && d.seq < m->seq) return 0;
    if (d.seq == m->seq && d.count == m->count && d.coll == m->coll && d.dtype == m->dtype &&
        d.op == m->op)
        return 0;
    h->bad_peer = k;
    h->bad_seq = d.seq - 1;
    h->bad_count = d.count;
    h->bad_dtype = d.dtype;
    h->bad_op = d.op;
    h->bad_coll = d.coll;
    return 1;
}

/* Has something ended the wait: an abort, a dead peer, the deadline? 0 if not. */
static inline int nz_hc_check(nz_hc_t *h, int k, int64_t deadline_us) {
    if (__atomic_load_n(&h->hdr->abort, __ATOMIC_SEQ_CST)) {
        h->bad_peer = nz_hc_abort_rank(h);
        return NZ_HC_EABORT;
    }
    struct pollfd pf[NZ_HC_MAX];
    int np = 0, who[NZ_HC_MAX];
    for (int i = 0; i < h->n; i++)
        if (h->pidfd[i] >= 0) { pf[np].fd = h->pidfd[i]; pf[np].events = POLLIN; who[np++] = i; }
    if (np && poll(pf, (nfds_t)np, 0) > 0)
        for (int i = 0; i < np; i++)
            if (pf[i].revents) { h->bad_peer = who[i]; return NZ_HC_EDEAD; }
    if (nz_hc_now_us() > deadline_us) { h->bad_peer = k; return NZ_HC_ETIMEOUT; }
    return 0;
}

/* Wait until rank k's word (ready or done) reaches g. desc (the first round of a call, else
 * NULL): this call's descriptor; a rank announced in another collective is a mismatch,
 * found while waiting. */
static inline int nz_hc_wait(nz_hc_t *h, int k, int which, uint64_t g,
                             const nz_hc_desc_t *desc, int64_t deadline_us) {
    uint64_t *w = which ? &h->hdr->r[k].done : &h->hdr->r[k].ready;
    if (__atomic_load_n(w, __ATOMIC_ACQUIRE) >= g) return 0;
    int64_t t0 = nz_hc_now_us(), checked = t0;
    while (nz_hc_now_us() - t0 < h->spin_us) {
        if (__atomic_load_n(w, __ATOMIC_ACQUIRE) >= g) return 0;
        sched_yield();
    }
    if (desc && nz_hc_differs(h, k, 0, desc)) return NZ_HC_EMISMATCH;
    for (;;) {
        uint32_t v = __atomic_load_n(&h->hdr->bell, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&h->hdr->sleepers, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(w, __ATOMIC_SEQ_CST) >= g) {
            __atomic_sub_fetch(&h->hdr->sleepers, 1, __ATOMIC_SEQ_CST);
            return 0;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        syscall(SYS_futex, &h->hdr->bell, FUTEX_WAIT, v, &ts, NULL, 0);
        __atomic_sub_fetch(&h->hdr->sleepers, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(w, __ATOMIC_ACQUIRE) >= g) return 0;
        if (desc && nz_hc_differs(h, k, 0, desc)) return NZ_HC_EMISMATCH;
        int64_t now = nz_hc_now_us();
        if (now - checked >= 10000 || __atomic_load_n(&h->hdr->abort, __ATOMIC_RELAXED)) {
            checked = now;
            int rc = nz_hc_check(h, k, deadline_us);
            if (rc) return rc;
        }
    }
}

static inline int nz_hc_fail(nz_hc_t *h, int rc) {
    if (rc != NZ_HC_EABORT) nz_hc_abort(h, rc, h->bad_peer);
    return rc;
}

/* out = allreduce(in) over the host's n ranks (in == out allowed). divisor > 0: AVG.
 * coll/seq/count/dtype/op are this rank's call, compared with everyone's in round 0. */
static int nz_hc_allreduce(nz_hc_t *h, const char *in, char *out, uint64_t count, int es,
                           int dtype, int op, double divisor, uint32_t coll, uint64_t seq,
                           double timeout_s) {
    int n = h->n, me = h->me, rc;
    nz_hc_rank_t *mine = &h->hdr->r[me];
    int64_t deadline = nz_hc_now_us() + (int64_t)(timeout_s * 1e6);
    uint8_t probe[8] = {0};
    if (nezha_reduce3(probe, probe, probe, 0, dtype, op) != 0) return NZ_HC_EOP;
    nz_hc_announce(h, seq, coll, count, (uint32_t)dtype, (uint32_t)op);
    const nz_hc_desc_t call = {seq + 1, count, coll, (uint32_t)dtype, (uint32_t)op};
    uint64_t ce = h->chunk / (uint64_t)es, first = 1;
    uint64_t off = 0;
    do {
        uint64_t c = count - off < ce ? count - off : ce, g = ++h->round;
        char *slot = nz_hc_slot(h, g, me);
        const char *src = in + off * es;
        char *dst = out + off * es;
        uint64_t b0 = c * me / n, b1 = c * (me + 1) / n;
        /* 1. the blocks the others reduce */
        nz_copy(slot, src, b0 * es);
        nz_copy(slot + b1 * es, src + b1 * es, (c - b1) * es);
        nz_hc_publish(h, &mine->ready, g);
        /* 2. everyone's chunk is in */
        for (int k = 0; k < n; k++) {
            if (k == me) continue;
            /* a mismatch (with a rank on the rings): every rank here waits on that rank
             * too and sees it itself */
            if ((rc = nz_hc_wait(h, k, 0, g, first ? &call : NULL, deadline)))
                return rc == NZ_HC_EMISMATCH ? rc : nz_hc_fail(h, rc);
        }
        if (first) {
            first = 0;
            for (int k = 0; k < n; k++)
                if (k != me && nz_hc_differs(h, k, 1, &call))
                    return NZ_HC_EMISMATCH; /* every rank sees the same table: all raise */
        }
        /* 3. my block, in rank order (every rank's result is the same bits), NZ_HC_SUB at
         * a time so the partial sum stays in L1 */
        uint64_t sub = NZ_HC_SUB / (uint64_t)es;
        for (uint64_t s = b0; s < b1; s += sub) {
            uint64_t m = b1 - s < sub ? b1 - s : sub;
            char *acc = slot + s * es;
            for (int k = 0; k < n; k++) {
                const char *x = k == me ? src + s * es : nz_hc_slot(h, g, k) + s * es;
                if (k == 0) nz_copy(acc, x, m * es);
                else nezha_reduce3(acc, acc, x, m, dtype, op);
            }
            if (divisor > 0) nezha_avg_finish(acc, m, dtype, divisor);
            nz_copy(dst + s * es, acc, m * es);
        }
        nz_hc_publish(h, &mine->done, g);
        /* 4. the others' results */
        for (int j = 1; j < n; j++) {
            int k = (me + j) % n;
            uint64_t k0 = c * k / n, k1 = c * (k + 1) / n;
            if ((rc = nz_hc_wait(h, k, 1, g, NULL, deadline))) return nz_hc_fail(h, rc);
            nz_copy(dst + k0 * es, nz_hc_slot(h, g, k) + k0 * es, (k1 - k0) * es);
        }
        off += c;
    } while (off < count);
    return 0;
}

#endif
