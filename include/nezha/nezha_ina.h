/* In-network aggregation (INA): an aggregation service standing where a SHARP/NetReduce
 * switch would, and its client. Pure C, no Python; every function is static so the one
 * extension that includes it (nezha/_core/ina.pyx) gets its own copy. See docs/ina.md.
 *
 * Protocol over UDP (one datagram = one header + at most INA_MAX_PAYLOAD bytes, the chunk
 * size a client picks from its route's MTU unless told: 1432 B at MTU 1500; fields
 * little-endian, this code assumes a little-endian host):
 *   registration  HELLO -> CHALLENGE(stateless cookie nonce) -> AUTH(HMAC-SHA256 proof of
 *                 the job key over both nonces) -> WELCOME(token, slot share, server's own
 *                 HMAC) or REFUSE(code, text).
 *   data          DATA(token, slot, use, rank, seq, chunk, nelem, dtype, op, kind, owner,
 *                 values) -> RESULT once all ranks added their values to (slot, set). The
 *                 kind (protocol version 2) says who gets what: an allreduce chunk's result
 *                 goes to every rank; a reduce_scatter chunk belongs to one rank's block
 *                 (owner), which alone gets the values, the others a header (their credit);
 *                 an allgather chunk carries only its owner's values (the others send a
 *                 header: the bitmap still completes it) and goes to every rank.
 *   Slots come in two sets (set = use & 1, SwitchML): per (slot, set) a bitmap of ranks
 *   already added, so a duplicate is never counted twice; a duplicate on a complete set
 *   gets the stored result back (unicast), which is how a lost result is recovered.
 *   A rank sends use u+1 on a slot only after it holds the result of use u there, so when
 *   use u+2 arrives every rank has the result of use u and the set may be overwritten.
 *
 * Job key: from the job secret S, id = HMAC(S, "nezha-ina-id")[0:8] || tag (8 bytes) and
 * key = HMAC(S, "nezha-ina-key"). A service given the secret (--secret-file) knows the key
 * beforehand and the key never travels; an "open" service learns it from the first rank
 * that registers the job (trust on first use) and every later rank must prove it. */
#ifndef NEZHA_INA_H
#define NEZHA_INA_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "nezha/nezha_reduce.h"
#include "nezha/nezha_types.h"

/* ======================================================================================
 * SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104), small and self-contained.
 * ==================================================================================== */
typedef struct {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t n;
} ina_sha256_t;

static const uint32_t ina_sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define INA_ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void ina_sha256_block(uint32_t *h, const uint8_t *p) {
    uint32_t w[64], a, b, c, d, e, f, g, hh;
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = INA_ROR(w[i - 15], 7) ^ INA_ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = INA_ROR(w[i - 2], 17) ^ INA_ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = h[0]; b = h[1]; c = h[2]; d = h[3]; e = h[4]; f = h[5]; g = h[6]; hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t s1 = INA_ROR(e, 6) ^ INA_ROR(e, 11) ^ INA_ROR(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = hh + s1 + ch + ina_sha_k[i] + w[i];
        uint32_t s0 = INA_ROR(a, 2) ^ INA_ROR(a, 13) ^ INA_ROR(a, 22);
        uint32_t mj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = s0 + mj;
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

static void ina_sha256_init(ina_sha256_t *s) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->len = 0;
    s->n = 0;
}

static void ina_sha256_update(ina_sha256_t *s, const void *data, size_t len) {
    const uint8_t *p = (const uint8_t *)data;
    s->len += len;
    while (len) {
        size_t take = 64 - s->n < len ? 64 - s->n : len;
        memcpy(s->buf + s->n, p, take);
        s->n += take; p += take; len -= take;
        if (s->n == 64) { ina_sha256_block(s->h, s->buf); s->n = 0; }
    }
}

static void ina_sha256_final(ina_sha256_t *s, uint8_t out[32]) {
    uint64_t bits = s->len * 8;
    uint8_t pad = 0x80, zero = 0, lenb[8];
    ina_sha256_update(s, &pad, 1);
    while (s->n != 56) ina_sha256_update(s, &zero, 1);
    for (int i = 0; i < 8; i++) lenb[i] = (uint8_t)(bits >> (56 - 8 * i));
    ina_sha256_update(s, lenb, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24); out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8); out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

typedef struct {
    ina_sha256_t in;
    uint8_t okey[64];
} ina_hmac_t;

static void ina_hmac_init(ina_hmac_t *m, const uint8_t *key, size_t klen) {
    uint8_t k[64], ik[64];
    memset(k, 0, sizeof k);
    if (klen > 64) {
        ina_sha256_t s;
        ina_sha256_init(&s); ina_sha256_update(&s, key, klen); ina_sha256_final(&s, k);
    } else if (klen) {
        memcpy(k, key, klen);
    }
    for (int i = 0; i < 64; i++) { ik[i] = k[i] ^ 0x36; m->okey[i] = k[i] ^ 0x5c; }
    ina_sha256_init(&m->in);
    ina_sha256_update(&m->in, ik, 64);
}

static void ina_hmac_update(ina_hmac_t *m, const void *p, size_t n) { ina_sha256_update(&m->in, p, n); }

static void ina_hmac_final(ina_hmac_t *m, uint8_t out[32]) {
    uint8_t ih[32];
    ina_sha256_t o;
    ina_sha256_final(&m->in, ih);
    ina_sha256_init(&o);
    ina_sha256_update(&o, m->okey, 64);
    ina_sha256_update(&o, ih, 32);
    ina_sha256_final(&o, out);
}

static void ina_hmac(const uint8_t *key, size_t klen, const void *msg, size_t n, uint8_t out[32]) {
    ina_hmac_t m;
    ina_hmac_init(&m, key, klen);
    ina_hmac_update(&m, msg, n);
    ina_hmac_final(&m, out);
}

/* Constant-time compare. */
static int ina_ct_equal(const uint8_t *a, const uint8_t *b, size_t n) {
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++) d |= a[i] ^ b[i];
    return d == 0;
}

/* id (16 bytes: 8 of secret fingerprint, 8 of tag) and key (32 bytes) of a job. */
static void ina_job_credentials(const uint8_t *secret, size_t slen, const uint8_t tag[8],
                                uint8_t id[16], uint8_t key[32]) {
    uint8_t fp[32];
    ina_hmac(secret, slen, "nezha-ina-id", 12, fp);
    memcpy(id, fp, 8);
    memcpy(id + 8, tag, 8);
    ina_hmac(secret, slen, "nezha-ina-key", 13, key);
}

/* ======================================================================================
 * Wire format
 * ==================================================================================== */
#define INA_MAGIC 0x315a494eu /* bytes "NIZ1" */
#define INA_MAX_PAYLOAD 8192  /* largest chunk; 36 B header + 28 B IPv4/UDP + 8192 fits MTU 9000 */
#define INA_MTU_CHUNK 1408    /* the chunk of tests and docs: 1408 + 64 = 1472 fits MTU 1500 */
#define INA_MAX_RANKS 64
#define INA_MAX_JOBS 64
#define INA_MAX_KEYS 16
#define INA_DGRAM (INA_MAX_PAYLOAD + 128)

enum {
    INA_T_DATA = 1,
    INA_T_RESULT = 2,
    INA_T_PING = 3,  /* a rank's heartbeat (token, rank): it is alive and reaches the service */
    INA_T_PONG = 4,  /* to a PING: chunk = ms since the job's least recently heard rank (slot);
                        flags INA_F_MISMATCH: its ranks sent disagreeing data lately */
    INA_T_HELLO = 16,
    INA_T_CHALLENGE = 17,
    INA_T_AUTH = 18,
    INA_T_WELCOME = 19,
    INA_T_REFUSE = 20,
    INA_T_BYE = 21
};

#define INA_F_MISMATCH 1

/* Protocol version 2 added the kind (DATA/RESULT flags) and owner fields; a version-1
 * service says 0 in WELCOME's version and gets allreduces only. */
#define INA_VERSION 2
#define INA_F_KIND 3 /* low bits of flags in DATA and RESULT */
enum { INA_K_ALLREDUCE = 0, INA_K_REDUCE_SCATTER = 1, INA_K_ALLGATHER = 2 };

enum { INA_REFUSE_PROOF = 1, INA_REFUSE_UNKNOWN = 2, INA_REFUSE_BUSY = 3, INA_REFUSE_BADARG = 4 };

typedef struct __attribute__((packed)) {
    uint32_t magic;
    uint8_t type, dtype, op, flags;
    uint64_t token;   /* job token from WELCOME; 0 during registration */
    uint16_t slot;    /* slot index within the job's share */
    uint16_t rank;
    uint32_t use;     /* per-slot use number; set = use & 1 */
    uint32_t seq;     /* collective sequence number of the job */
    uint32_t chunk;   /* chunk index within the collective */
    uint16_t nelem;   /* elements of the chunk (the payload: these, or none, see kind) */
    uint16_t owner;   /* reduce_scatter / allgather: the rank whose block the chunk is */
} ina_hdr_t;
#define INA_HDR ((int)sizeof(ina_hdr_t))
#define INA_IP_UDP 28 /* IPv4 (20) + UDP (8) header bytes of every datagram */

/* The payload of one datagram a client picks for a route of this MTU (NEZHA_INA_CHUNK=0):
 * the largest multiple of 8 that fits one frame with the headers, 64..INA_MAX_PAYLOAD
 * (8192 at MTU 9000, 1432 at 1500). nezha/sim/ina_sched.py reads it through ina.pyx. */
static inline uint32_t ina_mtu_chunk(int mtu) {
    int b = (mtu - INA_IP_UDP - INA_HDR) & ~7;
    return (uint32_t)(b > INA_MAX_PAYLOAD ? INA_MAX_PAYLOAD : b < 64 ? 64 : b);
}

