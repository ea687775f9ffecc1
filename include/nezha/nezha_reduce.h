/* Element-wise reduction kernels: dst = dst OP src over `count` elements.
 * Pure C (no Python); every function is static inline so each extension gets its own copy.
 *
 * Contract for all kernels:
 *  - Pointers need no particular alignment (the loads/stores go through 1-byte-aligned
 *    typedefs on GCC/Clang, so network buffers at odd offsets are fine).
 *  - Aliasing: an output may be *exactly* one (or both) of the inputs; partial overlap
 *    is not allowed (results would depend on the vector width).
 *  - Return 0, or -1 for an unsupported (dtype, op) pair or a bad enum. The check
 *    happens before any element is touched, also when count == 0.
 *
 * Semantics match numpy ufuncs on the same dtype:
 *  - integers: SUM/PROD wrap around (computed in an unsigned type: no signed-overflow UB);
 *  - MIN/MAX: np.minimum/np.maximum, i.e. a NaN in either operand gives NaN, and
 *    (a <= b) ? a : b otherwise. So min(+0, -0) is +0 as in numpy's scalar and float16
 *    loops (numpy's float32/float64 SIMD loops return the other zero);
 *  - float16/bfloat16: widen to float32, compute, round to nearest even. For two
 *    halves this is exactly numpy's float16 result (float32 has >= 2*11+2 bits, so the
 *    double rounding is innocuous). A NaN result is a quiet NaN, its payload may differ.
 *  - AVG combines like SUM (for any dtype); nezha_avg_finish divides at the end.
 *
 * Written as plain counted loops so gcc -O3 vectorises them (including the float16
 * conversions, which are branch-free bit manipulation rather than table lookups). On
 * baseline x86-64 (SSE2) only 64-bit integer MIN/MAX/PROD stay scalar: no such insns. */
#ifndef NEZHA_REDUCE_H
#define NEZHA_REDUCE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nezha/nezha_types.h"

#if defined(__GNUC__)
#define NZK_UNALIGNED(T) T __attribute__((aligned(1), may_alias))
#else /* other compilers: callers must pass element-aligned pointers */
#define NZK_UNALIGNED(T) T
#endif

/* Storage types as seen by the loops: may be unaligned, and may_alias because a buffer
 * can hold another type than the one we read it as (a torch bfloat16 read as uint16). */
typedef NZK_UNALIGNED(int8_t) nzk_i8;
typedef NZK_UNALIGNED(uint8_t) nzk_u8;
typedef NZK_UNALIGNED(int16_t) nzk_i16;
typedef NZK_UNALIGNED(uint16_t) nzk_u16;
typedef NZK_UNALIGNED(int32_t) nzk_i32;
typedef NZK_UNALIGNED(uint32_t) nzk_u32;
typedef NZK_UNALIGNED(int64_t) nzk_i64;
typedef NZK_UNALIGNED(uint64_t) nzk_u64;
typedef NZK_UNALIGNED(float) nzk_f32;
typedef NZK_UNALIGNED(double) nzk_f64;

/* ---- float32 <-> 16-bit float conversions (branch-free so they vectorise) ---- */

