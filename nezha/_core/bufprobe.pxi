# Included by engine.pyx (before fastpath.pxi): what the fast path needs to know of a user's
# buffer (address, bytes, element type, writeable), read without a Python call for numpy
# arrays and with one C call for torch tensors.
#
# Tensors are read through the DLPack C exchange API (DLPack 1.x: a table of C functions on
# the tensor type, __dlpack_c_exchange_api__, torch >= 2.9): address, device, dtype, shape
# and strides in one call of ~50 ns, where np.from_dlpack (the slow path's view) costs
# ~2.7 µs. Other DLPack objects take the slow path: the non-owning call cannot say whether
# their memory is read-only.

from cpython.exc cimport PyErr_Clear
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid

import sys

cimport numpy as cnp

cnp.import_array()

cdef extern from *:
    """
    /* DLPack 1.x layouts (dlpack.h): only what the non-owning export fills in */
    typedef struct { int32_t device_type, device_id; } nz_dl_device;
    typedef struct { uint8_t code, bits; uint16_t lanes; } nz_dl_dtype;
    typedef struct {
        void *data; nz_dl_device device; int32_t ndim; nz_dl_dtype dtype;
        int64_t *shape; int64_t *strides; uint64_t byte_offset;
    } nz_dl_tensor;
    typedef int (*nz_dl_from_py)(void *py_object, nz_dl_tensor *out);
    typedef struct {
        uint32_t major, minor; void *prev_api;
        void *managed_tensor_allocator, *managed_tensor_from_py_object_no_sync,
             *managed_tensor_to_py_object_no_sync;
        nz_dl_from_py dltensor_from_py_object_no_sync;
        void *current_work_stream;
    } nz_dl_api;
    """
    ctypedef struct nz_dl_device:
        int32_t device_type
    ctypedef struct nz_dl_dtype:
        uint8_t code, bits
        uint16_t lanes
    ctypedef struct nz_dl_tensor:
        void *data
        nz_dl_device device
        int32_t ndim
        nz_dl_dtype dtype
        int64_t *shape
        int64_t *strides
        uint64_t byte_offset
    ctypedef int (*nz_dl_from_py)(void *py_object, nz_dl_tensor *out)
    ctypedef struct nz_dl_api:
        uint32_t major
        nz_dl_from_py dltensor_from_py_object_no_sync


# element-type tokens of tensors: above every numpy type number (user types included)
cdef int64_t DL_TOKEN = 1 << 24

cdef struct buf_t:
    const char *p     # first byte
    int64_t nbytes
    int64_t token     # element type: numpy's type number, or DL_TOKEN | code << 8 | bits
    bint writeable

cdef object _tensor_type = None      # torch.Tensor, once a tensor took the slow path
cdef nz_dl_from_py _dl_from = NULL   # its exchange API's non-owning export


cdef bint _learn_tensor_type(object tp) except -1:
    """True if tp is torch.Tensor and its exchange API is usable (remembered)."""
    global _tensor_type, _dl_from
    if tp is _tensor_type:
        return True
    torch = sys.modules.get("torch")
    if torch is None or tp is not getattr(torch, "Tensor", None):
        return False
    cap = getattr(tp, "__dlpack_c_exchange_api__", None)
    if cap is None or not PyCapsule_IsValid(cap, b"dlpack_exchange_api"):
        return False
    cdef nz_dl_api *api = <nz_dl_api *>PyCapsule_GetPointer(cap, b"dlpack_exchange_api")
    if api.major != 1 or api.dltensor_from_py_object_no_sync == NULL:
        return False
    _dl_from = api.dltensor_from_py_object_no_sync
    _tensor_type = tp
    return True


cdef bint probe(object buf, buf_t *b) except -1:
    """Fill b for a C-contiguous native-order numpy array or a torch CPU tensor the slow
    path would take without a copy; False for anything else (the slow path decides)."""
    cdef cnp.ndarray a
    if type(buf) is cnp.ndarray:
        a = <cnp.ndarray>buf
        if not (cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISNOTSWAPPED(a)):
            return False
        b.p = <const char *>cnp.PyArray_DATA(a)
        b.nbytes = cnp.PyArray_NBYTES(a)
        b.token = cnp.PyArray_TYPE(a)
        b.writeable = cnp.PyArray_ISWRITEABLE(a)
        return True
    if _tensor_type is not None and type(buf) is _tensor_type:
        return _probe_tensor(buf, b)
    return False


cdef bint _probe_tensor(object t, buf_t *b) except -1:
    cdef nz_dl_tensor d
    cdef int64_t n = 1
    cdef int i
    if _dl_from(<void *>t, &d) != 0:  # sparse, meta, ...: the slow path explains
        PyErr_Clear()
        return False
    if d.device.device_type != 1 or d.dtype.lanes != 1 or d.dtype.bits & 7:  # kDLCPU
        return False
    for i in range(d.ndim - 1, -1, -1):  # C order as numpy counts it (size-1 axes: any stride)
        if d.strides != NULL and d.shape[i] != 1 and d.strides[i] != n:
            n = -1
            break
        n *= d.shape[i]
    if n < 0:
        for i in range(d.ndim):
            if d.shape[i] == 0:
                n = 0  # no elements: contiguous whatever the strides
        if n < 0:
            return False
    # what __dlpack__ refuses (autograd) or DLPack cannot say (a negative view: the memory
    # holds -x); conjugate views are complex, which no entry has
    if t.requires_grad or t.is_neg():
        return False
    b.p = <const char *>d.data + d.byte_offset
    b.nbytes = n * (d.dtype.bits >> 3)
    b.token = DL_TOKEN | (<int64_t>d.dtype.code << 8) | d.dtype.bits
    b.writeable = True  # torch has no read-only tensors (np.from_dlpack agrees)
    return True