typedef struct __attribute__((packed)) {
    uint8_t id[16];
    uint16_t rank, nranks, want_slots, flags;
} ina_hello_t;

typedef struct __attribute__((packed)) {
    uint8_t id[16];
    uint8_t nonce[16];
    uint8_t want_key, pad[3];
    uint32_t job_timeout_ms;
} ina_challenge_t;

typedef struct __attribute__((packed)) {
    ina_hello_t h;
    uint8_t nonce_s[16], nonce_c[16];
    uint8_t mac[32];
    uint8_t key[32]; /* only when the challenge asked for it (open service, new job) */
    uint8_t has_key, pad[3];
} ina_auth_t;

typedef struct __attribute__((packed)) {
    uint64_t token;
    uint16_t nslots, nranks, rank, version; /* version: INA_VERSION (0 from a version-1 service) */
    uint32_t job_timeout_ms;
    uint8_t mac[32];
} ina_welcome_t;

typedef struct __attribute__((packed)) {
    uint16_t code, pad;
    char text[200];
} ina_refuse_t;

static int64_t ina_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t ina_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* What the service aggregates: SUM, MIN, MAX, AVG of int32, int64, float16, bfloat16,
 * float32, float64 (AVG for floats only). 16-bit floats accumulate in float32. */
static int ina_reduce_support(int dtype, int op) {
    int fl = nezha_dtype_is_float(dtype);
    if (!(dtype == NEZHA_DT_INT32 || dtype == NEZHA_DT_INT64 || fl)) return 0;
    if (op == NEZHA_OP_SUM || op == NEZHA_OP_MIN || op == NEZHA_OP_MAX) return 1;
    return op == NEZHA_OP_AVG && fl;
}

static int ina_is_half(int dtype) { return dtype == NEZHA_DT_FLOAT16 || dtype == NEZHA_DT_BFLOAT16; }

/* Elements per chunk of chunk_bytes for a dtype. */
static size_t ina_chunk_elems(int dtype, size_t chunk_bytes) { return chunk_bytes / nezha_dtype_size(dtype); }

static void ina_sockaddr_str(const struct sockaddr_in *a, char *out, size_t n) {
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
    snprintf(out, n, "%s:%u", ip, ntohs(a->sin_port));
}

static void ina_bigbuf(int fd, int bytes) {
    /* root may exceed rmem_max/wmem_max (the lab runs as root); else take what we get */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

/* ======================================================================================
 * The service
 * ==================================================================================== */
#define INA_ACC_BYTES (INA_MAX_PAYLOAD * 2) /* float32 accumulator of 16-bit values */

typedef struct {
    uint32_t use, seq, chunk;
    uint64_t bitmap;   /* ranks already added to this use */
    uint16_t nelem, owner;
    uint8_t dtype, op, kind, valid, done;
    double acc[INA_ACC_BYTES / 8];
    uint8_t res[INA_MAX_PAYLOAD]; /* wire-format result of 16-bit floats */
} ina_set_t;

typedef struct {
    ina_set_t set[2];
} ina_slot_t;

typedef struct {
    int active;
    uint8_t id[16], key[32];
    uint64_t token;
    uint16_t nranks, slot_base, nslots;
    uint64_t registered;
    struct sockaddr_in addr[INA_MAX_RANKS];
    int64_t last_ms;
    int64_t heard_ms[INA_MAX_RANKS]; /* last valid datagram from each rank */
    int64_t mismatch_ms;             /* last datagram that disagreed with its slot (0: none) */
    uint64_t data, results;
} ina_job_t;

/* Counters, all monotonic except jobs_active / slots_free. Keep in step with ina.pyx. */
typedef struct {
    uint64_t rx, tx, data_added, dup_pending, dup_resent, stale, results, bad_token, bad_source,
        bad_meta, malformed, auth_ok, auth_fail, refused_busy, jobs_created, jobs_expired,
        jobs_closed, send_errors, jobs_active, slots_free;
} ina_srv_stats_t;

#define INA_RX_BATCH 64
#define INA_TX_QUEUE 4096

typedef struct {
    int fd;
    uint16_t port;
    int nslots, quota;
    int open_mode;
    int64_t job_timeout_ms;
    ina_slot_t *slots;
    int16_t *owner;
    ina_job_t jobs[INA_MAX_JOBS];
    uint8_t cookie_key[32];
    int nkeys;
    uint8_t key_fp[INA_MAX_KEYS][8], keys[INA_MAX_KEYS][32];
    volatile int stop;
    /* test hook: the service dies (hears nothing more, stops) at the first DATA datagram of
     * collective die_seq (or later) with chunk >= die_chunk: killed mid-collective for
     * sure; die_seq 0 = never */
    uint32_t die_seq, die_chunk;
    ina_srv_stats_t st;
    /* after a datagram, keep looking (poll 0 + sched_yield) this long before sleeping in
     * poll(): the next collective's datagrams come within tens of microseconds and a
     * wake-up from poll() costs about as much; 0 sleeps at once. Idle, it sleeps. */
    int64_t spin_us, last_rx_us;
    /* receive batch */
    struct mmsghdr rmsg[INA_RX_BATCH];
    struct iovec riov[INA_RX_BATCH];
    struct sockaddr_in rfrom[INA_RX_BATCH];
    uint8_t (*rbuf)[INA_DGRAM];
    /* send queue: header copies + payload pointers into slot memory */
    int nq;
    struct mmsghdr qmsg[INA_TX_QUEUE];
    struct iovec qiov[INA_TX_QUEUE][2];
    ina_hdr_t qhdr[INA_TX_QUEUE];
    struct sockaddr_in qto[INA_TX_QUEUE];
    int64_t now_ms;
} ina_server_t;

static void ina_srv_flush(ina_server_t *s) {
    int off = 0;
    while (off < s->nq) {
        int r = sendmmsg(s->fd, s->qmsg + off, (unsigned)(s->nq - off), 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            /* ENOBUFS / EAGAIN / an unreachable rank: drop this one, ranks resend */
            s->st.send_errors++;
            off++;
            continue;
        }
        s->st.tx += (uint64_t)r;
        off += r;
    }
    s->nq = 0;
}

static void ina_srv_queue(ina_server_t *s, const struct sockaddr_in *to, const ina_hdr_t *h,
                          const void *payload, size_t plen) {
    if (s->nq == INA_TX_QUEUE) ina_srv_flush(s);
    int i = s->nq++;
    s->qhdr[i] = *h;
    s->qto[i] = *to;
    s->qiov[i][0].iov_base = &s->qhdr[i];
    s->qiov[i][0].iov_len = sizeof(ina_hdr_t);
    s->qiov[i][1].iov_base = (void *)payload;
    s->qiov[i][1].iov_len = plen;
    memset(&s->qmsg[i], 0, sizeof s->qmsg[i]);
    s->qmsg[i].msg_hdr.msg_name = &s->qto[i];
    s->qmsg[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_in);
    s->qmsg[i].msg_hdr.msg_iov = s->qiov[i];
    s->qmsg[i].msg_hdr.msg_iovlen = plen ? 2 : 1;
}

static void ina_srv_reply(ina_server_t *s, const struct sockaddr_in *to, int type, const void *body,
                          size_t n) {
    uint8_t buf[INA_DGRAM];
    ina_hdr_t h;
    memset(&h, 0, sizeof h);
    h.magic = INA_MAGIC;
    h.type = (uint8_t)type;
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, body, n);
    if (sendto(s->fd, buf, sizeof h + n, 0, (const struct sockaddr *)to, sizeof *to) < 0)
        s->st.send_errors++;
    else
        s->st.tx++;
}

static void ina_srv_refuse(ina_server_t *s, const struct sockaddr_in *to, int code, const char *fmt, ...) {
    ina_refuse_t r;
    va_list ap;
    memset(&r, 0, sizeof r);
    r.code = (uint16_t)code;
    va_start(ap, fmt);
    vsnprintf(r.text, sizeof r.text, fmt, ap);
    va_end(ap);
    ina_srv_reply(s, to, INA_T_REFUSE, &r, sizeof r);
}

static void ina_srv_free_job(ina_server_t *s, int j) {
    ina_job_t *job = &s->jobs[j];
    for (int i = job->slot_base; i < job->slot_base + job->nslots; i++) {
        s->owner[i] = -1;
        memset(&s->slots[i].set[0], 0, offsetof(ina_set_t, acc));
        memset(&s->slots[i].set[1], 0, offsetof(ina_set_t, acc));
    }
    s->st.slots_free += job->nslots;
    s->st.jobs_active--;
    memset(job, 0, sizeof *job);
}

/* Stateless challenge: a cookie bound to the source address, the job id and a 10 s epoch. */
static void ina_srv_cookie(ina_server_t *s, const struct sockaddr_in *from, const uint8_t id[16],
                           int64_t epoch, uint8_t out[16]) {
    uint8_t mac[32];
    ina_hmac_t m;
    ina_hmac_init(&m, s->cookie_key, 32);
    ina_hmac_update(&m, &epoch, sizeof epoch);
    ina_hmac_update(&m, &from->sin_addr, sizeof from->sin_addr);
    ina_hmac_update(&m, &from->sin_port, sizeof from->sin_port);
    ina_hmac_update(&m, id, 16);
    ina_hmac_final(&m, mac);
    memcpy(out, mac, 16);
}

static int ina_srv_find_job(ina_server_t *s, const uint8_t id[16]) {
    for (int j = 0; j < INA_MAX_JOBS; j++)
        if (s->jobs[j].active && memcmp(s->jobs[j].id, id, 16) == 0) return j;
    return -1;
}

static const uint8_t *ina_srv_known_key(ina_server_t *s, const uint8_t id[16]) {
    for (int k = 0; k < s->nkeys; k++)
        if (memcmp(s->key_fp[k], id, 8) == 0) return s->keys[k];
    return NULL;
}

