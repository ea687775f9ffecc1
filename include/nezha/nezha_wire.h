/* The per-collective header that opens every connection's stream for one collective.
 * Each side knows what it expects; a difference is a mismatch between ranks (size, dtype,
 * op, which collective comes next), raised on the spot instead of turning into a hang or a
 * wrong sum. Little-endian, fixed size. */
#ifndef NEZHA_WIRE_H
#define NEZHA_WIRE_H

#include <stdint.h>
#include <string.h>

#define NEZHA_WIRE_MAGIC 0x315A484Eu /* "NHZ1" */

typedef enum {
    NEZHA_COLL_ALLREDUCE = 1,
    NEZHA_COLL_BROADCAST = 2,
    NEZHA_COLL_REDUCE = 3,
    NEZHA_COLL_ALLGATHER = 4,
    NEZHA_COLL_REDUCE_SCATTER = 5,
    NEZHA_COLL_ALLTOALL = 6,
    NEZHA_COLL_BARRIER = 7,
    NEZHA_COLL_SENDRECV = 8
} nezha_coll_t;

typedef struct {
    uint32_t magic;
    uint32_t seq;       /* collective sequence number (per pair for send/recv) */
    uint8_t coll;       /* nezha_coll_t */
    uint8_t dtype;      /* nezha_dtype_t */
    uint8_t op;         /* nezha_op_t */
    uint8_t algo;       /* algorithm id chosen by the planner */
    int32_t root;
    uint64_t count;     /* elements of the whole collective as the caller gave them */
    uint32_t plan;      /* hash of the plan (rails, split); ranks must agree */
    int32_t src_rank;   /* sender; not compared */
} nezha_hdr_t;

/* Fields compared between what arrived and what was expected (all but src_rank). */
static inline int nezha_hdr_equal(const nezha_hdr_t *a, const nezha_hdr_t *b) {
    return a->magic == b->magic && a->seq == b->seq && a->coll == b->coll &&
           a->dtype == b->dtype && a->op == b->op && a->algo == b->algo &&
           a->root == b->root && a->count == b->count && a->plan == b->plan;
}

#endif
