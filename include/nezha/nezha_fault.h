/* Fault injection for tests: an endpoint that wraps another endpoint of any transport and
 * obeys a word in a table shared with the test (NEZHA_FAULTS, nezha/transports/fault.py),
 * read on every call, so a fault starts and ends while a collective runs.
 *
 * What each bit does to this endpoint:
 *   STALL_TX  nothing leaves (bytes wait, as on a blackholed TCP link; they flow on heal)
 *   STALL_RX  nothing arrives (a deaf rail)
 *   RESET     every call fails with ECONNRESET (a dropped connection)
 *   CLOSE     the peer looks gone (NZ_TR_CLOSED)
 *   CORRUPT   one shot: the next collective header sent has its sequence number changed
 * On a control endpoint RESET and CLOSE stall instead: a cut link does not close TCP
 * connections, and the rail must be able to come back. */
#ifndef NEZHA_FAULT_H
#define NEZHA_FAULT_H

#include <errno.h>
#include <string.h>

#include "nezha/nezha_transport.h"
#include "nezha/nezha_wire.h"

enum {
    NZ_FAULT_STALL_TX = 1,
    NZ_FAULT_STALL_RX = 2,
    NZ_FAULT_RESET = 4,
    NZ_FAULT_CLOSE = 8,
    NZ_FAULT_CORRUPT = 16
};

typedef struct {
    nz_transport_ops_t ops;       /* the inner transport's, with these calls */
    const nz_transport_ops_t *in;
    void *in_tx;
    uint32_t *word;               /* in the shared table */
    int ctrl;
} nz_fault_ep_t;

static inline uint32_t nz_fault_bits(const nz_fault_ep_t *f) {
    uint32_t b = __atomic_load_n(f->word, __ATOMIC_ACQUIRE);
    if (f->ctrl && (b & (NZ_FAULT_RESET | NZ_FAULT_CLOSE)))
        b |= NZ_FAULT_STALL_TX | NZ_FAULT_STALL_RX;
    return f->ctrl ? b & (NZ_FAULT_STALL_TX | NZ_FAULT_STALL_RX) : b;
}

static inline ssize_t nz_fault_broken(uint32_t b) {
    if (b & NZ_FAULT_CLOSE) return NZ_TR_CLOSED;
    if (b & NZ_FAULT_RESET) return -ECONNRESET;
    return 0;
}

static ssize_t nz_fault_sendv(void *ctx, const struct iovec *iov, int niov) {
    nz_fault_ep_t *f = (nz_fault_ep_t *)ctx;
    uint32_t b = nz_fault_bits(f);
    if (nz_fault_broken(b)) return nz_fault_broken(b);
    if (b & NZ_FAULT_STALL_TX) return 0;
    if ((b & NZ_FAULT_CORRUPT) && niov > 0 && iov[0].iov_len == sizeof(nezha_hdr_t)) {
        nezha_hdr_t h;
        memcpy(&h, iov[0].iov_base, sizeof(h));
        if (h.magic == NEZHA_WIRE_MAGIC) {
            __atomic_fetch_and(f->word, ~(uint32_t)NZ_FAULT_CORRUPT, __ATOMIC_ACQ_REL);
            h.seq ^= 0x40000000u;  /* a header from another collective */
            struct iovec one = {&h, sizeof(h)};
            ssize_t k = f->in->sendv(f->in_tx, &one, 1);
            if (k == 0 || k == (ssize_t)sizeof(h)) return k;
            return k > 0 ? -EPROTO : k;  /* half a header would leave the stream torn */
        }
    }
    return f->in->sendv(f->in_tx, iov, niov);
}

static ssize_t nz_fault_recv(void *ctx, char *buf, size_t len) {
    nz_fault_ep_t *f = (nz_fault_ep_t *)ctx;
    uint32_t b = nz_fault_bits(f);
    if (nz_fault_broken(b)) return nz_fault_broken(b);
    if (b & NZ_FAULT_STALL_RX) return 0;
    return f->in->recv(f->in_tx, buf, len);
}

static ssize_t nz_fault_peek(void *ctx, const char **ptr) {
    nz_fault_ep_t *f = (nz_fault_ep_t *)ctx;
    uint32_t b = nz_fault_bits(f);
    if (nz_fault_broken(b)) return nz_fault_broken(b);
    if (b & NZ_FAULT_STALL_RX) return 0;
    return f->in->peek(f->in_tx, ptr);
}

static void nz_fault_consume(void *ctx, size_t n) {
    nz_fault_ep_t *f = (nz_fault_ep_t *)ctx;
    f->in->consume(f->in_tx, n);
}

/* A stalled direction gives no fds: the engine sleeps on the others (and wakes on its
 * silence timer), as it would on a link that says nothing. */
static int nz_fault_pollfds(void *ctx, int want_in, int want_out, struct pollfd *pf, int max) {
    nz_fault_ep_t *f = (nz_fault_ep_t *)ctx;
    uint32_t b = nz_fault_bits(f);
    if (nz_fault_broken(b)) return (int)nz_fault_broken(b);
    if (b & NZ_FAULT_STALL_RX) want_in = 0;
    if (b & NZ_FAULT_STALL_TX) want_out = 0;
    if (!want_in && !want_out) return 0;
    return f->in->pollfds(f->in_tx, want_in, want_out, pf, max);
}

/* A stalled or broken endpoint must look silent: the socket under it still hears the peer. */
static int64_t nz_fault_rx_age_ns(void *ctx) {
    nz_fault_ep_t *f = (nz_fault_ep_t *)ctx;
    if (__atomic_load_n(f->word, __ATOMIC_ACQUIRE) & (NZ_FAULT_STALL_TX | NZ_FAULT_STALL_RX |
                                                       NZ_FAULT_RESET | NZ_FAULT_CLOSE))
        return -1;
    return f->in->rx_age_ns ? f->in->rx_age_ns(f->in_tx) : -1;
}

/* Zero-copy memory stays the kernel's whatever the fault: pass the question through. */
static int nz_fault_tx_busy(void *ctx, const char *lo, const char *hi) {
    nz_fault_ep_t *f = (nz_fault_ep_t *)ctx;
    return f->in->tx_busy(f->in_tx, lo, hi);
}

/* Bytes the inner transport already took are the kernel's whatever the fault (as on a
 * real link): pass the question through. */
static int nz_fault_tx_kick(void *ctx) {
    nz_fault_ep_t *f = (nz_fault_ep_t *)ctx;
    return f->in->tx_kick(f->in_tx);
}

static void nz_fault_close(void *ctx) {
    nz_fault_ep_t *f = (nz_fault_ep_t *)ctx;
    f->in->close(f->in_tx);
}

/* Wrap in/in_tx; word points into the shared table. */
static inline void nz_fault_init(nz_fault_ep_t *f, const nz_transport_ops_t *in, void *in_tx,
                                 uint32_t *word, int ctrl) {
    f->ops = *in;
    f->ops.sendv = nz_fault_sendv;
    f->ops.recv = nz_fault_recv;
    f->ops.peek = in->peek ? nz_fault_peek : NULL;
    f->ops.consume = in->consume ? nz_fault_consume : NULL;
    f->ops.pollfds = nz_fault_pollfds;
    f->ops.close = nz_fault_close;
    f->ops.rx_age_ns = nz_fault_rx_age_ns;
    f->ops.tx_busy = in->tx_busy ? nz_fault_tx_busy : NULL;
    f->ops.tx_kick = in->tx_kick ? nz_fault_tx_kick : NULL;
    f->in = in;
    f->in_tx = in_tx;
    f->word = word;
    f->ctrl = ctrl;
}

#endif