static void ina_auth_mac(const uint8_t key[32], const ina_auth_t *a, uint8_t out[32]) {
    ina_hmac_t m;
    ina_hmac_init(&m, key, 32);
    ina_hmac_update(&m, "nezha-ina-auth", 14);
    ina_hmac_update(&m, &a->h, sizeof a->h);
    ina_hmac_update(&m, a->nonce_s, 16);
    ina_hmac_update(&m, a->nonce_c, 16);
    ina_hmac_final(&m, out);
}

static void ina_welcome_mac(const uint8_t key[32], const uint8_t nonce_c[16], const ina_welcome_t *w,
                            uint8_t out[32]) {
    ina_hmac_t m;
    ina_hmac_init(&m, key, 32);
    ina_hmac_update(&m, "nezha-ina-welcome", 17);
    ina_hmac_update(&m, nonce_c, 16);
    ina_hmac_update(&m, w, offsetof(ina_welcome_t, mac));
    ina_hmac_final(&m, out);
}

/* A contiguous run of free slots: the first of length want, else the longest. */
static int ina_srv_alloc(ina_server_t *s, int want, int *base) {
    int best = 0, bestb = -1;
    for (int i = 0; i < s->nslots;) {
        if (s->owner[i] >= 0) { i++; continue; }
        int j = i;
        while (j < s->nslots && s->owner[j] < 0 && j - i < want) j++;
        if (j - i > best) { best = j - i; bestb = i; }
        if (best >= want) break;
        i = j + 1;
    }
    *base = bestb;
    return best;
}

static void ina_srv_hello(ina_server_t *s, const struct sockaddr_in *from, const uint8_t *p, size_t n) {
    if (n < sizeof(ina_hello_t)) { s->st.malformed++; return; }
    const ina_hello_t *h = (const ina_hello_t *)p;
    ina_challenge_t c;
    memset(&c, 0, sizeof c);
    memcpy(c.id, h->id, 16);
    ina_srv_cookie(s, from, h->id, s->now_ms / 10000, c.nonce);
    c.want_key = s->open_mode && ina_srv_find_job(s, h->id) < 0 && !ina_srv_known_key(s, h->id);
    c.job_timeout_ms = (uint32_t)s->job_timeout_ms;
    ina_srv_reply(s, from, INA_T_CHALLENGE, &c, sizeof c);
}

static void ina_srv_auth(ina_server_t *s, const struct sockaddr_in *from, const uint8_t *p, size_t n) {
    if (n < sizeof(ina_auth_t)) { s->st.malformed++; return; }
    ina_auth_t a;
    memcpy(&a, p, sizeof a);
    uint8_t ck[16], mac[32];
    int64_t ep = s->now_ms / 10000;
    ina_srv_cookie(s, from, a.h.id, ep, ck);
    if (!ina_ct_equal(ck, a.nonce_s, 16)) {
        ina_srv_cookie(s, from, a.h.id, ep - 1, ck);
        if (!ina_ct_equal(ck, a.nonce_s, 16)) { s->st.auth_fail++; return; } /* stale or forged: silent */
    }
    int j = ina_srv_find_job(s, a.h.id);
    const uint8_t *key = j >= 0 ? s->jobs[j].key : ina_srv_known_key(s, a.h.id);
    if (!key && s->open_mode && a.has_key) key = a.key;
    if (!key) {
        s->st.auth_fail++;
        ina_srv_refuse(s, from, INA_REFUSE_UNKNOWN, "this INA service does not admit that job (start it "
                       "with the job's secret, or without any secret to admit any job)");
        return;
    }
    ina_auth_mac(key, &a, mac);
    if (!ina_ct_equal(mac, a.mac, 32)) {
        s->st.auth_fail++;
        ina_srv_refuse(s, from, INA_REFUSE_PROOF, "proof of the job secret failed (another job's secret?)");
        return;
    }
    if (a.h.nranks < 1 || a.h.nranks > INA_MAX_RANKS || a.h.rank >= a.h.nranks) {
        ina_srv_refuse(s, from, INA_REFUSE_BADARG, "rank %u of %u: 1..%d ranks", a.h.rank, a.h.nranks,
                       INA_MAX_RANKS);
        return;
    }
    if (j >= 0 && s->jobs[j].nranks != a.h.nranks) {
        ina_srv_refuse(s, from, INA_REFUSE_BADARG, "the job has %u ranks, this rank says %u",
                       s->jobs[j].nranks, a.h.nranks);
        return;
    }
    if (j < 0) {
        for (j = 0; j < INA_MAX_JOBS && s->jobs[j].active; j++) {}
        int base = -1, want = a.h.want_slots ? a.h.want_slots : s->quota;
        if (want > s->quota) want = s->quota;
        int got = j < INA_MAX_JOBS ? ina_srv_alloc(s, want, &base) : 0;
        if (got <= 0) {
            s->st.refused_busy++;
            ina_srv_refuse(s, from, INA_REFUSE_BUSY, "slot pool full (%d slots, %d jobs active)",
                           s->nslots, (int)s->st.jobs_active);
            return;
        }
        ina_job_t *job = &s->jobs[j];
        memset(job, 0, sizeof *job);
        job->active = 1;
        memcpy(job->id, a.h.id, 16);
        memcpy(job->key, key, 32);
        uint64_t r = 0;
        while (r == 0) {
            if (getrandom(&r, sizeof r, 0) != sizeof r) r = (uint64_t)ina_now_us() * 0x9e3779b97f4a7c15ull;
            r = (r & ~(uint64_t)0xff) | (uint64_t)j;
        }
        job->token = r;
        job->nranks = a.h.nranks;
        for (int k = 0; k < INA_MAX_RANKS; k++) job->heard_ms[k] = s->now_ms;
        job->slot_base = (uint16_t)base;
        job->nslots = (uint16_t)got;
        for (int i = base; i < base + got; i++) {
            s->owner[i] = (int16_t)j;
            memset(&s->slots[i].set[0], 0, offsetof(ina_set_t, acc));
            memset(&s->slots[i].set[1], 0, offsetof(ina_set_t, acc));
        }
        s->st.slots_free -= got;
        s->st.jobs_created++;
        s->st.jobs_active++;
    }
    ina_job_t *job = &s->jobs[j];
    job->addr[a.h.rank] = *from;
    job->registered |= 1ull << a.h.rank;
    job->last_ms = s->now_ms;
    s->st.auth_ok++;
    ina_welcome_t w;
    memset(&w, 0, sizeof w);
    w.token = job->token;
    w.nslots = job->nslots;
    w.nranks = job->nranks;
    w.rank = a.h.rank;
    w.version = INA_VERSION;
    w.job_timeout_ms = (uint32_t)s->job_timeout_ms;
    ina_welcome_mac(job->key, a.nonce_c, &w, w.mac);
    ina_srv_reply(s, from, INA_T_WELCOME, &w, sizeof w);
}

static ina_job_t *ina_srv_job_of(ina_server_t *s, const ina_hdr_t *h, const struct sockaddr_in *from) {
    unsigned j = (unsigned)(h->token & 0xff);
    if (j >= INA_MAX_JOBS || !s->jobs[j].active || s->jobs[j].token != h->token) {
        s->st.bad_token++;
        return NULL;
    }
    ina_job_t *job = &s->jobs[j];
    if (h->rank >= job->nranks || !(job->registered >> h->rank & 1) ||
        job->addr[h->rank].sin_addr.s_addr != from->sin_addr.s_addr ||
        job->addr[h->rank].sin_port != from->sin_port) {
        s->st.bad_source++;
        return NULL;
    }
    job->last_ms = s->now_ms;
    job->heard_ms[h->rank] = s->now_ms;
    return job;
}

/* Where the result of a complete set goes: every rank gets the values, except in a
 * reduce_scatter, where the ranks other than the chunk's owner get a header only (their
 * credit: the slot may take their next chunk). One rank (a duplicate on a complete set:
 * its result was lost) or every rank (to < 0). */
static void ina_srv_result(ina_server_t *s, ina_job_t *job, const ina_set_t *set, const ina_hdr_t *h,
                           const void *res, size_t n, int to) {
    ina_hdr_t r = *h;
    r.type = INA_T_RESULT;
    r.rank = 0xffff;
    for (int k = to < 0 ? 0 : to; k < (to < 0 ? job->nranks : to + 1); k++) {
        int values = set->kind != INA_K_REDUCE_SCATTER || k == set->owner;
        ina_srv_queue(s, &job->addr[k], &r, values ? res : NULL, values ? n : 0);
    }
}

