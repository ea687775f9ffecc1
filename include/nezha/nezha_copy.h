/* nz_copy: memcpy for bulk copies between shared memory and user buffers.
 *
 * Why: glibc (2.36 here) copies 2 KiB - 512 KiB with `rep movsb`, and on AMD Zen cores
 * `rep movsb` runs 15-25x slower when the destination starts 1-31 bytes after the source
 * modulo 4 KiB (measured on this project's EPYC VM: 2.5 GB/s against 40 GB/s). A slot or
 * ring in a segment is page-aligned and a numpy array's data sits 16 bytes into its pages,
 * so every copy out of shared memory into an array hit it. Such copies take a plain vector
 * loop (25-35 GB/s); every other one stays memcpy. */
#ifndef NEZHA_COPY_H
#define NEZHA_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint8_t nz_cv16 __attribute__((vector_size(16), aligned(1)));

/* not turned back into a memcpy call by gcc's loop-idiom pass */
__attribute__((optimize("no-tree-loop-distribute-patterns"))) static inline void
nz_copy_loop(char *d, const char *s, size_t n) {
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        nz_cv16 a = *(const nz_cv16 *)(s + i), b = *(const nz_cv16 *)(s + i + 16);
        nz_cv16 c = *(const nz_cv16 *)(s + i + 32), e = *(const nz_cv16 *)(s + i + 48);
        *(nz_cv16 *)(d + i) = a;
        *(nz_cv16 *)(d + i + 16) = b;
        *(nz_cv16 *)(d + i + 32) = c;
        *(nz_cv16 *)(d + i + 48) = e;
    }
    memcpy(d + i, s + i, n - i); /* < 64 bytes: no rep movsb */
}

/* dst and src do not overlap */
static inline void nz_copy(void *dst, const void *src, size_t n) {
    uintptr_t dist = ((uintptr_t)dst - (uintptr_t)src) & 4095;
    if (n >= 2048 && dist - 1 < 63) nz_copy_loop((char *)dst, (const char *)src, n);
    else memcpy(dst, src, n);
}

#endif /* NEZHA_COPY_H */
