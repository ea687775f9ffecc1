/*
 * libnzmptcp.so: run an unmodified TCP program (Gloo) over kernel MPTCP.
 *
 *   LD_PRELOAD=build/libnzmptcp.so python prog.py
 *
 * 1. socket(AF_INET|AF_INET6, SOCK_STREAM, 0 or IPPROTO_TCP) becomes
 *    socket(..., IPPROTO_MPTCP) (262), so every TCP connection is an MPTCP connection
 *    (it falls back to plain TCP when the peer does not speak MPTCP).
 * 2. setsockopt(SOL_SOCKET, SO_REUSEADDR) on an MPTCP socket that is connected or accepted
 *    fails with EINVAL (the kernel only allows it in CLOSE/LISTEN state). Gloo sets it on
 *    such sockets and aborts (gloo/transport/tcp/socket.cc: "setsockopt: Invalid argument");
 *    that is exactly what plain `mptcpize run` trips over. The shim reports success instead:
 *    SO_REUSEADDR only matters for bind(), which has already happened on those sockets.
 *
 * Build: gcc -O2 -shared -fPIC -o build/libnzmptcp.so bench/mptcp_shim.c -ldl
 * NZ_MPTCP_SHIM_OFF=1 in the environment disables the conversion (for comparison runs).
 * NZ_MPTCP_SHIM_DEBUG=1 prints each conversion to stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

typedef int (*socket_fn)(int, int, int);
typedef int (*setsockopt_fn)(int, int, int, const void *, socklen_t);

static socket_fn real_socket;
static setsockopt_fn real_setsockopt;

static void resolve(void)
{
    if (!real_socket)
        real_socket = (socket_fn)dlsym(RTLD_NEXT, "socket");
    if (!real_setsockopt)
        real_setsockopt = (setsockopt_fn)dlsym(RTLD_NEXT, "setsockopt");
}

static int enabled(void)
{
    const char *off = getenv("NZ_MPTCP_SHIM_OFF");
    return !(off && *off && *off != '0');
}

static int debug(void)
{
    const char *d = getenv("NZ_MPTCP_SHIM_DEBUG");
    return d && *d && *d != '0';
}

int socket(int domain, int type, int protocol)
{
    resolve();
    int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (enabled() && (domain == AF_INET || domain == AF_INET6) && base == SOCK_STREAM &&
        (protocol == 0 || protocol == IPPROTO_TCP)) {
        int fd = real_socket(domain, type, IPPROTO_MPTCP);
        if (fd >= 0) {
            if (debug())
                fprintf(stderr, "nzmptcp: socket fd %d is MPTCP\n", fd);
            return fd;
        }
        /* MPTCP disabled in this namespace (ENOPROTOOPT) or unsupported: plain TCP. */
    }
    return real_socket(domain, type, protocol);
}

static int is_mptcp(int fd)
{
    int proto = 0;
    socklen_t len = sizeof(proto);
    if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) != 0)
        return 0;
    return proto == IPPROTO_MPTCP;
}

int setsockopt(int fd, int level, int optname, const void *optval, socklen_t optlen)
{
    resolve();
    int rc = real_setsockopt(fd, level, optname, optval, optlen);
    if (rc != 0 && errno == EINVAL && level == SOL_SOCKET && optname == SO_REUSEADDR &&
        is_mptcp(fd)) {
        if (debug())
            fprintf(stderr, "nzmptcp: fd %d: SO_REUSEADDR -> EINVAL ignored (MPTCP)\n", fd);
        errno = 0;
        return 0;
    }
    return rc;
}