static void ina_srv_data(ina_server_t *s, const ina_hdr_t *h, const uint8_t *p, size_t n,
                         const struct sockaddr_in *from) {
    ina_job_t *job = ina_srv_job_of(s, h, from);
    if (!job) return;
    size_t es = nezha_dtype_size(h->dtype);
    int kind = h->flags & INA_F_KIND;
    /* an allgather chunk is moved, not reduced (any dtype); its owner alone sends values */
    int gather = kind == INA_K_ALLGATHER;
    size_t want = gather && h->rank != h->owner ? 0 : (size_t)h->nelem * es;
    if (kind > INA_K_ALLGATHER || (h->flags & ~INA_F_KIND) || !es ||
        (!gather && !ina_reduce_support(h->dtype, h->op)) ||
        (kind != INA_K_ALLREDUCE && h->owner >= job->nranks) || h->slot >= job->nslots ||
        !h->nelem || (size_t)h->nelem * es > INA_MAX_PAYLOAD || n != want) {
        s->st.malformed++;
        return;
    }
    job->data++;
    ina_set_t *set = &s->slots[job->slot_base + h->slot].set[h->use & 1];
    uint64_t bit = 1ull << h->rank;
    int half = !gather && ina_is_half(h->dtype);
    size_t bytes = (size_t)h->nelem * es; /* of the result */
    if (!set->valid || (int32_t)(h->use - set->use) > 0) {
        /* a newer use: every rank holds the result of the one this set had (see top) */
        set->valid = 1;
        set->done = 0;
        set->use = h->use;
        set->seq = h->seq;
        set->chunk = h->chunk;
        set->nelem = h->nelem;
        set->dtype = h->dtype;
        set->op = h->op;
        set->kind = (uint8_t)kind;
        set->owner = h->owner;
        set->bitmap = bit;
        if (half) {
            float *acc = (float *)set->acc;
            const nzk_u16 *v = (const nzk_u16 *)p;
            if (h->dtype == NEZHA_DT_FLOAT16)
                for (size_t i = 0; i < h->nelem; i++) acc[i] = nzk_h2f(v[i]);
            else
                for (size_t i = 0; i < h->nelem; i++) acc[i] = nzk_bf2f(v[i]);
        } else if (n) {
            memcpy(set->acc, p, n);
        }
    } else if (h->use != set->use) {
        s->st.stale++; /* an old use: its result was delivered to every rank long ago */
        return;
    } else if (set->seq != h->seq || set->chunk != h->chunk || set->nelem != h->nelem ||
               set->dtype != h->dtype || set->op != h->op || set->kind != kind ||
               set->owner != h->owner) {
        s->st.bad_meta++; /* ranks disagree on the collective: never mix */
        job->mismatch_ms = s->now_ms;
        return;
    } else if (set->bitmap & bit) {
        if (set->done) { /* this rank lost the result: send it again, to it only */
            ina_srv_result(s, job, set, h, half ? (void *)set->res : (void *)set->acc, bytes,
                           h->rank);
            s->st.dup_resent++;
        } else {
            s->st.dup_pending++;
        }
        return;
    } else {
        set->bitmap |= bit;
        if (gather) {
            if (n) memcpy(set->acc, p, n); /* the owner's block; the others only count */
        } else if (half) {
            float tmp[INA_MAX_PAYLOAD / 2];
            const nzk_u16 *v = (const nzk_u16 *)p;
            if (h->dtype == NEZHA_DT_FLOAT16)
                for (size_t i = 0; i < h->nelem; i++) tmp[i] = nzk_h2f(v[i]);
            else
                for (size_t i = 0; i < h->nelem; i++) tmp[i] = nzk_bf2f(v[i]);
            nezha_reduce(set->acc, tmp, h->nelem, NEZHA_DT_FLOAT32, h->op);
        } else {
            nezha_reduce(set->acc, p, h->nelem, h->dtype, h->op);
        }
    }
    s->st.data_added++;
    uint64_t full = job->nranks == 64 ? ~0ull : (1ull << job->nranks) - 1;
    if (set->bitmap != full) return;
    /* complete: AVG divides here, 16-bit floats round once from float32 */
    set->done = 1;
    if (!gather && h->op == NEZHA_OP_AVG) {
        if (half || h->dtype == NEZHA_DT_FLOAT32) {
            float *a = (float *)set->acc, d = (float)job->nranks;
            for (size_t i = 0; i < h->nelem; i++) a[i] /= d;
        } else {
            double *a = set->acc, d = (double)job->nranks;
            for (size_t i = 0; i < h->nelem; i++) a[i] /= d;
        }
    }
    if (half) {
        const float *a = (const float *)set->acc;
        nzk_u16 *r = (nzk_u16 *)set->res;
        if (h->dtype == NEZHA_DT_FLOAT16)
            for (size_t i = 0; i < h->nelem; i++) r[i] = nzk_f2h(a[i]);
        else
            for (size_t i = 0; i < h->nelem; i++) r[i] = nzk_f2bf(a[i]);
    }
    ina_srv_result(s, job, set, h, half ? (void *)set->res : (void *)set->acc, bytes, -1);
    s->st.results++;
    job->results++;
}

/* A heartbeat: answer with how long ago the job's least recently heard rank was heard, so
 * that a rank waiting for a result tells a late rank (heard: keep waiting) from a lost one
 * (not heard: the INA rail failed) without waiting for NEZHA_TIMEOUT. */
static void ina_srv_ping(ina_server_t *s, const ina_hdr_t *h, const struct sockaddr_in *from) {
    ina_job_t *job = ina_srv_job_of(s, h, from);
    if (!job) return;
    int64_t oldest = s->now_ms;
    int who = 0;
    for (int k = 0; k < job->nranks; k++)
        if (job->heard_ms[k] < oldest) { oldest = job->heard_ms[k]; who = k; }
    ina_hdr_t r = *h;
    r.type = INA_T_PONG;
    r.slot = (uint16_t)who;
    int64_t age = s->now_ms - oldest;
    r.chunk = (uint32_t)(age > 0xffffffffLL ? 0xffffffffLL : age);
    r.nelem = 0;
    /* ranks that disagree (count, dtype, op) wait for each other forever: say so */
    r.flags = job->mismatch_ms && s->now_ms - job->mismatch_ms < 2000 ? INA_F_MISMATCH : 0;
    ina_srv_queue(s, from, &r, NULL, 0);
}

static void ina_srv_bye(ina_server_t *s, const ina_hdr_t *h, const struct sockaddr_in *from) {
    ina_job_t *job = ina_srv_job_of(s, h, from);
    if (!job) return;
    job->registered &= ~(1ull << h->rank);
    if (!job->registered) {
        s->st.jobs_closed++;
        ina_srv_free_job(s, (int)(job - s->jobs));
    }
}

static void ina_srv_expire(ina_server_t *s) {
    for (int j = 0; j < INA_MAX_JOBS; j++)
        if (s->jobs[j].active && s->now_ms - s->jobs[j].last_ms > s->job_timeout_ms) {
            s->st.jobs_expired++;
            ina_srv_free_job(s, j);
        }
}

static void ina_srv_dgram(ina_server_t *s, const uint8_t *b, size_t n, const struct sockaddr_in *from) {
    ina_hdr_t h;
    s->st.rx++;
    if (n < sizeof h) { s->st.malformed++; return; }
    memcpy(&h, b, sizeof h);
    if (h.magic != INA_MAGIC) { s->st.malformed++; return; }
    const uint8_t *p = b + sizeof h;
    n -= sizeof h;
    if (s->die_seq && h.type == INA_T_DATA &&
        (h.seq > s->die_seq || (h.seq == s->die_seq && h.chunk >= s->die_chunk)))
        s->stop = 1;
    if (s->stop) return; /* dead (die_after): not a word more */
    switch (h.type) {
    case INA_T_DATA: ina_srv_data(s, &h, p, n, from); break;
    case INA_T_HELLO: ina_srv_hello(s, from, p, n); break;
    case INA_T_AUTH: ina_srv_auth(s, from, p, n); break;
    case INA_T_BYE: ina_srv_bye(s, &h, from); break;
    case INA_T_PING: ina_srv_ping(s, &h, from); break;
    default: s->st.malformed++; break;
    }
}

/* secrets: nkeys job secrets of secret_len[i] bytes each (may be 0: open service). */
static int ina_server_init(ina_server_t *s, const char *addr, int port, int nslots, int quota,
                           int64_t job_timeout_ms, int nsecrets, const uint8_t *const *secrets,
                           const size_t *secret_len, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->fd = -1;
    if (nslots < 1 || nslots > 32767 || quota < 1) {
        snprintf(err, errlen, "slots must be 1..32767 and quota >= 1 (got %d, %d)", nslots, quota);
        return -EINVAL;
    }
    if (nsecrets > INA_MAX_KEYS) {
        snprintf(err, errlen, "at most %d secrets", INA_MAX_KEYS);
        return -EINVAL;
    }
    s->nslots = nslots;
    s->quota = quota < nslots ? quota : nslots;
    s->job_timeout_ms = job_timeout_ms > 0 ? job_timeout_ms : 60000;
    s->open_mode = nsecrets == 0;
    for (int k = 0; k < nsecrets; k++) {
        uint8_t id[16], tag[8] = {0};
        ina_job_credentials(secrets[k], secret_len[k], tag, id, s->keys[k]);
        memcpy(s->key_fp[k], id, 8);
    }
    s->nkeys = nsecrets;
    if (getrandom(s->cookie_key, 32, 0) != 32) {
        snprintf(err, errlen, "getrandom: %s", strerror(errno));
        return -errno;
    }
    s->slots = (ina_slot_t *)calloc((size_t)nslots, sizeof(ina_slot_t));
    s->owner = (int16_t *)malloc((size_t)nslots * sizeof(int16_t));
    s->rbuf = malloc((size_t)INA_RX_BATCH * INA_DGRAM);
    if (!s->slots || !s->owner || !s->rbuf) {
        snprintf(err, errlen, "out of memory for %d slots", nslots);
        return -ENOMEM;
    }
    for (int i = 0; i < nslots; i++) s->owner[i] = -1;
    s->st.slots_free = (uint64_t)nslots;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "bad IPv4 address %s", addr);
        return -EINVAL;
    }
    s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -errno;
    }
    ina_bigbuf(s->fd, 16 << 20);
    if (bind(s->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        snprintf(err, errlen, "bind %s:%d: %s", addr, port, strerror(e));
        return -e;
    }
    socklen_t sl = sizeof sa;
    getsockname(s->fd, (struct sockaddr *)&sa, &sl);
    s->port = ntohs(sa.sin_port);
    return 0;
}

static void ina_server_destroy(ina_server_t *s) {
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    free(s->slots); s->slots = NULL;
    free(s->owner); s->owner = NULL;
    free(s->rbuf); s->rbuf = NULL;
}

/* The data path for about 100 ms, or until s->stop or a signal here (returns -EINTR). It
 * returns every pass so the caller can look at signals: one the kernel hands to another
 * thread never interrupts our poll(), and under a flood the loop never sleeps in it. */
