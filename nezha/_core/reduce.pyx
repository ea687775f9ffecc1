"""Python wrappers of the C reduction kernels (nezha/nezha_reduce.h) and of the shared-memory
copy (nezha/nezha_copy.h) for tests and benchmarks."""
# The extern declarations come from reduce.pxd (same module name, included automatically).
from cpython.buffer cimport (PyBUF_C_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_GetBuffer)
from libc.stdint cimport uintptr_t


cdef extern from "nezha/nezha_types.h" nogil:
    size_t nezha_dtype_size(int dt)

cdef extern from "nezha/nezha_copy.h" nogil:
    void nz_copy(void *dst, const void *src, size_t n)

_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
           "float16", "bfloat16", "float32", "float64")
_OPS = ("SUM", "PROD", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR")


cdef str _name(tuple names, int i):
    return names[i] if 0 <= i < len(names) else f"<invalid {i}>"


cdef size_t _itemsize(int dtype) except 0:
    cdef size_t size = nezha_dtype_size(dtype)
    if size == 0:
        raise ValueError(f"nezha: unknown dtype {dtype}")
    return size


cdef size_t _count(Py_buffer *view, size_t size, str what) except? 0:
    if <size_t>view.len % size:
        raise ValueError(
            f"nezha: {what} has {view.len} bytes, not a multiple of the item size {size}")
    return <size_t>view.len // size


cdef int _check_alias(Py_buffer *out, Py_buffer *inp, str what) except -1:
    # The kernels allow out to be an input exactly, or disjoint from it; never partial overlap.
    cdef uintptr_t o = <uintptr_t>out.buf, i = <uintptr_t>inp.buf
    if o != i and o < i + <uintptr_t>inp.len and i < o + <uintptr_t>out.len:
        raise ValueError(
            f"nezha: output partially overlaps {what}; it must be the same buffer or disjoint")
    return 0


cdef int _check_rc(int rc, int dtype, int op) except -1:
    if rc != 0:
        raise ValueError(
            f"nezha: op {_name(_OPS, op)} is not supported for dtype {_name(_DTYPES, dtype)}")
    return 0


def reduce(dst, src, int dtype, int op):
    """In place dst = dst OP src, elementwise; dst and src are the same buffer or disjoint."""
    cdef size_t size = _itemsize(dtype), count
    cdef Py_buffer d, s
    cdef int rc
    PyObject_GetBuffer(dst, &d, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
    try:
        PyObject_GetBuffer(src, &s, PyBUF_C_CONTIGUOUS)
        try:
            count = _count(&d, size, "dst")
            if s.len != d.len:
                raise ValueError(f"nezha: size mismatch: dst has {d.len} bytes, src {s.len}")
            _check_alias(&d, &s, "src")
            with nogil:
                rc = nezha_reduce(d.buf, s.buf, count, dtype, op)
            _check_rc(rc, dtype, op)
        finally:
            PyBuffer_Release(&s)
    finally:
        PyBuffer_Release(&d)


def reduce3(out, a, b, int dtype, int op):
    """out = a OP b, elementwise; out may be a or b exactly, but must not partially overlap them."""
    cdef size_t size = _itemsize(dtype), count
    cdef Py_buffer o, x, y
    cdef int rc
    PyObject_GetBuffer(out, &o, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
    try:
        PyObject_GetBuffer(a, &x, PyBUF_C_CONTIGUOUS)
        try:
            PyObject_GetBuffer(b, &y, PyBUF_C_CONTIGUOUS)
            try:
                count = _count(&o, size, "out")
                if x.len != o.len or y.len != o.len:
                    raise ValueError(
                        f"nezha: size mismatch: out has {o.len} bytes, a {x.len}, b {y.len}")
                _check_alias(&o, &x, "a")
                _check_alias(&o, &y, "b")
                with nogil:
                    rc = nezha_reduce3(o.buf, x.buf, y.buf, count, dtype, op)
                _check_rc(rc, dtype, op)
            finally:
                PyBuffer_Release(&y)
        finally:
            PyBuffer_Release(&x)
    finally:
        PyBuffer_Release(&o)


def avg_finish(buf, int dtype, double divisor):
    """In place buf /= divisor, elementwise, for floating dtypes (ValueError for integers)."""
    cdef size_t size = _itemsize(dtype), count
    cdef Py_buffer v
    cdef int rc
    PyObject_GetBuffer(buf, &v, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
    try:
        count = _count(&v, size, "buf")
        with nogil:
            rc = nezha_avg_finish(v.buf, count, dtype, divisor)
        if rc != 0:
            raise ValueError(
                f"nezha: AVG is defined for floating types only, not {_name(_DTYPES, dtype)}")
    finally:
        PyBuffer_Release(&v)


def copy(dst, src):
    """dst[:] = src with the shared-memory copy (nz_copy); disjoint buffers of one length."""
    cdef Py_buffer d, s
    PyObject_GetBuffer(dst, &d, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
    try:
        PyObject_GetBuffer(src, &s, PyBUF_C_CONTIGUOUS)
        try:
            if s.len != d.len:
                raise ValueError(f"nezha: size mismatch: dst has {d.len} bytes, src {s.len}")
            if <uintptr_t>d.buf < <uintptr_t>s.buf + <uintptr_t>s.len and \
                    <uintptr_t>s.buf < <uintptr_t>d.buf + <uintptr_t>d.len:
                raise ValueError("nezha: copy: dst and src overlap")
            with nogil:
                nz_copy(d.buf, s.buf, <size_t>d.len)
        finally:
            PyBuffer_Release(&s)
    finally:
        PyBuffer_Release(&d)