static inline uint32_t nzk_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float nzk_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* IEEE binary16 -> float32, exact (F. Giesen's "half_to_float_fast"). The selects are
 * written as masks: with ?: gcc sinks the float op into a branch, and then cannot
 * if-convert it (it might trap) and gives up vectorising. */
static inline float nzk_h2f(uint16_t h) {
    uint32_t em = (uint32_t)(h & 0x7fffu) << 13;  /* exponent+mantissa at float32 positions */
    uint32_t e = em & 0x0f800000u;                  /* the 5-bit half exponent */
    uint32_t norm = em + (112u << 23);              /* rebias 15 -> 127 */
    uint32_t infnan = em | 0x7f800000u;             /* exponent 31 -> 255, payload kept */
    /* subnormal m*2^-24: build 2^-14*(1+m/1024) and subtract 2^-14 (exact, no denormal math) */
    uint32_t sub = nzk_f32_bits(nzk_bits_f32(em + (113u << 23)) - nzk_bits_f32(113u << 23));
    uint32_t m_inf = 0u - (uint32_t)(e == 0x0f800000u), m_sub = 0u - (uint32_t)(e == 0);
    uint32_t u = (infnan & m_inf) | (sub & m_sub) | (norm & ~(m_inf | m_sub));
    return nzk_bits_f32(u | ((uint32_t)(h & 0x8000u) << 16));
}

/* float32 -> binary16, round to nearest even (Giesen's float_to_half_fast3_rtne).
 * Compares are on int32_t: every operand is < 2^31 and SSE2 only has signed compares. */
static inline uint16_t nzk_f2h(float f) {
    uint32_t u = nzk_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    int32_t a = (int32_t)(u & 0x7fffffffu);
    uint32_t big = a > 0x7f800000 ? 0x7e00u : 0x7c00u; /* >= 65536: Inf, NaN -> quiet NaN */
    /* < 2^-14 (subnormal/zero): adding 0.5 leaves the value rounded (RNE, by the FPU) to a
     * multiple of 2^-24 in the low mantissa bits; a carry into bit 10 gives the min normal. */
    uint32_t sub = nzk_f32_bits(nzk_bits_f32((uint32_t)a) + 0.5f) - 0x3f000000u;
    /* normal: rebias 127 -> 15 and round the 13 dropped bits to nearest even;
     * a carry out of the mantissa bumps the exponent, up to Inf (0x7c00) at 65520. */
    uint32_t norm = ((uint32_t)a - (112u << 23) + 0xfffu + (((uint32_t)a >> 13) & 1u)) >> 13;
    uint32_t m_big = 0u - (uint32_t)(a >= 0x47800000), m_sub = 0u - (uint32_t)(a < 0x38800000);
    uint32_t h = (big & m_big) | (sub & m_sub) | (norm & ~(m_big | m_sub));
    return (uint16_t)(h | sign);
}

/* bfloat16 is the top half of a float32. */
static inline float nzk_bf2f(uint16_t h) { return nzk_bits_f32((uint32_t)h << 16); }

/* float32 -> bfloat16, round to nearest even; overflow to Inf comes out right by itself.
 * A NaN gets no rounding increment (it could carry into Inf) and is made quiet. Written
 * so the result is the top half of a 32-bit lane: gcc narrows that cheaply, while a ?:
 * on the 16-bit result made the SSE2 loop ~1.4x slower. */
static inline uint16_t nzk_f2bf(float f) {
    uint32_t u = nzk_f32_bits(f);
    uint32_t m_nan = 0u - (uint32_t)((int32_t)(u & 0x7fffffffu) > 0x7f800000);
    uint32_t inc = (0x7fffu + ((u >> 16) & 1u)) & ~m_nan;
    return (uint16_t)(((u + inc) | (m_nan & 0x00400000u)) >> 16); /* bit 22: quiet */
}

/* ---- the ops, on the compute type C with wrap-around arithmetic type W ---- */

#define NZK_OP_SUM(C, W, x, y) ((C)((W)(x) + (W)(y)))
#define NZK_OP_PROD(C, W, x, y) ((C)((W)(x) * (W)(y)))
/* numpy's scalar_min_f/scalar_max_f; (x != x) folds away for integers. */
#define NZK_OP_MIN(C, W, x, y) (((x) <= (y) || (x) != (x)) ? (x) : (y))
#define NZK_OP_MAX(C, W, x, y) (((x) >= (y) || (x) != (x)) ? (x) : (y))
#define NZK_OP_BAND(C, W, x, y) ((C)((x) & (y)))
#define NZK_OP_BOR(C, W, x, y) ((C)((x) | (y)))
#define NZK_OP_BXOR(C, W, x, y) ((C)((x) ^ (y)))

#define NZK_ID(v) (v)

/* One kernel per (dtype, op). Four loops, so each can promise the compiler what is true:
 * out distinct from a and b (all restrict; a == b is fine since both are only read),
 * out == a, out == b (operand order kept: min/max of NaNs and zeros is not symmetric),
 * and out == a == b. */
#define NZK_BODY(S, C, W, LD, ST, OP, o, x, y)                                          \
    for (size_t i = 0; i < n; i++) {                                                    \
        C xv = LD(x[i]), yv = LD(y[i]);                                                 \
        o[i] = ST(OP(C, W, xv, yv));                                                    \
    }

#define NZK_KERNEL(NAME, S, C, W, LD, ST, OP)                                           \
    static inline void nzk3_##NAME(S *restrict o, const S *restrict a,                  \
                                   const S *restrict b, size_t n) {                     \
        NZK_BODY(S, C, W, LD, ST, OP, o, a, b)                                          \
    }                                                                                   \
    static inline void nzkl_##NAME(S *restrict o, const S *restrict b, size_t n) {      \
        NZK_BODY(S, C, W, LD, ST, OP, o, o, b)                                          \
    }                                                                                   \
    static inline void nzkr_##NAME(S *restrict o, const S *restrict a, size_t n) {      \
        NZK_BODY(S, C, W, LD, ST, OP, o, a, o)                                          \
    }                                                                                   \
    static inline void nzks_##NAME(S *o, size_t n) {                                    \
        NZK_BODY(S, C, W, LD, ST, OP, o, o, o)                                          \
    }                                                                                   \
    static inline void nzk_##NAME(void *o, const void *a, const void *b, size_t n) {    \
        if (o == a && o == b) nzks_##NAME((S *)o, n);                                   \
        else if (o == a) nzkl_##NAME((S *)o, (const S *)b, n);                          \
        else if (o == b) nzkr_##NAME((S *)o, (const S *)a, n);                          \
        else nzk3_##NAME((S *)o, (const S *)a, (const S *)b, n);                        \
    }

