/* The transport contract: what the engine calls to move bytes to one peer.
 *
 * One endpoint = one ordered, reliable byte stream in each direction between this rank and
 * one peer on one channel. The engine holds {ops, ctx} per endpoint and never calls a
 * socket (or any other transport) function itself; a transport fills one ops table.
 *
 * Why a stream and not isend/irecv/test requests (NCCL's net plugin): the engine pipelines
 * at byte granularity (an op streams as many bytes as its dependency has produced so far,
 * see nezha_engine.h), so what it needs from a transport is "take up to n more bytes" and
 * "give me what has arrived", both non-blocking. A message transport (verbs) implements
 * the same calls over its own posted buffers; the engine does not change.
 *
 * Setting up (listen, connect/accept, authentication, shared-memory rendezvous) is the
 * Python factory's job (nezha/transports/): it hands the engine ready endpoints.
 *
 * Return values: >0 bytes moved; 0 = would block (try again, or sleep on pollfds);
 * NZ_TR_CLOSED = the peer closed or died (no more bytes will come); other negative values
 * are -errno. */
#ifndef NEZHA_TRANSPORT_H
#define NEZHA_TRANSPORT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define NZ_TRANSPORT_VERSION 4  /* 2: rx_age_ns, 3: tx_busy, 4: tx_kick */
#define NZ_TR_CLOSED (-(1L << 20))

enum {
    NZ_CAP_ORDERED = 1,   /* bytes arrive in the order sent (required by the engine) */
    NZ_CAP_PEEK = 2,      /* peek/consume: reduce straight out of the transport's memory */
    NZ_CAP_SHARED = 4     /* same host: no network in between */
};

typedef struct nz_transport_ops {
    int version;          /* NZ_TRANSPORT_VERSION */
    const char *name;     /* "tcp", "shm", ... */
    uint32_t caps;        /* NZ_CAP_* */
    /* take up to the iovecs' bytes; partial writes are fine */
    ssize_t (*sendv)(void *ctx, const struct iovec *iov, int niov);
    /* copy up to len arrived bytes into buf */
    ssize_t (*recv)(void *ctx, char *buf, size_t len);
    /* NZ_CAP_PEEK: *ptr = the next arrived bytes (contiguous), returns how many */
    ssize_t (*peek)(void *ctx, const char **ptr);
    void (*consume)(void *ctx, size_t n);
    /* About to sleep: fill up to max pollfds that wake this endpoint when it can move in
     * the wanted direction(s). Returns how many, NZ_TR_READY if it can move right now (do
     * not sleep), or NZ_TR_CLOSED / -errno when it never will. */
    int (*pollfds)(void *ctx, int want_in, int want_out, struct pollfd *pf, int max);
    /* the bytes counted since the endpoint was made (sent, received) are the engine's */
    void (*close)(void *ctx);
    /* Optional (NULL: cannot tell): ns since anything last arrived from the peer on this
     * endpoint at the transport level, counting what cannot be delivered yet (a TCP
     * segment held behind a lost one) and bare acknowledgements; < 0 if unknown. Lets
     * the health check tell a congested rail, whose in-order delivery waits for a
     * retransmission, from a cut one, from which nothing arrives at all. */
    int64_t (*rx_age_ns)(void *ctx);
    /* Optional (NULL: sendv copies what it takes): a transport whose sends keep reading the
     * caller's memory after sendv returned (zero-copy) says whether one still reads memory
     * in [lo, hi): 1 yes, 0 no. It collects completions as it goes; while it says 1, the
     * engine writes nothing there and does not end the run. pollfds asked for neither
     * direction wakes on a completion (POLLERR). */
    int (*tx_busy)(void *ctx, const char *lo, const char *hi);
    /* Optional (NULL: nothing to watch): bytes sendv took that are not acknowledged yet.
     * Returns 0 when there are none, NZ_TX_FLYING while some are on their way, NZ_TX_STUCK
     * when some wait unsent with none on the way; bytes that wait unsent it pushes out
     * again. A TCP segment dropped before it left the host (a full shaper or qdisc) is
     * otherwise retried only when an acknowledgement comes or a timer fires, 200 ms or
     * more; the engine asks while it waits instead. */
    int (*tx_kick)(void *ctx);
} nz_transport_ops_t;

enum { NZ_TX_FLYING = 1, NZ_TX_STUCK = 2 };

#define NZ_TR_READY (-(1 << 21))

#endif
