/* The tcp transport: one connected, non-blocking socket per endpoint (one NIC per rail;
 * the Python factory binds, connects and authenticates it). */
#ifndef NEZHA_TCP_H
#define NEZHA_TCP_H

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nezha/nezha_transport.h"

typedef struct {
    int fd;
} nz_tcp_ep_t;

static ssize_t nz_tcp_sendv(void *ctx, const struct iovec *iov, int niov) {
    nz_tcp_ep_t *t = (nz_tcp_ep_t *)ctx;
    struct msghdr mh;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = (struct iovec *)iov;
    mh.msg_iovlen = (size_t)niov;
    for (;;) {
        ssize_t n = sendmsg(t->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n >= 0) return n > 0 ? n : -EPIPE;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
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
    if (max < 1) return 0;
    pf[0].fd = ((nz_tcp_ep_t *)ctx)->fd;
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

static const nz_transport_ops_t nz_tcp_ops = {
    NZ_TRANSPORT_VERSION, "tcp", NZ_CAP_ORDERED,
    nz_tcp_sendv, nz_tcp_recv, NULL, NULL, nz_tcp_pollfds, nz_tcp_close, nz_tcp_rx_age_ns,
};

#endif