/* dtype table: X(enum suffix, name, storage S, compute C, wrap type W, load, store) */
#define NZK_INT_TYPES(X)                                                                \
    X(INT8, i8, nzk_i8, int8_t, uint32_t, NZK_ID, NZK_ID)                               \
    X(UINT8, u8, nzk_u8, uint8_t, uint32_t, NZK_ID, NZK_ID)                             \
    X(INT16, i16, nzk_i16, int16_t, uint32_t, NZK_ID, NZK_ID)                           \
    X(UINT16, u16, nzk_u16, uint16_t, uint32_t, NZK_ID, NZK_ID)                         \
    X(INT32, i32, nzk_i32, int32_t, uint32_t, NZK_ID, NZK_ID)                           \
    X(UINT32, u32, nzk_u32, uint32_t, uint32_t, NZK_ID, NZK_ID)                         \
    X(INT64, i64, nzk_i64, int64_t, uint64_t, NZK_ID, NZK_ID)                           \
    X(UINT64, u64, nzk_u64, uint64_t, uint64_t, NZK_ID, NZK_ID)
#define NZK_FLOAT_TYPES(X)                                                              \
    X(FLOAT16, f16, nzk_u16, float, float, nzk_h2f, nzk_f2h)                            \
    X(BFLOAT16, bf16, nzk_u16, float, float, nzk_bf2f, nzk_f2bf)                        \
    X(FLOAT32, f32, nzk_f32, float, float, NZK_ID, NZK_ID)                              \
    X(FLOAT64, f64, nzk_f64, double, double, NZK_ID, NZK_ID)

#define NZK_COMMON_OPS(X, ...)                                                          \
    X(SUM, __VA_ARGS__) X(PROD, __VA_ARGS__) X(MIN, __VA_ARGS__) X(MAX, __VA_ARGS__)
#define NZK_BIT_OPS(X, ...) X(BAND, __VA_ARGS__) X(BOR, __VA_ARGS__) X(BXOR, __VA_ARGS__)

