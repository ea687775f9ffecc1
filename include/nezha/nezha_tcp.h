/* The tcp transport: one connected, non-blocking socket per endpoint (one NIC per rail;
 * the Python factory binds, connects and authenticates it).
 *
 * Zero-copy sends (NEZHA_ZEROCOPY=on, the kernel's MSG_ZEROCOPY): a send of zc_min bytes or
 * more hands the kernel the pages instead of a copy, and the kernel reads them until it
 * reports the send complete on the socket's error queue (after the peer acknowledged the
 * bytes). Until then the memory must not change: tx_busy tells the engine which memory is
 * still read, and the engine holds back writes into it and the end of the run. */
#ifndef NEZHA_TCP_H
#define NEZHA_TCP_H

#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nezha/nezha_transport.h"

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif
#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif
#ifndef SO_EE_CODE_ZEROCOPY_COPIED
#define SO_EE_CODE_ZEROCOPY_COPIED 1
#endif

/* zero-copy sends in flight per endpoint; with more, a send copies (counted as zc_full) */
#define NZ_ZC_SLOTS 256

typedef struct {
    int fd;
    /* zero-copy: 0 = off (never set without SO_ZEROCOPY on the socket: the kernel would
     * copy silently and never report, and tx_busy would wait forever) */
    uint64_t zc_min;
    /* send ids are the kernel's: one per sendmsg with MSG_ZEROCOPY that took bytes, in
     * order; [zc_tail, zc_next) are in flight, slot = id % NZ_ZC_SLOTS */
    uint32_t zc_next, zc_tail;
    uint8_t zc_done[NZ_ZC_SLOTS];
    const char *zc_lo[NZ_ZC_SLOTS], *zc_hi[NZ_ZC_SLOTS];
    /* counters: sends and bytes handed over without a copy; completions the kernel copied
     * anyway (SO_EE_CODE_ZEROCOPY_COPIED: loopback, a device without scatter-gather); sends
     * that copied because the kernel refused (ENOBUFS: optmem) or every slot was in use */
    uint64_t zc_sends, zc_bytes, zc_copied, zc_nobufs, zc_full;
} nz_tcp_ep_t;

/* Read every completion on the error queue; advance zc_tail past completed sends.
 * Returns how many sends completed. */
static int nz_tcp_zc_reap(nz_tcp_ep_t *t) {
    char cbuf[256];
    int got = 0;
    for (;;) {
        struct msghdr mh;
        memset(&mh, 0, sizeof(mh));
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof(cbuf);
        ssize_t r = recvmsg(t->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR) continue;
            break;  /* EAGAIN: queue empty; anything else: the data path reports it */
        }
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
                  (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR)))
                continue;
            struct sock_extended_err ee;
            memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
            if (ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY || ee.ee_errno != 0) continue;
            /* ids ee_info..ee_data (inclusive) completed; ignore any outside the flight */
            uint32_t lo = ee.ee_info, hi = ee.ee_data, inflight = t->zc_next - t->zc_tail;
            for (uint32_t id = lo;; id++) {
                if (id - t->zc_tail < inflight && !t->zc_done[id % NZ_ZC_SLOTS]) {
                    t->zc_done[id % NZ_ZC_SLOTS] = 1;
                    got++;
                    if (ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) t->zc_copied++;
                }
                if (id == hi) break;
            }
        }
    }
    while (t->zc_tail != t->zc_next && t->zc_done[t->zc_tail % NZ_ZC_SLOTS]) {
        t->zc_done[t->zc_tail % NZ_ZC_SLOTS] = 0;
        t->zc_tail++;
    }
    return got;
}

/* Does a send in flight still read memory in [lo, hi)? */
static int nz_tcp_zc_overlaps(const nz_tcp_ep_t *t, const char *lo, const char *hi) {
    for (uint32_t id = t->zc_tail; id != t->zc_next; id++) {
        uint32_t k = id % NZ_ZC_SLOTS;
        if (!t->zc_done[k] && t->zc_lo[k] < hi && lo < t->zc_hi[k]) return 1;
    }
    return 0;
}

/* The transport's tx_busy: 1 while a zero-copy send still reads [lo, hi), else 0. Reaps
 * completions only when something in flight overlaps: no system call otherwise. */
static int nz_tcp_tx_busy(void *ctx, const char *lo, const char *hi) {
    nz_tcp_ep_t *t = (nz_tcp_ep_t *)ctx;
    if (t->zc_tail == t->zc_next || !nz_tcp_zc_overlaps(t, lo, hi)) return 0;
    nz_tcp_zc_reap(t);
    return nz_tcp_zc_overlaps(t, lo, hi);
}

/* Turn zero-copy on for sends of min_bytes and more (0: off). Returns 0, or -errno when
 * the kernel does not offer it (then it stays off). */
static inline int nz_tcp_zc_enable(nz_tcp_ep_t *t, uint64_t min_bytes) {
    t->zc_min = 0;
    if (min_bytes == 0) return 0;
    int one = 1;
    if (setsockopt(t->fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) != 0) return -errno;
    t->zc_min = min_bytes;
    return 0;
}

