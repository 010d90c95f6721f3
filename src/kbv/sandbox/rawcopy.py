"""Copying a candidate's outputs out of the timed window without running anything of the candidate's.

Between the clock's stop and the trusted side holding a timed call's outputs nothing the candidate
controls may run (a method of its objects, a ``__torch_function__`` or dispatch override, a
``TORCH_LIBRARY_IMPL(aten, ...)`` kernel of ``copy_``): work deferred into that window would be done
but not timed. So the worker reads each output's metadata with the tensor methods of torch's C base
class as they were when this module was imported (before any candidate code), with torch function
handling disabled, and copies the bytes of each output's storage span with ``memmove`` (cpu) or
the driver's ``cuMemcpy`` (cuda), never through the dispatcher, into *slots*: one shared byte
buffer the worker allocates before any timed call (:class:`kbv.sandbox.protocol.SetTimingInputs`)
and the trusted side maps once. A reply carries, per output, where its bytes lie in the slot and
the shape, strides and dtype to view them with (:func:`view`).

An output whose span does not fit its slot but whose elements do (padded rows, a slice of a wider
result: honest layouts) is packed on cpu: its elements copied row-major by numpy's strided copy.

Untrusted side (the copier) and trusted side (:func:`view`) alike: the module imports only torch,
numpy and :mod:`kbv.sandbox.pointers`.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any, Sequence

import numpy as _np
import torch

from kbv.sandbox import pointers

_TB = torch._C.TensorBase
_data_ptr = _TB.data_ptr
_size = _TB.size
_stride = _TB.stride
_element_size = _TB.element_size
_numel = _TB.numel
_dtype = _TB.dtype.__get__
_device_of = _TB.device.__get__
_dispatch_keys = torch._C._dispatch_keys
_NoTorchFunction = torch._C.DisableTorchFunction
_memmove = ctypes.memmove
_memset = ctypes.memset
_Tensor = torch.Tensor
_copyto = _np.copyto
_as_strided = _np.lib.stride_tricks.as_strided

#: bound on every integer of an output layout and on its element count (2^48: far over any output a
#: slot holds; a layout past int64 made torch raise TypeError in the trusted process, red-team
#: helper, 2026-12-06).
MAX_LAYOUT_INT = 1 << 48
#: alignment of every output's bytes in a slot (bytes): any dtype's element size divides it.
ALIGN = 256


class LayoutError(TypeError):
    """An output kbv cannot copy out as it is (not a plain tensor, another device, or larger than
    its slot): the worker reports it as the call's failure."""


def span_bytes(shape: Sequence[int], stride: Sequence[int], element_size: int) -> int:
    """Bytes from an output's first element to one past its last (0 when it has no element);
    torch's strides are never negative."""
    if any(int(s) == 0 for s in shape):
        return 0
    return (sum((int(s) - 1) * int(st) for s, st in zip(shape, stride)) + 1) * int(element_size)


def layout(t: Any, device_type: str) -> tuple[int, tuple, tuple, str, int]:
    """(data pointer, shape, strides, dtype name, span bytes) of ``t``, read with the captured C
    methods under ``DisableTorchFunction`` (no candidate code runs).

    Raises:
        LayoutError: ``t`` is not exactly a ``torch.Tensor`` (a subclass, or anything else), carries
            torch's Python dispatch key (a wrapper tensor), or lies on another device type.
    """
    if type(t) is not _Tensor:
        raise LayoutError(f"forward returned {type(t).__name__}, not a torch.Tensor")
    with _NoTorchFunction():
        if "Python" in str(_dispatch_keys(t)):
            raise LayoutError("forward returned a wrapper tensor (Python dispatch key)")
        dev = _device_of(t)
        if dev.type != device_type:
            raise LayoutError(f"forward returned a tensor on {dev.type}, the problem runs on {device_type}")
        shape, stride = tuple(_size(t)), tuple(_stride(t))
        es = int(_element_size(t))
        dtype = str(_dtype(t)).removeprefix("torch.")
        ptr = int(_data_ptr(t)) if int(_numel(t)) else 0
    return ptr, shape, stride, dtype, span_bytes(shape, stride, es)


def spans(ts: Sequence[Any], device_type: str) -> list[tuple[int, int]]:
    """(start, end) byte addresses of each tensor's elements (empty tensors left out)."""
    out = []
    for t in ts:
        ptr, *_, n = layout(t, device_type)
        if n:
            out.append((ptr, ptr + n))
    return out