/* Stamp out the kernels: common ops for every dtype, bit ops for integers only. */
#define NZK_DEF(OPN, E, N, S, C, W, LD, ST) NZK_KERNEL(N##_##OPN, S, C, W, LD, ST, NZK_OP_##OPN)
#define NZK_DEF_INT(E, N, S, C, W, LD, ST)                                              \
    NZK_COMMON_OPS(NZK_DEF, E, N, S, C, W, LD, ST) NZK_BIT_OPS(NZK_DEF, E, N, S, C, W, LD, ST)
#define NZK_DEF_FLOAT(E, N, S, C, W, LD, ST) NZK_COMMON_OPS(NZK_DEF, E, N, S, C, W, LD, ST)
NZK_INT_TYPES(NZK_DEF_INT)
NZK_FLOAT_TYPES(NZK_DEF_FLOAT)

/* Dispatch: out = a OP b. */
#define NZK_CASE_OP(OPN, N)                                                             \
    case NEZHA_OP_##OPN: nzk_##N##_##OPN(out, a, b, count); return 0;
#define NZK_CASE_INT(E, N, S, C, W, LD, ST)                                             \
    case NEZHA_DT_##E:                                                                  \
        switch (op) {                                                                   \
            NZK_COMMON_OPS(NZK_CASE_OP, N) NZK_BIT_OPS(NZK_CASE_OP, N)                  \
            default: return -1;                                                         \
        }                                                                               \
        break;
#define NZK_CASE_FLOAT(E, N, S, C, W, LD, ST)                                           \
    case NEZHA_DT_##E:                                                                  \
        switch (op) { NZK_COMMON_OPS(NZK_CASE_OP, N) default: return -1; }              \
        break;

/* out = a OP b, elementwise. out may be a or b (or both) exactly; partial overlap of
 * out with an input is not allowed. */
static inline int nezha_reduce3(void *out, const void *a, const void *b, size_t count,
                                int dtype, int op) {
    if (op == NEZHA_OP_AVG) op = NEZHA_OP_SUM; /* AVG combines as SUM */
    switch (dtype) {
        NZK_INT_TYPES(NZK_CASE_INT)
        NZK_FLOAT_TYPES(NZK_CASE_FLOAT)
    default:
        break;
    }
    return -1;
}

/* dst = dst OP src, elementwise. dst and src are the same buffer or do not overlap. */
static inline int nezha_reduce(void *dst, const void *src, size_t count, int dtype, int op) {
    return nezha_reduce3(dst, dst, src, count, dtype, op);
}

/* buf /= divisor for floating dtypes (-1 for integers). The divisor is rounded to the
 * compute type (float for 16/32-bit floats, double for float64), so use an exactly
 * representable divisor (e.g. the rank count) to get numpy's correctly rounded result. */
#define NZK_AVG_LOOP(S, C, LD, ST) do {                                                 \
        S *p = (S *)buf; C d = (C)divisor;                                              \
        for (size_t i = 0; i < count; i++) p[i] = ST(LD(p[i]) / d);                     \
    } while (0)

static inline int nezha_avg_finish(void *buf, size_t count, int dtype, double divisor) {
    switch (dtype) {
    case NEZHA_DT_FLOAT16: NZK_AVG_LOOP(nzk_u16, float, nzk_h2f, nzk_f2h); return 0;
    case NEZHA_DT_BFLOAT16: NZK_AVG_LOOP(nzk_u16, float, nzk_bf2f, nzk_f2bf); return 0;
    case NEZHA_DT_FLOAT32: NZK_AVG_LOOP(nzk_f32, float, NZK_ID, NZK_ID); return 0;
    case NEZHA_DT_FLOAT64: NZK_AVG_LOOP(nzk_f64, double, NZK_ID, NZK_ID); return 0;
    default: return -1;
    }
}

#endif /* NEZHA_REDUCE_H */