static ssize_t nz_tcp_sendv(void *ctx, const struct iovec *iov, int niov) {
    nz_tcp_ep_t *t = (nz_tcp_ep_t *)ctx;
    struct msghdr mh;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = (struct iovec *)iov;
    mh.msg_iovlen = (size_t)niov;
    /* one range per send id: only single-buffer sends go without a copy (a header and its
     * data go together only while the data is short) */
    int zc = t->zc_min && niov == 1 && iov[0].iov_len >= t->zc_min;
    if (zc && t->zc_next - t->zc_tail >= NZ_ZC_SLOTS) {
        nz_tcp_zc_reap(t);
        if (t->zc_next - t->zc_tail >= NZ_ZC_SLOTS) { zc = 0; t->zc_full++; }
    }
    for (;;) {
        ssize_t n = sendmsg(t->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL | (zc ? MSG_ZEROCOPY : 0));
        if (n > 0 && zc) {
            /* the kernel gave this send the id zc_next (a call that took nothing gets none) */
            uint32_t k = t->zc_next % NZ_ZC_SLOTS;
            t->zc_lo[k] = (const char *)iov[0].iov_base;
            t->zc_hi[k] = (const char *)iov[0].iov_base + n;
            t->zc_done[k] = 0;
            t->zc_next++;
            t->zc_sends++;
            t->zc_bytes += (uint64_t)n;
        }
        if (n >= 0) return n > 0 ? n : -EPIPE;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        if (errno == ENOBUFS && zc) { zc = 0; t->zc_nobufs++; continue; }  /* copy instead */
        return -errno;
    }
}

static ssize_t nz_tcp_recv(void *ctx, char *buf, size_t len) {
    nz_tcp_ep_t *t = (nz_tcp_ep_t *)ctx;
    for (;;) {
        ssize_t n = recv(t->fd, buf, len, MSG_DONTWAIT);
        if (n > 0) return n;
        if (n == 0) return NZ_TR_CLOSED;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return -errno;
    }
}

static int nz_tcp_pollfds(void *ctx, int want_in, int want_out, struct pollfd *pf, int max) {
    nz_tcp_ep_t *t = (nz_tcp_ep_t *)ctx;
    /* Completions left on the error queue keep POLLERR up, and poll would return at once
     * forever: collect them before sleeping. Some completed: a write or the run's end
     * may be free to go, so look again instead of sleeping. */
    if (t->zc_tail != t->zc_next && nz_tcp_zc_reap(t) > 0) return NZ_TR_READY;
    if (max < 1) return 0;
    pf[0].fd = t->fd;
    pf[0].events = (short)((want_in ? POLLIN : 0) | (want_out ? POLLOUT : 0));
    pf[0].revents = 0;
    return 1;
}

/* the socket belongs to the Python mesh, which closes it */
static void nz_tcp_close(void *ctx) { (void)ctx; }

/* Every segment from the peer (in order or not, data or a bare ACK) refreshes the
 * kernel's last-ACK-received stamp (what keepalive uses), so losses on a congested link
 * do not age it the way they hold back the byte stream. Millisecond (jiffy) resolution. */
static int64_t nz_tcp_rx_age_ns(void *ctx) {
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    if (getsockopt(((nz_tcp_ep_t *)ctx)->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return -1;
    return (int64_t)ti.tcpi_last_ack_recv * 1000000LL;
}

/* The transport's tx_kick. SIOCOUTQ: bytes not acknowledged; SIOCOUTQNSD: of them, not
 * sent. Bytes wait unsent: push them (setting TCP_NODELAY pushes pending output at once,
 * tcp(7); the kernel sends only what its windows allow, as a send call would). A segment
 * dropped before it left (a full qdisc or shaper) is retried by the kernel only when an
 * acknowledgement comes, or when its probe (nothing in flight) or retransmission timer
 * fires, 200 ms or more; dropped again, it is pushed again at the next ask. */
static int nz_tcp_tx_kick(void *ctx) {
    nz_tcp_ep_t *t = (nz_tcp_ep_t *)ctx;
    int queued = 0, unsent = 0, one = 1;
    if (ioctl(t->fd, SIOCOUTQ, &queued) != 0 || queued <= 0) return 0;
    if (ioctl(t->fd, SIOCOUTQNSD, &unsent) != 0 || unsent <= 0) return NZ_TX_FLYING;
    setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return unsent < queued ? NZ_TX_FLYING : NZ_TX_STUCK;
}

static const nz_transport_ops_t nz_tcp_ops = {
    NZ_TRANSPORT_VERSION, "tcp", NZ_CAP_ORDERED,
    nz_tcp_sendv, nz_tcp_recv, NULL, NULL, nz_tcp_pollfds, nz_tcp_close, nz_tcp_rx_age_ns, NULL,
    nz_tcp_tx_kick,
};

/* The same with zero-copy sends (nz_tcp_zc_enable): only these endpoints cost the engine
 * a tx_busy call before it writes. */
static const nz_transport_ops_t nz_tcp_zc_ops = {
    NZ_TRANSPORT_VERSION, "tcp", NZ_CAP_ORDERED,
    nz_tcp_sendv, nz_tcp_recv, NULL, NULL, nz_tcp_pollfds, nz_tcp_close, nz_tcp_rx_age_ns,
    nz_tcp_tx_busy, nz_tcp_tx_kick,
};

#endif
