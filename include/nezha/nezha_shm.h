/* The shm transport: two ranks on one host exchange through a shared-memory segment.
 *
 * One segment per pair and channel holds two single-producer single-consumer byte rings
 * (ring 0: creator -> opener, ring 1: opener -> creator). Each side keeps its own counter
 * privately and publishes it (head after writing, tail after reading, release/acquire), so
 * a counter the other side corrupts is caught as an error, never followed out of the ring.
 *
 * Sleeping: a side that finds nothing to do sets its ring's sleep flag, checks once more,
 * and polls its doorbell (a FIFO: like an eventfd it is pollable, unlike one it can be
 * opened by name, so no fd passing is needed); the other side rings it after publishing
 * when the flag is set (seq-cst fences on both sides). The peer's pidfd is polled too: a
 * killed peer is "closed" at once, not after a timeout.
 *
 * Names are unlinked as soon as both sides have the segment open, so nothing is left in
 * /dev/shm after a close or a SIGKILL (nezha/transports/shm.py also sweeps names of dead
 * creators at start-up). */
#ifndef NEZHA_SHM_H
#define NEZHA_SHM_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "nezha/nezha_copy.h"
#include "nezha/nezha_transport.h"

#define NZ_SHM_MAGIC 0x314D48535A484E5AULL /* "ZNHZSHM1" */
#define NZ_SHM_NONCE 32

typedef struct {
    _Alignas(64) uint64_t head;      /* bytes ever written (producer publishes) */
    uint32_t rsleep;                 /* consumer sleeps: ring it on new bytes */
    _Alignas(64) uint64_t tail;      /* bytes ever read (consumer publishes) */
    uint32_t wsleep;                 /* producer sleeps: ring it on room */
} nz_ring_ctl_t;

typedef struct {
    uint64_t magic;
    uint64_t cap;                    /* bytes per ring */
    uint8_t nonce[NZ_SHM_NONCE];     /* proves the creator knows the job secret */
    int32_t pid[2];                  /* creator, opener */
    uint32_t closed[2];              /* a side closed its endpoint */
    _Alignas(64) nz_ring_ctl_t ring[2];
} nz_shm_hdr_t;

#define NZ_SHM_DATA_OFF 4096

typedef struct {
    nz_shm_hdr_t *hdr;
    size_t maplen;
    int side;                        /* 0 creator, 1 opener */
    nz_ring_ctl_t *tx, *rx;
    char *txd, *rxd;
    uint64_t cap;
    uint64_t head, tail;             /* private copies of what this side publishes */
    int my_bell, peer_bell, pidfd;
} nz_shm_ep_t;

static inline size_t nz_shm_len(uint64_t cap) { return NZ_SHM_DATA_OFF + 2 * (size_t)cap; }

static inline void nz_shm_ring_bell(int fd) {
    char one = 1;
    ssize_t w = write(fd, &one, 1);  /* a full FIFO already wakes the reader */
    (void)w;
}

static inline void nz_shm_bind(nz_shm_ep_t *s, int side) {
    char *base = (char *)s->hdr;
    s->side = side;
    s->cap = s->hdr->cap;
    s->tx = &s->hdr->ring[side];
    s->rx = &s->hdr->ring[1 - side];
    s->txd = base + NZ_SHM_DATA_OFF + (size_t)side * s->cap;
    s->rxd = base + NZ_SHM_DATA_OFF + (size_t)(1 - side) * s->cap;
    s->head = __atomic_load_n(&s->tx->head, __ATOMIC_RELAXED);
    s->tail = __atomic_load_n(&s->rx->tail, __ATOMIC_RELAXED);
}

/* Free room in the tx ring, or -1 if the consumer's counter makes no sense. */
static inline int64_t nz_shm_room(nz_shm_ep_t *s) {
    uint64_t t = __atomic_load_n(&s->tx->tail, __ATOMIC_ACQUIRE);
    if (t > s->head || s->head - t > s->cap) return -1;
    return (int64_t)(s->cap - (s->head - t));
}

/* Bytes waiting in the rx ring, or -1 if the producer's counter makes no sense. */
static inline int64_t nz_shm_avail(nz_shm_ep_t *s) {
    uint64_t h = __atomic_load_n(&s->rx->head, __ATOMIC_ACQUIRE);
    if (h < s->tail || h - s->tail > s->cap) return -1;
    return (int64_t)(h - s->tail);
}

