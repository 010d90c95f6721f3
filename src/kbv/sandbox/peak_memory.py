"""Peak device memory of one forward call (CUDA caching allocator; not applicable on cpu).

Used identically by the reference worker (reference model) and the candidate worker (ModelNew),
so the two figures are comparable. Definitions in :class:`kbv.model.records.MemoryMeasurement`;
memory efficiency = reference peak / candidate peak (KernelBench-Verified, §4: "correct memory
efficiency").
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from kbv.model.records import MemoryMeasurement


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def forward_peak_bytes(fn: Callable[..., Any], args: Sequence[Any], device: torch.device,
                       carried: dict[int, int] | None = None) -> int:
    """``max_memory_allocated()`` during one ``fn(*args)`` minus ``memory_allocated()`` before (bytes).
    ``carried`` (the trusted side's, :func:`kbv.processes.footprint.process_peak_bytes`): the
    process's peak before this measurement's reset is kept there under the device's index. No state
    of this module changes: the candidate worker runs it too, under a guard that reports any change
    of its module-level containers as harness tampering (:class:`kbv.sandbox.guard.HarnessGuard`)."""
    torch.cuda.synchronize(device)
    if carried is not None:
        i = _index(device)
        carried[i] = max(carried.get(i, 0), int(torch.cuda.max_memory_allocated(device)))
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    with torch.no_grad():
        out = fn(*args)
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - before
    del out
    return int(peak)


def measurement(label: str, *, forward_peak: int, model_bytes: int, input_bytes: int) -> MemoryMeasurement:
    return MemoryMeasurement(
        label=label,
        peak_bytes=int(model_bytes) + int(input_bytes) + int(forward_peak),
        forward_peak_bytes=int(forward_peak),
        model_bytes=int(model_bytes),
        input_bytes=int(input_bytes),
    )


def efficiency(reference: MemoryMeasurement, candidate: MemoryMeasurement) -> float | None:
    """reference peak / candidate peak; None when a peak is zero."""
    if candidate.peak_bytes <= 0 or reference.peak_bytes <= 0:
        return None
    return reference.peak_bytes / candidate.peak_bytes


def nbytes(args: Sequence[Any]) -> int:
    """Bytes of the tensors in ``args`` (non-tensors count 0)."""
    return sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))


#: exceptions that mean an allocation failed (host or device).
MEMORY_ERRORS: tuple[type[BaseException], ...] = (MemoryError, torch.cuda.OutOfMemoryError)
#: how torch's CPU allocator says it (a plain RuntimeError) and CUDA's, in the exception's own text.
#: what an allocation failure's RuntimeError says: the CPU allocator, the CUDA caching allocator, and
#: cuBLAS / cuDNN failing to allocate their workspace (``CUBLAS_STATUS_ALLOC_FAILED``, cuDNN 9's
#: ``..._DEVICE_ALLOCATION_FAILED``) on a full device
_MEMORY_TEXT = ("can't allocate memory", "CUDA out of memory", "out of memory", "ALLOC_FAILED", "ALLOCATION_FAILED")


def is_out_of_memory(exc: BaseException) -> bool:
    """``exc`` says an allocation failed: MemoryError, torch's OutOfMemoryError, or the CPU
    allocator's RuntimeError ("DefaultCPUAllocator: can't allocate memory"). Read where the
    exception is caught, so what crosses a process boundary is the kind, not the text."""
    if isinstance(exc, MEMORY_ERRORS):
        return True
    return isinstance(exc, RuntimeError) and any(t in str(exc) for t in _MEMORY_TEXT)


#: bytes of a call's inputs and outputs from which a correctness forward on cuda gives the candidate
#: worker's unused cached device memory back before it replies (kbv choice): kbv's own copies of
#: large inputs (the moved buffers' spacers, the previous call's inputs) stay cached in that
#: process's allocator, where neither the reference worker nor the secret shape's worker can use
#: them (KernelBench-Verified's full-size Huber loss, B = 8 GiB, on an 80 GB H100: the shape's worker
#: ran out of memory beside the worker's 30 GB; eighteenth session). Below it the cache is small
#: beside a device, and re-allocating each call would cost more than it frees.
RELEASE_CACHE_MIN_BYTES = 1 << 30


def release_cache(device: torch.device, tensors: Sequence[Any], empty_cache: Callable[[], Any] | None,
                  poison: Callable[[torch.device], Any] | None, out_of_memory: Callable[[BaseException], bool]) -> None:
    """Give the allocator's unused blocks back to the device where ``tensors`` hold at least
    :data:`RELEASE_CACHE_MIN_BYTES` (no tensor in use is touched). ``empty_cache``: the C binding,
    captured before the candidate loaded (None: not available, nothing done). ``poison`` (a probed
    call): the free blocks filled with the poison pattern first, so what the call left in them (its
    intermediates) does not come back unpoisoned in a later call's allocation from the driver, as
    the cached blocks would not (:func:`kbv.sandbox.call_probes.poison_free_memory`). Housekeeping
    only: where the device cannot spare the poison's own allocations (``out_of_memory`` says so) the
    cache is kept, as it was (red-team helper); any other error propagates."""
    if empty_cache is None or nbytes(tensors) < RELEASE_CACHE_MIN_BYTES:
        return
    try:
        if poison is not None:
            poison(device)
        empty_cache()
    except Exception as exc:  # noqa: BLE001 - an allocation failure here is kbv's housekeeping, not the call's
        if not out_of_memory(exc):
            raise