static int ina_server_run(ina_server_t *s) {
    int64_t last_expire = 0, t_end = ina_now_ms() + 100;
    for (int i = 0; i < INA_RX_BATCH; i++) {
        s->riov[i].iov_base = s->rbuf[i];
        s->riov[i].iov_len = INA_DGRAM;
    }
    while (!s->stop) {
        struct pollfd pf = {s->fd, POLLIN, 0};
        int r = poll(&pf, 1, 0);
        if (r == 0) {
            if (s->spin_us > 0 && ina_now_us() - s->last_rx_us < s->spin_us)
                sched_yield(); /* busy lately: look again soon (the loop's r stays 0) */
            else
                r = poll(&pf, 1, 100);
        }
        s->now_ms = ina_now_ms();
        if (r < 0 && errno == EINTR) return -EINTR;
        if (s->now_ms - last_expire >= 100) {
            ina_srv_expire(s);
            last_expire = s->now_ms;
        }
        if (s->now_ms >= t_end) return 0; /* after the expiry: an idle pass is one poll */
        if (r <= 0) continue;
        for (int rounds = 0; rounds < 64; rounds++) {
            for (int i = 0; i < INA_RX_BATCH; i++) {
                memset(&s->rmsg[i].msg_hdr, 0, sizeof s->rmsg[i].msg_hdr);
                s->rmsg[i].msg_hdr.msg_name = &s->rfrom[i];
                s->rmsg[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_in);
                s->rmsg[i].msg_hdr.msg_iov = &s->riov[i];
                s->rmsg[i].msg_hdr.msg_iovlen = 1;
            }
            int got = recvmmsg(s->fd, s->rmsg, INA_RX_BATCH, MSG_DONTWAIT, NULL);
            if (got <= 0) break;
            if (s->spin_us > 0) s->last_rx_us = ina_now_us();
            for (int i = 0; i < got; i++) {
                if (s->rmsg[i].msg_hdr.msg_flags & MSG_TRUNC) { s->st.malformed++; continue; }
                ina_srv_dgram(s, s->rbuf[i], s->rmsg[i].msg_len, &s->rfrom[i]);
            }
            ina_srv_flush(s);
            if (got < INA_RX_BATCH) break;
        }
    }
    return 0;
}

/* ======================================================================================
 * The client: one rank of one job.
 * ==================================================================================== */
/* The tail probe (TCP's tail loss probe, RFC 8985 §7, for a window of slots): a datagram
 * lost among a collective's last ~two windows of transmissions has too few sent after it
 * for fast retransmit, and waited for the timer (at least 5 ms; a 1 MiB collective moves
 * in 21 ms at 400 Mbit/s, and at 1 % loss on each of 4 ranks' links about one in seven of
 * its last 19 chunks loses a datagram). When no result at all has come for the probe
 * timeout, max(2 x srtt, probe_min_us), every chunk without result whose last
 * transmission is that old is resent, once per chunk (then the timer). Silence while
 * chunks are out means they all wait: for a loss, or for a late rank, in which case the
 * service drops the resend (dup_pending) or answers it with the stored result (dup_resent),
 * on a rail this collective then leaves idle anyway. */
#define INA_PROBE_MIN_US 1000

typedef struct {
    uint64_t tx, rx, retrans, timeouts, stale_results, fault_dropped, fault_duplicated,
        fault_reordered, fault_results_dropped, collectives, fast_retrans,
        result_bytes, /* values received in accepted results (a reduce_scatter: own block only) */
        tail_probes;  /* chunks resent by the tail probe (INA_PROBE_MIN_US) */
} ina_cli_stats_t;

typedef struct {
    int fd;
    char where[64]; /* "addr:port" for messages */
    uint8_t id[16], key[32];
    uint64_t token;
    uint16_t rank, nranks, nslots;
    uint32_t job_timeout_ms;
    uint32_t seq;
    uint32_t *use; /* per slot */
    int64_t last_ms;
    /* fault injection (tests): every k-th data datagram dropped / sent twice / swapped with the
     * next; every k-th result dropped on arrival. 0 = off. */
    uint32_t drop_every, dup_every, reorder_every, drop_result_every;
    uint64_t nsent, nrecv;
    uint32_t chunk_bytes; /* payload per datagram; all ranks of a job must use the same */
    uint8_t (*rb)[INA_DGRAM]; /* receive batch, allocated at registration */
    /* retransmission timer (RFC 6298 style on the chunk round trip) */
    double srtt_us, rttvar_us;
    int64_t min_rto_us, max_rto_us;
    /* the floor of the tail probe's timeout (INA_PROBE_MIN_US); 0 turns it off */
    int64_t probe_min_us;
    ina_cli_stats_t st;
    /* elements of the last allreduce's buffer final at its return, from the start: all of
     * them after success; after a failure, up to the lowest chunk still without a result
     * (a re-run elsewhere need not redo them) */
    int64_t done_prefix;
    /* liveness (PING/PONG): the last answer, and what it said of the job's ranks; a rank
     * waits past the no-progress timeout only while the service answers and hears every
     * rank (someone is just late), and at most late_ms */
    int64_t pong_us, late_ms;
    uint32_t peers_age_ms;
    uint16_t oldest_rank, pong_flags;
    uint16_t srv_version; /* the service's protocol version (1: allreduce only) */
    /* before sleeping in poll() for results, keep looking this long (poll 0 +
     * sched_yield) when the whole collective fits the window: a small collective's result
     * comes back within one round trip, and a wake-up from poll() costs a good part of it
     * (NEZHA_SPIN_US); 0 sleeps at once */
    int64_t spin_us;
    char err[256];
} ina_client_t;

static int ina_cli_fail(ina_client_t *c, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return rc;
}

static void ina_client_init(ina_client_t *c) {
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->min_rto_us = 5000;
    c->max_rto_us = 200000;
    c->probe_min_us = INA_PROBE_MIN_US;
    c->late_ms = 60000;
}

/* A header-only datagram of the registered job (PING, BYE), sent without waiting. */
static int ina_cli_note(ina_client_t *c, int type) {
    if (c->fd < 0 || !c->token) return -ENOTCONN;
    ina_hdr_t h;
    memset(&h, 0, sizeof h);
    h.magic = INA_MAGIC;
    h.type = (uint8_t)type;
    h.token = c->token;
    h.rank = c->rank;
    if (send(c->fd, &h, sizeof h, MSG_DONTWAIT) < 0) return -errno;
    return 0;
}

/* A heartbeat to the service (any thread; one datagram, no wait): it tells the others that
 * this rank is alive and reaches the service, also while it is not in a collective. */
static int ina_client_ping(ina_client_t *c) { return ina_cli_note(c, INA_T_PING); }

/* Round trips to the service: n PINGs one after another, each answered by a PONG that
 * echoes its seq (INA_RTT_SEQ | i); out_us[i] the i-th's microseconds. Header-only
 * datagrams, so a round trip without a chunk's serialization (the window adds that).
 * Call it with no collective running on the client (the registration's thread). The
 * number of answers (a lost PING or PONG waits ms_each and counts nothing), or -errno. */
#define INA_RTT_SEQ 0x80000000u
static int ina_client_rtt(ina_client_t *c, int n, int ms_each, double *out_us) {
    if (c->fd < 0 || !c->token) return -ENOTCONN;
    int got = 0;
    uint8_t buf[INA_DGRAM];
    for (int i = 0; i < n; i++) {
        ina_hdr_t h;
        memset(&h, 0, sizeof h);
        h.magic = INA_MAGIC;
        h.type = INA_T_PING;
        h.token = c->token;
        h.rank = c->rank;
        h.seq = INA_RTT_SEQ | (uint32_t)i;
        int64_t t0 = ina_now_us(), end = t0 + (int64_t)ms_each * 1000;
        if (send(c->fd, &h, sizeof h, 0) < 0) return -errno;
        for (;;) {
            int64_t now = ina_now_us();
            if (now >= end) break;
            struct pollfd pf = {c->fd, POLLIN, 0};
            int r = poll(&pf, 1, (int)((end - now + 999) / 1000));
            if (r < 0 && errno != EINTR) return -errno;
            if (r <= 0) continue;
            ssize_t len = recv(c->fd, buf, INA_DGRAM, MSG_DONTWAIT);
            if (len < 0) {
                if (errno == EAGAIN || errno == EINTR) continue;
                return -errno;
            }
            ina_hdr_t r_;
            if ((size_t)len < sizeof r_) continue;
            memcpy(&r_, buf, sizeof r_);
            if (r_.magic == INA_MAGIC && r_.type == INA_T_PONG && r_.token == c->token &&
                r_.seq == h.seq) {
                out_us[got++] = (double)(ina_now_us() - t0);
                break;
            }
        }
    }
    return got;
}

static void ina_client_close(ina_client_t *c) {
    ina_cli_note(c, INA_T_BYE);
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->token = 0;
    free(c->use);
    c->use = NULL;
    free(c->rb);
    c->rb = NULL;
}

static int ina_cli_send(ina_client_t *c, int type, const void *body, size_t n) {
    uint8_t buf[INA_DGRAM];
    ina_hdr_t h;
    memset(&h, 0, sizeof h);
    h.magic = INA_MAGIC;
    h.type = (uint8_t)type;
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, body, n);
    if (send(c->fd, buf, sizeof h + n, 0) < 0) return -errno;
    return 0;
}

