/* Shared enums for C and Cython: data types and reduction ops.
 * The numeric values are part of the wire header (see nezha_wire.h); never renumber. */
#ifndef NEZHA_TYPES_H
#define NEZHA_TYPES_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    NEZHA_DT_INT8 = 0,
    NEZHA_DT_UINT8 = 1,
    NEZHA_DT_INT16 = 2,
    NEZHA_DT_UINT16 = 3,
    NEZHA_DT_INT32 = 4,
    NEZHA_DT_UINT32 = 5,
    NEZHA_DT_INT64 = 6,
    NEZHA_DT_UINT64 = 7,
    NEZHA_DT_FLOAT16 = 8,
    NEZHA_DT_BFLOAT16 = 9,
    NEZHA_DT_FLOAT32 = 10,
    NEZHA_DT_FLOAT64 = 11,
    NEZHA_DT_COUNT = 12
} nezha_dtype_t;

typedef enum {
    NEZHA_OP_SUM = 0,
    NEZHA_OP_PROD = 1,
    NEZHA_OP_MIN = 2,
    NEZHA_OP_MAX = 3,
    NEZHA_OP_AVG = 4,   /* combined as SUM, divided by the rank count at the end */
    NEZHA_OP_BAND = 5,
    NEZHA_OP_BOR = 6,
    NEZHA_OP_BXOR = 7,
    NEZHA_OP_COUNT = 8
} nezha_op_t;

static inline size_t nezha_dtype_size(int dt) {
    static const unsigned char sz[NEZHA_DT_COUNT] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};
    return (dt >= 0 && dt < NEZHA_DT_COUNT) ? sz[dt] : 0;
}

static inline int nezha_dtype_is_float(int dt) {
    return dt == NEZHA_DT_FLOAT16 || dt == NEZHA_DT_BFLOAT16 ||
           dt == NEZHA_DT_FLOAT32 || dt == NEZHA_DT_FLOAT64;
}

#endif
