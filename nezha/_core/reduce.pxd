# Reduction kernels from include/nezha/nezha_reduce.h; `cimport` them from here.
# Aliasing: an output may be exactly one of the inputs; partial overlap is not allowed.
cdef extern from "nezha/nezha_reduce.h" nogil:
    # dst = dst OP src; 0, or -1 for an unsupported (dtype, op) pair.
    int nezha_reduce(void *dst, const void *src, size_t count, int dtype, int op)
    # out = a OP b; 0, or -1 for an unsupported (dtype, op) pair.
    int nezha_reduce3(void *out, const void *a, const void *b, size_t count, int dtype, int op)
    # buf /= divisor for floating dtypes; -1 for integers.
    int nezha_avg_finish(void *buf, size_t count, int dtype, double divisor)