/* Wait up to ms for a datagram of one of two types; 0 and its body, -ETIMEDOUT, or -errno. */
static int ina_cli_wait(ina_client_t *c, int t1, int t2, int ms, uint8_t *buf, size_t *n, int *type) {
    int64_t end = ina_now_ms() + ms;
    for (;;) {
        int left = (int)(end - ina_now_ms());
        if (left < 0) return -ETIMEDOUT;
        struct pollfd pf = {c->fd, POLLIN, 0};
        int r = poll(&pf, 1, left);
        if (r < 0 && errno != EINTR) return -errno;
        if (r <= 0) continue;
        ssize_t got = recv(c->fd, buf, INA_DGRAM, MSG_DONTWAIT);
        if (got < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            return -errno;
        }
        ina_hdr_t h;
        if ((size_t)got < sizeof h) continue;
        memcpy(&h, buf, sizeof h);
        if (h.magic != INA_MAGIC) continue;
        if (h.type == t1 || h.type == t2 || h.type == INA_T_REFUSE) {
            *type = h.type;
            *n = (size_t)got - sizeof h;
            memmove(buf, buf + sizeof h, *n);
            return 0;
        }
    }
}

/* Register rank `rank` of `nranks` of the job (id, key) with the service at addr:port.
 * want_slots 0 = the service's quota. Retries (HELLO every 100-800 ms, and while the slot
 * pool is full) until timeout_ms. 0, or -errno with c->err set. */
static int ina_client_register(ina_client_t *c, const char *addr, int port, const uint8_t id[16],
                               const uint8_t key[32], int rank, int nranks, int want_slots,
                               int timeout_ms) {
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    snprintf(c->where, sizeof c->where, "%s:%d", addr, port);
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
        return ina_cli_fail(c, -EINVAL, "bad INA service address %s (IPv4 address:port)", c->where);
    if (rank < 0 || nranks < 1 || nranks > INA_MAX_RANKS || rank >= nranks)
        return ina_cli_fail(c, -EINVAL, "rank %d of %d: the INA service takes 1..%d ranks", rank, nranks,
                            INA_MAX_RANKS);
    memcpy(c->id, id, 16);
    memcpy(c->key, key, 32);
    if (c->fd < 0) {
        c->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0) return ina_cli_fail(c, -errno, "socket: %s", strerror(errno));
        ina_bigbuf(c->fd, 4 << 20);
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0)
            return ina_cli_fail(c, -errno, "INA service %s: connect: %s", c->where, strerror(errno));
    }
    if (!c->rb && !(c->rb = malloc((size_t)INA_RX_BATCH * INA_DGRAM)))
        return ina_cli_fail(c, -ENOMEM, "out of memory");
    if (c->chunk_bytes == 0) { /* from the route's MTU: one datagram per frame, no IP fragments */
        int mtu = 1500;
        socklen_t ml = sizeof mtu;
        if (getsockopt(c->fd, IPPROTO_IP, IP_MTU, &mtu, &ml) < 0) mtu = 1500;
        c->chunk_bytes = ina_mtu_chunk(mtu);
    }
    if (c->chunk_bytes % 8 || c->chunk_bytes < 8 || c->chunk_bytes > INA_MAX_PAYLOAD)
        return ina_cli_fail(c, -EINVAL, "INA chunk of %u bytes: a multiple of 8 in 8..%d", c->chunk_bytes,
                            INA_MAX_PAYLOAD);
    ina_hello_t hello;
    memset(&hello, 0, sizeof hello);
    memcpy(hello.id, id, 16);
    hello.rank = (uint16_t)rank;
    hello.nranks = (uint16_t)nranks;
    hello.want_slots = (uint16_t)want_slots;
    int64_t end = ina_now_ms() + timeout_ms;
    int step = 100, busy = 0;
    uint8_t buf[INA_DGRAM];
    size_t n;
    int type, rc;
    char refused[220] = "";
    while (ina_now_ms() < end) {
        int left = (int)(end - ina_now_ms());
        int wait = step < left ? step : left;
        if ((rc = ina_cli_send(c, INA_T_HELLO, &hello, sizeof hello)) < 0) goto neterr;
        rc = ina_cli_wait(c, INA_T_CHALLENGE, INA_T_CHALLENGE, wait, buf, &n, &type);
        if (rc == -ETIMEDOUT) { step = step * 2 > 800 ? 800 : step * 2; continue; }
        if (rc < 0) goto neterr;
        if (type == INA_T_REFUSE) continue;
        if (n < sizeof(ina_challenge_t)) continue;
        ina_challenge_t ch;
        memcpy(&ch, buf, sizeof ch);
        if (memcmp(ch.id, id, 16) != 0) continue;
        ina_auth_t a;
        memset(&a, 0, sizeof a);
        a.h = hello;
        memcpy(a.nonce_s, ch.nonce, 16);
        if (getrandom(a.nonce_c, 16, 0) != 16) return ina_cli_fail(c, -EIO, "getrandom failed");
        if (ch.want_key) { memcpy(a.key, key, 32); a.has_key = 1; }
        ina_auth_mac(key, &a, a.mac);
        if ((rc = ina_cli_send(c, INA_T_AUTH, &a, sizeof a)) < 0) goto neterr;
        left = (int)(end - ina_now_ms());
        rc = ina_cli_wait(c, INA_T_WELCOME, INA_T_WELCOME, step < left ? step : (left > 0 ? left : 0),
                          buf, &n, &type);
        if (rc == -ETIMEDOUT) continue;
        if (rc < 0) goto neterr;
        if (type == INA_T_REFUSE) {
            ina_refuse_t rf;
            memset(&rf, 0, sizeof rf);
            memcpy(&rf, buf, n < sizeof rf ? n : sizeof rf);
            rf.text[sizeof rf.text - 1] = 0;
            snprintf(refused, sizeof refused, "%s", rf.text);
            if (rf.code == INA_REFUSE_BUSY) { /* wait for slots */
                busy = 1;
                struct timespec ts = {0, 50 * 1000000};
                nanosleep(&ts, NULL);
                continue;
            }
            return ina_cli_fail(c, rf.code == INA_REFUSE_BADARG ? -EINVAL : -EACCES,
                                "INA service %s refused rank %d: %s", c->where, rank, rf.text);
        }
        if (n < sizeof(ina_welcome_t)) continue;
        ina_welcome_t w;
        uint8_t mac[32];
        memcpy(&w, buf, sizeof w);
        ina_welcome_mac(key, a.nonce_c, &w, mac);
        if (!ina_ct_equal(mac, w.mac, 32))
            return ina_cli_fail(c, -EACCES, "INA service %s answered without proof of the job key", c->where);
        if (w.nslots < 1) return ina_cli_fail(c, -EPROTO, "INA service %s gave no slots", c->where);
        c->token = w.token;
        c->rank = w.rank;
        c->nranks = w.nranks;
        if (c->nslots != w.nslots || !c->use) {
            free(c->use);
            c->use = (uint32_t *)calloc(w.nslots, sizeof(uint32_t));
            if (!c->use) return ina_cli_fail(c, -ENOMEM, "out of memory");
        }
        c->nslots = w.nslots;
        c->srv_version = w.version ? w.version : 1;
        c->job_timeout_ms = w.job_timeout_ms;
        c->last_ms = ina_now_ms();
        return 0;
    }
    if (busy)
        return ina_cli_fail(c, -EBUSY, "INA service %s: slot pool stayed full for %.1f s (%s)", c->where,
                            timeout_ms / 1000.0, refused);
    return ina_cli_fail(c, -ETIMEDOUT, "no answer from an INA service at %s within %.1f s", c->where,
                        timeout_ms / 1000.0);
neterr:
    if (rc == -ECONNREFUSED)
        return ina_cli_fail(c, rc, "no INA service at %s (connection refused: nothing listens there)",
                            c->where);
    return ina_cli_fail(c, rc, "INA service %s: %s", c->where, strerror(-rc));
}

typedef struct {
    int64_t chunk;       /* chunk in flight on this slot, -1 when idle */
    int64_t sent_us;     /* first transmission (for the RTT sample) */
    int64_t deadline_us; /* next retransmission */
    int64_t rto_us;
    uint64_t stamp;      /* order of the last transmission among this call's */
    int64_t tx_us;       /* last transmission */
    int tries;
    int probed;          /* the tail probe resent this chunk */
} ina_slotstate_t;

/* Fast retransmit: a chunk still without result when results came for chunks sent two
 * windows + INA_DUPTHRESH transmissions after it was probably lost (or its result was):
 * resend it without waiting for the timer, once per chunk (then the timer). Results do not
 * come back in this rank's sending order: a chunk completes when the slowest rank sends it,
 * and a loss on one rank delays its slot there, so the ranks' slots drift apart; with a
 * threshold of 3 (TCP's) half the resends were spurious at 1 % loss (docs/ina.md). A
 * message that fits one window keeps the threshold of 3. */
#define INA_DUPTHRESH 3


#define INA_TX_BATCH 64

typedef struct {
    struct mmsghdr msg[INA_TX_BATCH + 1];
    struct iovec iov[INA_TX_BATCH + 1][2];
    ina_hdr_t hdr[INA_TX_BATCH + 1];
    int n;
} ina_txq_t;

static int64_t ina_cli_rto(ina_client_t *c) {
    if (c->srtt_us <= 0) return 20000; /* before any sample */
    int64_t r = (int64_t)(c->srtt_us + 4 * c->rttvar_us);
    if (r < c->min_rto_us) r = c->min_rto_us;
    if (r > c->max_rto_us) r = c->max_rto_us;
    return r;
}

static void ina_cli_rtt_sample(ina_client_t *c, double us) {
    if (c->srtt_us <= 0) {
        c->srtt_us = us;
        c->rttvar_us = us / 2;
    } else {
        double d = us - c->srtt_us;
        c->rttvar_us = 0.75 * c->rttvar_us + 0.25 * (d < 0 ? -d : d);
        c->srtt_us = 0.875 * c->srtt_us + 0.125 * us;
    }
}