def overlapping(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> bool:
    """Whether any span of ``a`` shares a byte with any span of ``b``."""
    return any(s0 < e1 and s1 < e0 for s0, e0 in a for s1, e1 in b)


def contiguous_strides(shape: Sequence[int]) -> tuple:
    """Row-major strides (elements) of ``shape``."""
    out, step = [], 1
    for s in reversed(shape):
        out.append(step)
        step *= max(1, int(s))
    return tuple(reversed(out))


def _pack(dst: int, src: int, shape: Sequence[int], stride: Sequence[int], element_size: int) -> None:
    """Copy the elements at ``src`` (``shape``, ``stride`` in elements) to ``dst`` row-major, as raw
    bytes through numpy's strided copy (no dispatcher, nothing of the candidate's)."""
    count = math.prod(shape) * element_size
    out = _np.frombuffer((ctypes.c_uint8 * count).from_address(dst), dtype=_np.uint8)
    span = span_bytes(shape, stride, element_size)
    whole = _np.frombuffer((ctypes.c_uint8 * span).from_address(src), dtype=_np.uint8)
    view = _as_strided(whole, (*shape, element_size), (*(int(st) * element_size for st in stride), 1))
    _copyto(out.reshape(*shape, element_size), view)


def aligned(n: int) -> int:
    """``n`` bytes rounded up to :data:`ALIGN`: where the next output starts in a slot."""
    return -(-int(n) // ALIGN) * ALIGN


def slot_need(outs: Sequence[Any], device_type: str) -> int:
    """The bytes :meth:`SlotCopier.copy` takes of a slot for ``outs`` unpacked: each output's span,
    aligned (:func:`layout`'s errors are raised for what it cannot copy)."""
    return sum(aligned(layout(t, device_type)[4]) for t in outs)


class SlotCopier:
    """Copies outputs into a slot buffer: ``slots`` regions of ``slot_bytes`` each, in one byte tensor
    allocated on ``device`` before any timed call (shared on cpu, so the trusted side maps it)."""

    def __init__(self, device: torch.device, slot_bytes: int, slots: int, touch_bytes: int = 0):
        """``touch_bytes``: on cpu, the bytes of each slot written now (0: all of it), so that the
        copies into them take no page faults; the rest of a slot (slack for outputs larger than the
        reference's) is backed by memory only once an output is copied there."""
        self.device = device
        self.slot_bytes = int(slot_bytes)
        self.slots = max(1, int(slots))
        size = self.slot_bytes * self.slots
        if device.type == "cpu":  # made in shared memory at once, written only where it is touched
            self.buffer = torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(size), 0, (size,))
        else:
            self.buffer = torch.empty(size, dtype=torch.uint8, device=device)
        with _NoTorchFunction():
            self._base = int(_data_ptr(self.buffer))
        if device.type == "cpu" and size:
            touch = self.slot_bytes if touch_bytes <= 0 else min(self.slot_bytes, int(touch_bytes))
            for k in range(self.slots):
                _memset(self._base + k * self.slot_bytes, 0, touch)
        self._lib = pointers.copier() if device.type == "cuda" else None

    def copy(self, outs: Sequence[Any], slot: int) -> tuple:
        """Copy each output's span into region ``slot`` (aligned to :data:`ALIGN`); returns one
        ``(offset in the buffer, shape, strides, dtype name)`` per output. On cuda the copies are
        ordered after the work already queued on the legacy default stream, and the caller
        synchronises before the trusted side reads them.

        Raises:
            LayoutError: see :func:`layout`, or the outputs' spans do not fit one region, or an
                output lies in the slot buffer itself.
            RuntimeError: the driver refused a copy.
        """
        if not 0 <= slot < self.slots:
            raise LayoutError(f"slot {slot} outside 0..{self.slots - 1}")
        base = slot * self.slot_bytes
        found = []
        end = self._base + self.slot_bytes * self.slots
        for t in outs:
            ptr, shape, stride, dtype, n = layout(t, self.device.type)
            if n and ptr < end and self._base < ptr + n:
                # no honest output is there: the buffer's address is found only in the process's
                # mappings. An output computed in its own slot makes the copy a no-op that the
                # trusted null loop still subtracts (a red-team helper's bound-pass floor, 2026-12-06)
                raise LayoutError("an output lies in kbv's output slots (the harness's copy buffer, "
                                  "reached through the process's memory map)")
            with _NoTorchFunction():
                es = int(_element_size(t))
            found.append((ptr, shape, stride, dtype, n, es))
        # padded or sliced cpu outputs (honest layouts) whose spans do not all fit: their elements alone
        pack = self._lib is None and sum(aligned(f[4]) for f in found) > self.slot_bytes
        at = 0
        result = []
        for ptr, shape, stride, dtype, n, es in found:
            packed = pack and n > es * math.prod(shape)
            if packed:
                n = es * math.prod(shape)
            if at + n > self.slot_bytes:
                raise LayoutError(f"the outputs span {at + n} bytes, more than the {self.slot_bytes} "
                                  "bytes kbv reserves per call (the reference's outputs, with slack)")
            if n and packed:
                _pack(self._base + base + at, ptr, shape, stride, es)
                stride = contiguous_strides(shape)
            elif n:
                dst = self._base + base + at
                if self._lib is None:
                    _memmove(dst, ptr, n)
                else:
                    r = self._lib.cuMemcpy(ctypes.c_uint64(dst), ctypes.c_uint64(ptr), ctypes.c_size_t(n))
                    if r:
                        raise RuntimeError(f"cuMemcpy of an output failed (CUresult {r})")
            result.append((base + at, shape, stride, dtype))
            at += aligned(n)
        return tuple(result)


def view(buffer: torch.Tensor, entries: Sequence[tuple]) -> list[torch.Tensor]:
    """Trusted side: the outputs one :meth:`SlotCopier.copy` wrote, as views of ``buffer`` (the
    shared slot buffer), checked against its bounds.

    Raises:
        ValueError: an entry that is malformed, names an unknown dtype or lies outside the buffer.
    """
    out = []
    total = buffer.numel()
    for entry in entries:
        try:
            off, shape, stride, dtype = entry
            off = int(off)
            shape = tuple(int(s) for s in shape)
            stride = tuple(int(s) for s in stride)
        except (TypeError, ValueError):
            raise ValueError("malformed output layout") from None
        dt = getattr(torch, str(dtype), None)
        if not isinstance(dt, torch.dtype) or len(shape) != len(stride) or min((*shape, *stride, off), default=0) < 0 \
                or max((*shape, *stride, off), default=0) >= MAX_LAYOUT_INT or math.prod(shape) >= MAX_LAYOUT_INT:
            raise ValueError(f"malformed output layout {str(entry)[:200]}")
        es = torch.empty((), dtype=dt).element_size()
        n = span_bytes(shape, stride, es)
        if off % es or off + n > total:
            raise ValueError(f"output layout {str(entry)[:200]} lies outside the slot buffer")
        try:  # whatever torch refuses of a layout the candidate wrote is a malformed layout, not kbv's fault
            if n == 0:
                out.append(torch.empty(shape, dtype=dt, device=buffer.device))
                continue
            region = buffer[off:off + n].view(dt)  # checks the bounds; as_strided's offset counts from the storage
            out.append(region.as_strided(shape, stride, region.storage_offset()))
        except (RuntimeError, TypeError, OverflowError) as exc:
            raise ValueError(f"malformed output layout {str(entry)[:200]}: {str(exc)[:200]}") from None
    return out


def device_copies(tensors: Sequence[Any], lib: Any) -> tuple:
    """``tensors`` with every non-empty plain cuda tensor replaced by a copy of its span in fresh
    device memory from torch's allocator (same shape and strides), made with the driver's
    ``cuMemcpy`` (``lib``: :func:`kbv.sandbox.pointers.copier`). An output over managed or mapped host
    memory, which CUDA IPC cannot share, can then cross to the trusted side. The caller synchronises
    before the copies are read.

    Raises:
        LayoutError: see :func:`layout`.
        RuntimeError: the driver refused a copy.
    """
    out = []
    for t in tensors:
        if type(t) is torch.Tensor and t.is_cuda and t.numel():
            ptr, shape, stride, dtype, n = layout(t, "cuda")
            copy = torch.empty(max(1, -(-n // t.element_size())), dtype=t.dtype, device=t.device)
            if n and lib.cuMemcpy(copy.data_ptr(), ptr, n):
                raise RuntimeError("cuMemcpy of an output failed")
            t = copy.as_strided(shape, stride, 0)
        out.append(t)
    return tuple(out)