static ssize_t nz_shm_sendv(void *ctx, const struct iovec *iov, int niov) {
    nz_shm_ep_t *s = (nz_shm_ep_t *)ctx;
    int64_t room = nz_shm_room(s);
    if (room < 0) return -EPROTO;
    uint64_t moved = 0;
    for (int k = 0; k < niov && room > 0; k++) {
        const char *src = (const char *)iov[k].iov_base;
        uint64_t n = iov[k].iov_len < (uint64_t)room ? iov[k].iov_len : (uint64_t)room;
        uint64_t at = s->head % s->cap, first = n < s->cap - at ? n : s->cap - at;
        nz_copy(s->txd + at, src, first);
        if (n > first) nz_copy(s->txd, src + first, n - first);
        s->head += n;
        moved += n;
        room -= (int64_t)n;
    }
    if (!moved) return 0;
    __atomic_store_n(&s->tx->head, s->head, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&s->tx->rsleep, __ATOMIC_RELAXED)) {
        __atomic_store_n(&s->tx->rsleep, 0, __ATOMIC_RELAXED);
        nz_shm_ring_bell(s->peer_bell);
    }
    return (ssize_t)moved;
}

static inline void nz_shm_consume(void *ctx, size_t n) {
    nz_shm_ep_t *s = (nz_shm_ep_t *)ctx;
    s->tail += n;
    __atomic_store_n(&s->rx->tail, s->tail, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&s->rx->wsleep, __ATOMIC_RELAXED)) {
        __atomic_store_n(&s->rx->wsleep, 0, __ATOMIC_RELAXED);
        nz_shm_ring_bell(s->peer_bell);
    }
}

static ssize_t nz_shm_peek(void *ctx, const char **ptr) {
    nz_shm_ep_t *s = (nz_shm_ep_t *)ctx;
    int64_t n = nz_shm_avail(s);
    if (n <= 0) return n < 0 ? -EPROTO : 0;
    uint64_t at = s->tail % s->cap;
    *ptr = s->rxd + at;
    return (ssize_t)((uint64_t)n < s->cap - at ? (uint64_t)n : s->cap - at);
}

static ssize_t nz_shm_recv(void *ctx, char *buf, size_t len) {
    nz_shm_ep_t *s = (nz_shm_ep_t *)ctx;
    int64_t avail = nz_shm_avail(s);
    if (avail <= 0) return avail < 0 ? -EPROTO : 0;
    uint64_t n = len < (uint64_t)avail ? len : (uint64_t)avail;
    uint64_t at = s->tail % s->cap, first = n < s->cap - at ? n : s->cap - at;
    nz_copy(buf, s->rxd + at, first);
    if (n > first) nz_copy(buf + first, s->rxd, n - first);
    nz_shm_consume(ctx, n);
    return (ssize_t)n;
}

static inline int nz_shm_peer_gone(nz_shm_ep_t *s) {
    if (__atomic_load_n(&s->hdr->closed[1 - s->side], __ATOMIC_ACQUIRE)) return 1;
    if (s->pidfd < 0) return 0;
    struct pollfd p = {s->pidfd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

static int nz_shm_pollfds(void *ctx, int want_in, int want_out, struct pollfd *pf, int max) {
    nz_shm_ep_t *s = (nz_shm_ep_t *)ctx;
    char junk[64];
    while (read(s->my_bell, junk, sizeof(junk)) > 0) {}
    if (want_in) __atomic_store_n(&s->rx->rsleep, 1, __ATOMIC_RELAXED);
    if (want_out) __atomic_store_n(&s->tx->wsleep, 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    int64_t avail = want_in ? nz_shm_avail(s) : 0, room = want_out ? nz_shm_room(s) : 0;
    if (avail < 0 || room < 0) return -EPROTO;
    if (avail > 0 || room > 0) return NZ_TR_READY;
    /* nothing more will come (bytes already in the ring were taken above) */
    if (nz_shm_peer_gone(s)) return NZ_TR_CLOSED;
    int k = 0;
    if (k < max) { pf[k].fd = s->my_bell; pf[k].events = POLLIN; pf[k].revents = 0; k++; }
    if (k < max && s->pidfd >= 0) { pf[k].fd = s->pidfd; pf[k].events = POLLIN; pf[k].revents = 0; k++; }
    return k;
}

/* Mark this side closed and wake the peer (the segment is unmapped by nz_shm_unmap). */
static void nz_shm_close(void *ctx) {
    nz_shm_ep_t *s = (nz_shm_ep_t *)ctx;
    if (!s->hdr) return;
    __atomic_store_n(&s->hdr->closed[s->side], 1, __ATOMIC_RELEASE);
    if (s->peer_bell >= 0) nz_shm_ring_bell(s->peer_bell);
}

static const nz_transport_ops_t nz_shm_ops = {
    NZ_TRANSPORT_VERSION, "shm", NZ_CAP_ORDERED | NZ_CAP_PEEK | NZ_CAP_SHARED,
    nz_shm_sendv, nz_shm_recv, nz_shm_peek, nz_shm_consume, nz_shm_pollfds, nz_shm_close,
    NULL,  /* rx_age_ns: nothing is in flight between two processes of one host */
    NULL,  /* tx_busy: sends copy into the ring */
    NULL,  /* tx_kick: bytes in the ring are the peer's to take */
};

/* ---- set-up (called by the Python factory, with the GIL) ---------------------------- */

static inline int nz_shm_open_bell(const char *path, int create) {
    if (create && mkfifo(path, 0600) != 0) return -errno;
    int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077)) {
        close(fd);
        return -EPERM;
    }
    return fd;
}

static inline int nz_shm_pidfd(int pid) {
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    return fd >= 0 ? fd : -1;
#else
    (void)pid;
    return -1;  /* then a dead peer shows as a timeout */
#endif
}

/* Create the segment (mode 0600, O_EXCL) and both doorbells; side 0. Returns 0 or -errno. */
static inline int nz_shm_create(nz_shm_ep_t *s, const char *name, const char *bell0,
                                const char *bell1, uint64_t cap, const uint8_t *nonce) {
    memset(s, 0, sizeof(*s));
    s->my_bell = s->peer_bell = s->pidfd = -1;
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    size_t len = nz_shm_len(cap);
    int rc = 0;
    /* reserve the pages now: a full /dev/shm is ENOSPC here, not SIGBUS later */
    int fa = posix_fallocate(fd, 0, (off_t)len);
    if (fa != 0) rc = -fa;
    void *p = rc ? MAP_FAILED : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!rc && p == MAP_FAILED) rc = -errno;
    close(fd);
    if (rc) { shm_unlink(name); return rc; }
    s->hdr = (nz_shm_hdr_t *)p;
    s->maplen = len;
    memset(p, 0, sizeof(nz_shm_hdr_t));
    s->hdr->cap = cap;
    memcpy(s->hdr->nonce, nonce, NZ_SHM_NONCE);
    s->hdr->pid[0] = (int32_t)getpid();
    __atomic_store_n(&s->hdr->magic, NZ_SHM_MAGIC, __ATOMIC_RELEASE);
    nz_shm_bind(s, 0);
    s->my_bell = nz_shm_open_bell(bell0, 1);
    s->peer_bell = nz_shm_open_bell(bell1, 1);
    if (s->my_bell < 0 || s->peer_bell < 0) {
        shm_unlink(name);
        unlink(bell0);
        unlink(bell1);
        return s->my_bell < 0 ? s->my_bell : s->peer_bell;
    }
    return 0;
}