static int ina_txq_flush(ina_client_t *c, ina_txq_t *q) {
    int off = 0;
    if (c->reorder_every && q->n >= 2) {
        /* swap every k-th datagram with its successor (a network that reorders) */
        for (int i = 0; i + 1 < q->n; i++)
            if (++c->nsent % c->reorder_every == 0) {
                struct mmsghdr t = q->msg[i]; q->msg[i] = q->msg[i + 1]; q->msg[i + 1] = t;
                c->st.fault_reordered++;
                i++;
            }
    }
    while (off < q->n) {
        int r = sendmmsg(c->fd, q->msg + off, (unsigned)(q->n - off), 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == ENOBUFS) { off++; continue; } /* lost: resent on timeout */
            int e = errno;
            q->n = 0;
            return -e;
        }
        c->st.tx += (uint64_t)r;
        off += r;
    }
    q->n = 0;
    return 0;
}

static int ina_txq_add(ina_client_t *c, ina_txq_t *q, const ina_hdr_t *h, void *payload, size_t plen) {
    int copies = 1;
    c->nsent++;
    if (c->drop_every && c->nsent % c->drop_every == 0) {
        c->st.fault_dropped++;
        return 0;
    }
    if (c->dup_every && c->nsent % c->dup_every == 0) {
        copies = 2;
        c->st.fault_duplicated++;
    }
    for (int k = 0; k < copies; k++) {
        if (q->n >= INA_TX_BATCH) {
            int rc = ina_txq_flush(c, q);
            if (rc < 0) return rc;
        }
        int i = q->n++;
        q->hdr[i] = *h;
        q->iov[i][0].iov_base = &q->hdr[i];
        q->iov[i][0].iov_len = sizeof(ina_hdr_t);
        q->iov[i][1].iov_base = payload;
        q->iov[i][1].iov_len = plen;
        memset(&q->msg[i], 0, sizeof q->msg[i]);
        q->msg[i].msg_hdr.msg_iov = q->iov[i];
        q->msg[i].msg_hdr.msg_iovlen = 2;
    }
    return 0;
}

/* What one collective moves, chunk by chunk. The range [lo, hi) of each of nb blocks is
 * cut in chunks of ce elements; chunk j is piece j / nb of block j % nb, so consecutive
 * chunks belong to different blocks and every rank's share of the results (reduce_scatter)
 * or of the sending (allgather) is spread over the window, not one block after another.
 *   allreduce       nb 1; send = recv (in place)
 *   reduce_scatter  nb ranks; every block sent (send + b * sstride), only this rank's
 *                   block's results come back with values (into recv, one block)
 *   allgather       nb ranks; only this rank's block sent (send, one block), every block's
 *                   results come back (recv + b * rstride) */
typedef struct {
    int kind, nb, me;
    const uint8_t *send;
    uint8_t *recv;
    size_t es, ce, len, sstride, rstride; /* strides in bytes; len elements per block */
} ina_geom_t;

/* Chunk j: its block, element count, and where its values come from / go (NULL: none). */
static void ina_geom_chunk(const ina_geom_t *g, int64_t j, int *blk, size_t *n, const uint8_t **sp,
                           uint8_t **rp) {
    int b = (int)(j % g->nb);
    size_t off = (size_t)(j / g->nb) * g->ce;
    *blk = b;
    *n = g->len - off < g->ce ? g->len - off : g->ce;
    *sp = g->kind == INA_K_ALLGATHER && b != g->me ? NULL : g->send + b * g->sstride + off * g->es;
    *rp = g->kind == INA_K_REDUCE_SCATTER && b != g->me ? NULL : g->recv + b * g->rstride + off * g->es;
}

/* One collective over the service (geometry g, see ina_geom_t), `window` slots in flight.
 * Every rank of the job calls it with the same geometry (but its own buffers), dtype, op
 * and window, in the same order. No progress for timeout_ms -> -ETIMEDOUT. 0, or -errno
 * with c->err set. After an error the client's slot use numbers may disagree with the
 * other ranks': close it. c->done_prefix: elements of each block's range final here. */
