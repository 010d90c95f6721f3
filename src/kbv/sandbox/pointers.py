"""What memory a cuda output lies in, asked of the CUDA driver in the candidate worker.

An output must be ordinary device memory (what torch's caching allocator hands out: cudaMalloc
or cuMemCreate mappings). Managed memory (cudaMallocManaged) and page-locked host memory mapped
into the device (cudaHostAlloc, cudaHostRegister) can be written by the host after the call,
with nothing on any stream kbv times or synchronises, and managed pages move when first touched:
what kbv reads need not be what the timed call left (taxonomy 3, ``probe:output-memory``).
Pageable host memory a device reaches through HMM/ATS is not known to the driver at all.

Like every probe of the worker, this runs in the untrusted process (best effort: native code
could patch the driver library it calls); it reads the driver through ctypes, not torch.
"""

from __future__ import annotations

import ctypes
from typing import Any, Sequence

#: cuPointerGetAttribute attributes and the CUmemorytype values it returns (cuda.h).
CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2
CU_POINTER_ATTRIBUTE_IS_MANAGED = 8
CU_MEMORYTYPE = {1: "host", 2: "device", 3: "array", 4: "unified"}
CUDA_ERROR_INVALID_VALUE = 1
#: memory kinds an output may lie in: device memory, or a pointer the check could not read.
ORDINARY = frozenset({"device", "unknown"})

_driver: Any = None


def driver() -> Any:
    """The CUDA driver library (``libcuda.so.1``, loaded once; the worker loads it before any
    candidate code), or False where there is none."""
    global _driver
    if _driver is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            lib.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
            lib.cuPointerGetAttribute.restype = ctypes.c_int
            _driver = lib
        except (OSError, AttributeError):
            _driver = False
    return _driver


_copier: Any = None


def copier() -> Any:
    """The driver library with ``cuMemcpy`` bound (unified addressing: a copy between any two device
    addresses, ordered on the legacy default stream; :mod:`kbv.sandbox.rawcopy`), loaded once
    before any candidate code.

    Raises:
        RuntimeError: there is no CUDA driver library.
    """
    global _copier
    if _copier is None:
        lib = driver()
        if not lib:
            raise RuntimeError("no CUDA driver library (libcuda.so.1) for the output copy")
        lib.cuMemcpy.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t]
        lib.cuMemcpy.restype = ctypes.c_int
        _copier = lib
    return _copier


def memory_kind(ptr: int, lib: Any = None) -> str:
    """The memory the device address ``ptr`` lies in, from the driver's cuPointerGetAttribute:
    ``device``, ``managed``, ``host`` (page-locked host memory, mapped or registered),
    ``array``, ``unregistered`` (an address the driver does not know: CUDA_ERROR_INVALID_VALUE),
    or ``unknown`` (no driver library, another error, an unlisted type). ``lib``: the library to
    ask (default :func:`driver`)."""
    lib = lib if lib is not None else driver()
    if not lib:
        return "unknown"
    managed = ctypes.c_uint64(0)  # the attribute is a bool or an unsigned int: 8 zeroed bytes hold either
    r = lib.cuPointerGetAttribute(ctypes.byref(managed), CU_POINTER_ATTRIBUTE_IS_MANAGED, int(ptr))
    if r:
        return "unregistered" if r == CUDA_ERROR_INVALID_VALUE else "unknown"
    if managed.value:
        return "managed"
    kind = ctypes.c_uint64(0)
    if lib.cuPointerGetAttribute(ctypes.byref(kind), CU_POINTER_ATTRIBUTE_MEMORY_TYPE, int(ptr)):
        return "unknown"
    return CU_MEMORYTYPE.get(int(kind.value), "unknown")


def output_memory(outputs: Sequence[Any], lib: Any = None) -> str:
    """``"output K is over <kind> memory"`` for the first non-empty cuda tensor of ``outputs``
    whose storage is not :data:`ORDINARY` memory (:func:`memory_kind`), else ""."""
    import torch

    for k, t in enumerate(outputs):
        if type(t) is torch.Tensor and t.is_cuda and t.numel():
            kind = memory_kind(t.untyped_storage().data_ptr(), lib)
            if kind not in ORDINARY:
                return f"output {k} is over {kind} memory"
    return ""