/* Open the peer's segment (side 1), check it is ours, unlink every name. */
static inline int nz_shm_open_peer(nz_shm_ep_t *s, const char *name, const char *bell0,
                                   const char *bell1, uint64_t cap, const uint8_t *nonce) {
    memset(s, 0, sizeof(*s));
    s->my_bell = s->peer_bell = s->pidfd = -1;
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) return -errno;
    size_t len = nz_shm_len(cap);
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) rc = -errno;
    else if (st.st_uid != geteuid() || (st.st_mode & 077) || (size_t)st.st_size != len)
        rc = -EPERM;
    void *p = rc ? MAP_FAILED : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!rc && p == MAP_FAILED) rc = -errno;
    close(fd);
    shm_unlink(name);
    if (rc) { unlink(bell0); unlink(bell1); return rc; }
    s->hdr = (nz_shm_hdr_t *)p;
    s->maplen = len;
    if (__atomic_load_n(&s->hdr->magic, __ATOMIC_ACQUIRE) != NZ_SHM_MAGIC ||
        s->hdr->cap != cap || memcmp(s->hdr->nonce, nonce, NZ_SHM_NONCE) != 0)
        rc = -EPERM;  /* not made by a rank of this job */
    if (rc) { unlink(bell0); unlink(bell1); return rc; }
    s->hdr->pid[1] = (int32_t)getpid();
    nz_shm_bind(s, 1);
    s->my_bell = nz_shm_open_bell(bell1, 0);
    s->peer_bell = nz_shm_open_bell(bell0, 0);
    unlink(bell0);
    unlink(bell1);
    if (!rc && (s->my_bell < 0 || s->peer_bell < 0)) rc = s->my_bell < 0 ? s->my_bell : s->peer_bell;
    return rc;
}

/* Tests: a head past the ring's size, as a scribbled segment would show it (kept in the
 * private copy too, so that the next send does not publish the good value over it). */
static inline void nz_shm_corrupt(nz_shm_ep_t *s) {
    s->head += 3 * s->cap;
    __atomic_store_n(&s->tx->head, s->head, __ATOMIC_RELEASE);
}

static inline void nz_shm_unmap(nz_shm_ep_t *s) {
    if (s->my_bell >= 0) close(s->my_bell);
    if (s->peer_bell >= 0) close(s->peer_bell);
    if (s->pidfd >= 0) close(s->pidfd);
    if (s->hdr) munmap((void *)s->hdr, s->maplen);
    s->hdr = NULL;
    s->my_bell = s->peer_bell = s->pidfd = -1;
}

#endif