static int ina_client_coll(ina_client_t *c, ina_geom_t *g, int dtype, int op, int window,
                           int timeout_ms) {
    if (c->fd < 0 || !c->token) return ina_cli_fail(c, -ENOTCONN, "INA client is not registered");
    if (g->kind != INA_K_ALLGATHER && !ina_reduce_support(dtype, op))
        return ina_cli_fail(c, -EOPNOTSUPP, "INA cannot reduce dtype %d with op %d", dtype, op);
    if (g->kind != INA_K_ALLREDUCE && c->srv_version < 2)
        return ina_cli_fail(c, -EOPNOTSUPP, "INA service %s speaks protocol version %d: "
                            "allreduce only", c->where, (int)c->srv_version);
    if (!nezha_dtype_size(dtype)) return ina_cli_fail(c, -EINVAL, "unknown dtype %d", dtype);
    c->seq++;
    c->st.collectives++;
    c->done_prefix = 0;
    c->pong_us = 0;  /* only answers to this call's PINGs count */
    c->pong_flags = 0;
    if (g->len == 0) return 0;
    size_t es = nezha_dtype_size(dtype), ce = ina_chunk_elems(dtype, c->chunk_bytes), count = g->len;
    g->es = es;
    g->ce = ce;
    int64_t nch = (int64_t)((count + ce - 1) / ce) * g->nb;
    if ((uint64_t)nch > 0xffffffffull) return ina_cli_fail(c, -EMSGSIZE, "message too large for INA");
    int W = window < 1 ? 1 : window;
    if (W > c->nslots) W = c->nslots;
    if (W > nch) W = (int)nch;
    ina_slotstate_t *ss = (ina_slotstate_t *)calloc((size_t)W, sizeof *ss);
    ina_txq_t *q = (ina_txq_t *)calloc(1, sizeof *q);
    uint8_t(*rb)[INA_DGRAM] = c->rb;
    struct mmsghdr *rm = (struct mmsghdr *)calloc(INA_RX_BATCH, sizeof *rm);
    struct iovec *ri = (struct iovec *)calloc(INA_RX_BATCH, sizeof *ri);
    int rc = 0;
    if (!ss || !q || !rb || !rm || !ri) { rc = ina_cli_fail(c, -ENOMEM, "out of memory"); goto out; }
    int64_t done = 0, now = ina_now_us(), last_progress = now, last_ping = now;
    /* waiting without results: ask the service who it hears (PING) this often */
    int64_t ping_us = timeout_ms * 250 < 20000 ? timeout_ms * 250 : 20000;
    uint64_t stamp = 0, done_stamp = 0;
    /* the message in one window: every chunk is sent at once and results come back in about
     * that order; else the slots drift apart between ranks (see INA_DUPTHRESH) */
    uint64_t fr_thresh = INA_DUPTHRESH + (nch <= W ? 0 : 2 * (uint64_t)W);
    ina_hdr_t h;
    memset(&h, 0, sizeof h);
    h.magic = INA_MAGIC;
    h.type = INA_T_DATA;
    h.dtype = (uint8_t)dtype;
    h.op = (uint8_t)op;
    h.token = c->token;
    h.rank = c->rank;
    h.seq = c->seq;
    h.flags = (uint8_t)g->kind;
    int blk_;
    size_t n_;
    const uint8_t *sp_;
    uint8_t *rp_;
#define INA_SEND_CHUNK(s, ch, first)                                                           \
    do {                                                                                       \
        ina_geom_chunk(g, (ch), &blk_, &n_, &sp_, &rp_);                                       \
        h.slot = (uint16_t)(s);                                                                \
        h.use = c->use[s];                                                                     \
        h.chunk = (uint32_t)(ch);                                                              \
        h.nelem = (uint16_t)n_;                                                                \
        h.owner = (uint16_t)blk_;                                                              \
        if ((rc = ina_txq_add(c, q, &h, (void *)sp_, sp_ ? n_ * es : 0)) < 0) goto neterr;     \
        if (first) {                                                                           \
            ss[s].sent_us = now; ss[s].tries = 0; ss[s].probed = 0;                            \
            ss[s].rto_us = ina_cli_rto(c);                                                     \
        }                                                                                      \
        ss[s].deadline_us = now + ss[s].rto_us;                                                \
        ss[s].tx_us = now;                                                                     \
        ss[s].stamp = ++stamp;                                                                 \
    } while (0)
    for (int s = 0; s < W; s++) {
        ss[s].chunk = s;
        INA_SEND_CHUNK(s, s, 1);
    }
    for (int i = 0; i < INA_RX_BATCH; i++) {
        ri[i].iov_base = rb[i];
        ri[i].iov_len = INA_DGRAM;
    }
    while (done < nch) {
        if ((rc = ina_txq_flush(c, q)) < 0) goto neterr;
        now = ina_now_us();
        int64_t next = now + ping_us; /* at least this often: the PING of a waiting rank */
        int64_t pto = 0; /* the tail probe's timeout (INA_PROBE_MIN_US), 0: off */
        if (c->probe_min_us > 0) {
            pto = (int64_t)(2 * c->srtt_us);
            if (pto < c->probe_min_us) pto = c->probe_min_us;
        }
        for (int s = 0; s < W; s++) {
            if (ss[s].chunk < 0) continue;
            if (ss[s].deadline_us < next) next = ss[s].deadline_us;
            if (pto && !ss[s].probed) {
                int64_t at = (last_progress > ss[s].tx_us ? last_progress : ss[s].tx_us) + pto;
                if (at < next) next = at;
            }
        }
        int wait_ms = next > now ? (int)((next - now + 999) / 1000) : 0;
        struct pollfd pf = {c->fd, POLLIN, 0};
        int pr = 0;
        /* spin only while the whole message is in flight (latency-bound: a small
         * collective); a large one's thread sleeps, leaving the CPU to the TCP rails' */
        if (c->spin_us > 0 && wait_ms > 0 && nch <= W) {
            int64_t until = now + c->spin_us < next ? now + c->spin_us : next;
            while ((pr = poll(&pf, 1, 0)) == 0 && ina_now_us() < until) sched_yield();
            if (pr == 0) {
                int64_t t = ina_now_us();
                wait_ms = next > t ? (int)((next - t + 999) / 1000) : 0;
            }
        }
        if (pr == 0) pr = poll(&pf, 1, wait_ms);
        if (pr < 0 && errno != EINTR) { rc = -errno; goto neterr; }
        now = ina_now_us();
        if (pr > 0) {
            for (;;) {
                for (int i = 0; i < INA_RX_BATCH; i++) {
                    memset(&rm[i].msg_hdr, 0, sizeof rm[i].msg_hdr);
                    rm[i].msg_hdr.msg_iov = &ri[i];
                    rm[i].msg_hdr.msg_iovlen = 1;
                }
                int got = recvmmsg(c->fd, rm, INA_RX_BATCH, MSG_DONTWAIT, NULL);
                if (got < 0) {
                    if (errno == EAGAIN || errno == EINTR) break;
                    rc = -errno;
                    goto neterr;
                }
                for (int i = 0; i < got; i++) {
                    ina_hdr_t r;
                    size_t n = rm[i].msg_len;
                    c->st.rx++;
                    if (n < sizeof r) continue;
                    memcpy(&r, rb[i], sizeof r);
                    if (r.magic == INA_MAGIC && r.type == INA_T_PONG && r.token == c->token) {
                        c->pong_us = now;
                        c->peers_age_ms = r.chunk;
                        c->oldest_rank = r.slot;
                        c->pong_flags = r.flags;
                        continue;
                    }
                    if (r.magic != INA_MAGIC || r.type != INA_T_RESULT || r.token != c->token ||
                        r.seq != c->seq || r.slot >= W) {
                        c->st.stale_results++;
                        continue;
                    }
                    ina_slotstate_t *st = &ss[r.slot];
                    if (st->chunk < 0 || r.chunk != (uint32_t)st->chunk || r.use != c->use[r.slot]) {
                        c->st.stale_results++;
                        continue;
                    }
                    if (c->drop_result_every && ++c->nrecv % c->drop_result_every == 0) {
                        c->st.fault_results_dropped++;
                        continue;
                    }
                    int rblk;
                    size_t ne;
                    const uint8_t *rsp;
                    uint8_t *rrp;
                    ina_geom_chunk(g, r.chunk, &rblk, &ne, &rsp, &rrp);
                    if (r.nelem != ne || r.owner != (g->kind ? rblk : 0) ||
                        (r.flags & INA_F_KIND) != g->kind || n - sizeof r != (rrp ? ne * es : 0)) {
                        c->st.stale_results++;
                        continue;
                    }
                    if (rrp) {
                        memcpy(rrp, rb[i] + sizeof r, ne * es);
                        c->st.result_bytes += ne * es;
                    }
                    if (st->tries == 0) ina_cli_rtt_sample(c, (double)(now - st->sent_us));
                    if (st->stamp > done_stamp) done_stamp = st->stamp;
                    done++;
                    last_progress = now;
                    c->use[r.slot]++;
                    int64_t nx = st->chunk + W;
                    if (nx < nch) {
                        st->chunk = nx;
                        INA_SEND_CHUNK(r.slot, nx, 1);
                    } else {
                        st->chunk = -1;
                    }
                }
                if (got < INA_RX_BATCH) break;
            }
        }
        for (int s = 0; s < W; s++) {
            if (ss[s].chunk >= 0 && ss[s].tries == 0 && ss[s].stamp + fr_thresh < done_stamp) {
                ss[s].tries++;
                c->st.fast_retrans++;
                INA_SEND_CHUNK(s, ss[s].chunk, 0);
            }
            if (pto && ss[s].chunk >= 0 && !ss[s].probed &&
                now >= (last_progress > ss[s].tx_us ? last_progress : ss[s].tx_us) + pto) {
                /* no result at all for the probe timeout (INA_PROBE_MIN_US) */
                ss[s].probed = 1;
                ss[s].tries++;
                c->st.tail_probes++;
                INA_SEND_CHUNK(s, ss[s].chunk, 0);
                continue;
            }
            if (ss[s].chunk < 0 || ss[s].deadline_us > now) continue;
            /* no result in time: send the same contribution again, with backoff */
            ss[s].tries++;
            ss[s].rto_us = ss[s].rto_us * 2 > c->max_rto_us ? c->max_rto_us : ss[s].rto_us * 2;
            c->st.retrans++;
            INA_SEND_CHUNK(s, ss[s].chunk, 0);
        }
        if (now - last_progress > ping_us && now - last_ping > ping_us) {
            ina_client_ping(c);
            last_ping = now;
        }
        if (now - last_progress > (int64_t)timeout_ms * 1000) {
            int answers = now - c->pong_us <= (int64_t)timeout_ms * 1000;
            int hears = c->peers_age_ms <= (uint32_t)timeout_ms;
            int agree = !(c->pong_flags & INA_F_MISMATCH);
            if (answers && hears && agree && now - last_progress <= c->late_ms * 1000)
                continue; /* every rank reaches the service: one is only late */
            c->st.timeouts++;
            if (answers && !agree)
                rc = ina_cli_fail(c, -ETIMEDOUT, "INA service %s: the ranks of the job disagree "
                                  "on this collective (element count, dtype or op): the service "
                                  "keeps them apart and no result can come", c->where);
            else if (!answers)
                rc = ina_cli_fail(c, -ETIMEDOUT, "INA service %s: no result and no answer for "
                                  "%.3g s (%lld of %lld chunks done): the service or the path to "
                                  "it is gone", c->where, (now - last_progress) / 1e6,
                                  (long long)done, (long long)nch);
            else if (!hears)
                rc = ina_cli_fail(c, -ETIMEDOUT, "INA service %s: rank %d of the job not heard "
                                  "for %.3g s (%lld of %lld chunks done): its path to the "
                                  "service or the rank is gone", c->where, (int)c->oldest_rank,
                                  c->peers_age_ms / 1e3, (long long)done, (long long)nch);
            else
                rc = ina_cli_fail(c, -ETIMEDOUT, "INA service %s: no result for %.3g s while "
                                  "every rank reaches it (%lld of %lld chunks done): a rank is "
                                  "late by more than the timeout", c->where,
                                  (now - last_progress) / 1e6, (long long)done, (long long)nch);
            goto out;
        }
    }
#undef INA_SEND_CHUNK
    c->last_ms = ina_now_ms();
    c->done_prefix = (int64_t)count;
    goto out;
neterr:
    if (rc == -ECONNREFUSED)
        ina_cli_fail(c, rc, "INA service %s is gone (connection refused)", c->where);
    else
        ina_cli_fail(c, rc, "INA service %s: %s", c->where, strerror(-rc));
out:
    if (rc < 0 && ss) {  /* slot s holds chunks s, s+W, ...: all below its current one are done */
        int64_t low = nch;
        for (int s = 0; s < W; s++)
            if (ss[s].chunk >= 0 && ss[s].chunk < low) low = ss[s].chunk;
        /* chunks below low are done: the first low / nb pieces of every block */
        uint64_t fin = (uint64_t)(low / g->nb) * ce;
        c->done_prefix = (int64_t)(fin < count ? fin : count);
    }
    free(ss);
    free(q);
    free(rm);
    free(ri);
    return rc;
}


/* Whether the job is surely still known to the service: registered, and not silent past
 * half the service's job timeout (after that the caller registers again first). */
static int ina_client_fresh(const ina_client_t *c) {
    return c->fd >= 0 && c->token &&
           (!c->job_timeout_ms || ina_now_ms() - c->last_ms <= (int64_t)c->job_timeout_ms / 2);
}

/* Allreduce count elements of buf in place (every rank the same count, dtype, op, window). */
static int ina_client_allreduce(ina_client_t *c, void *buf, size_t count, int dtype, int op,
                                int window, int timeout_ms) {
    ina_geom_t g = {INA_K_ALLREDUCE, 1, 0, (const uint8_t *)buf, (uint8_t *)buf, 0, 0, count, 0, 0};
    return ina_client_coll(c, &g, dtype, op, window, timeout_ms);
}

/* Reduce_scatter of elements [lo, hi) of every block: send holds nranks blocks of `block`
 * elements; this rank's block's [lo, hi) reduced lands at recv[lo, hi) (recv: one block).
 * Each rank sends its whole range once and gets back only its own block's results. */
static int ina_client_reduce_scatter(ina_client_t *c, const void *send, void *recv, size_t block,
                                     size_t lo, size_t hi, int dtype, int op, int window,
                                     int timeout_ms) {
    size_t es = nezha_dtype_size(dtype);
    ina_geom_t g = {INA_K_REDUCE_SCATTER, c->nranks, c->rank, (const uint8_t *)send + lo * es,
                    (uint8_t *)recv + lo * es, 0, 0, hi - lo, block * es, 0};
    return ina_client_coll(c, &g, dtype, op, window, timeout_ms);
}

/* Allgather of elements [lo, hi) of every block: send is this rank's block of `block`
 * elements, recv nranks blocks. Each rank sends its range once and gets every block's. */
static int ina_client_allgather(ina_client_t *c, const void *send, void *recv, size_t block,
                                size_t lo, size_t hi, int dtype, int window, int timeout_ms) {
    size_t es = nezha_dtype_size(dtype);
    ina_geom_t g = {INA_K_ALLGATHER, c->nranks, c->rank, (const uint8_t *)send + lo * es,
                    (uint8_t *)recv + lo * es, 0, 0, hi - lo, 0, block * es};
    return ina_client_coll(c, &g, dtype, NEZHA_OP_SUM, window, timeout_ms);
}

#endif /* NEZHA_INA_H */
