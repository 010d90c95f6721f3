"""One honest timing loop, used by both the reference worker (baselines) and the candidate worker.

CUDA: a pair of CUDA events around every call, an L2 flush (a write of a buffer at least twice the
device's L2 size, read from the device) before every call outside the event pair, warmup calls
first, one device synchronize at the end. CPU: ``time.perf_counter`` around every call, same
structure, no flush (not applicable on cpu). Calls rotate through several input sets, so no two
consecutive calls see the same input values (caching defeats), as in ``triton.testing.do_bench``
but returning every raw sample.

The callables are captured when this module is imported, which the candidate worker does before
importing any candidate code: reassigning ``torch.cuda.Event.elapsed_time`` or
``time.perf_counter`` afterwards does not reach this loop (taxonomy entry 4).
"""

from __future__ import annotations

import contextlib
import gc
import time
from typing import Callable, Collection, Mapping, Sequence

import torch

# a timed call's inputs (re-exported: the worker and the trusted side reach them through this module)
from kbv.sandbox.timed_inputs import MIX_FRACTION, _mix_mask, call_inputs, mix_values  # noqa: F401

_perf_counter = time.perf_counter
_thread_time = time.thread_time  #: CPU time of the calling thread, per timed call (kbv.pipeline.repeat)
_Event = torch.cuda.Event
_event_record = torch.cuda.Event.record
_event_elapsed = torch.cuda.Event.elapsed_time
_cuda_sync = torch.cuda.synchronize
_cuda_sleep = torch.cuda._sleep
_gc_disable, _gc_enable, _gc_isenabled, _gc_collect, _gc_freeze = gc.disable, gc.enable, gc.isenabled, gc.collect, gc.freeze
_gc_count = gc.get_count


def _libc_malloc_trim():
    """glibc's ``malloc_trim``, captured at import (before any candidate loads); None elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        return libc.malloc_trim if hasattr(libc, "gnu_get_libc_version") else None
    except (OSError, AttributeError):
        return None


_malloc_trim = _libc_malloc_trim()

#: tracked objects allocated (less those freed) since the last collection at which a timed call
#: collects its young garbage inside its own clock: CPython's default threshold of the youngest
#: generation (``gc.get_threshold()[0]``), so a call is charged about the collections it would have
#: triggered itself.
GC_YOUNG_THRESHOLD = 700

#: GPU cycles of the spin queued ahead of a call timed after a synchronize (~1 ms at the H200's
#: ~2 GHz): the flush, the start event and the call's own launches are queued behind it, so the
#: events measure the call's device time and not the host's launch latency after the synchronize,
#: and the GPU is warm again after an idle gap. Measured on an H200 (bench/diag_tf32.py,
#: docs/gpu-runs.md): a 2048² TF32 matmul timed 0.050 ms back to back but 0.066-0.17 ms after 1-5 ms
#: idle with a 200k-cycle spin, and 0.050 ms in every case with 2M cycles. The per-call timing of a
#: candidate has such gaps between calls (one request each) and a baseline's loop has not.
LAUNCH_COVER_CYCLES = 2_000_000

#: this module's own bindings as imported (a candidate may reassign the globals through sys.modules).
_MODULE = {"_perf_counter": _perf_counter, "_Event": _Event, "_event_record": _event_record,
           "_event_elapsed": _event_elapsed, "_cuda_sync": _cuda_sync}

#: identities checked after each candidate phase.
CAPTURED = {
    "time.perf_counter": _perf_counter,
    "torch.cuda.Event": _Event,
    "torch.cuda.Event.record": _event_record,
    "torch.cuda.Event.elapsed_time": _event_elapsed,
    "torch.cuda.synchronize": _cuda_sync,
}


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic garbage collector off inside the block, restored after it.

    Timed regions run inside it on both sides of the boundary. A collection is triggered by the
    number of allocations, not by what the call costs, and a full one walks every tracked object of
    the process (torch's and Triton's modules, the harness): under ``TRITON_INTERPRET=1`` a 21 ms
    call measured 23-40 ms when collections fell inside it. The claim is a median of single calls
    (a collection moves few of them) while the bound pass sums a whole loop's CPU time (every
    collection counts), so collections alone put an honest Triton kernel's floor at 1.5-1.8x its
    claim (CI, ``31_VarMean``). What a call's own allocations owe is collected inside its clock
    (:func:`_owed`: a candidate cannot move work into finalizers of its garbage past the clock),
    and the bound pass collects once more at its end, inside the trusted window. The candidate may
    turn collection back on inside its own calls: that only adds to its own times."""
    was = _gc_isenabled()
    _gc_disable()
    try:
        yield
    finally:
        if was:
            _gc_enable()


def _owed() -> None:
    """Inside a timed call's clock, after the call: collect the young generation when the call left
    :data:`GC_YOUNG_THRESHOLD` objects or more (its cyclic garbage, and the finalizers of that
    garbage, are the call's cost; a torch kernel leaves a few)."""
    if _gc_count()[0] >= GC_YOUNG_THRESHOLD:
        _gc_collect(0)


def collect(freeze: bool = False, trim: bool = False) -> None:
    """A full collection now (an untimed request: :class:`kbv.sandbox.protocol.Ping`), so that no
    collection owed to earlier allocations falls inside the timed request that follows. With
    ``freeze`` (after the load) the survivors, the libraries' and the model's objects, leave the
    collector's generations (``gc.freeze``), so later full collections walk only newer objects. With
    ``trim`` (before the trusted side reads what the worker holds) glibc returns the freed heap's pages
    (``malloc_trim(0)``; nothing elsewhere)."""
    _gc_collect()
    if freeze:
        _gc_freeze()
    if trim and _malloc_trim is not None:
        # the freed heap's whole pages back to the system (glibc keeps them mapped otherwise, so the
        # garbage just collected would still read as resident memory)
        _malloc_trim(0)


def captured_changed() -> list[str]:
    """Names of timing callables that no longer are the objects captured at import."""
    now = {
        "time.perf_counter": time.perf_counter,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.synchronize": torch.cuda.synchronize,
    }
    mine = {
        "kbv.sandbox.timer._perf_counter": (_MODULE["_perf_counter"], _perf_counter),
        "kbv.sandbox.timer._Event": (_MODULE["_Event"], _Event),
        "kbv.sandbox.timer._event_record": (_MODULE["_event_record"], _event_record),
        "kbv.sandbox.timer._event_elapsed": (_MODULE["_event_elapsed"], _event_elapsed),
        "kbv.sandbox.timer._cuda_sync": (_MODULE["_cuda_sync"], _cuda_sync),
    }
    changed = [k for k, v in CAPTURED.items() if now[k] is not v]
    return changed + [k for k, (orig, cur) in mine.items() if cur is not orig]


def l2_flush_bytes(device: torch.device | str) -> int | None:
    """Size of the L2 flush buffer: twice the device's L2 cache (bytes); None on cpu.

    Falls back to 2 × 60 MiB (the H200's L2, per ``torch.cuda.get_device_properties``) when the
    property is missing on an old torch.
    """
    device = torch.device(device)
    if device.type != "cuda":
        return None
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (60 << 20)
    return 2 * int(l2)


def _flat(out: object) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [o for o in out if isinstance(o, torch.Tensor)]
    return []


#: bytes between the output elements :func:`touch_pages` reads (the smallest page size).
PAGE_BYTES = 4096


def touch_pages(out: object) -> None:
    """Read one element of every page of each CPU output tensor, inside the timed window (every
    subject alike): an output over memory that computes itself when first read (pages mapped
    without access and filled by a fault handler, taxonomy 3) does that work inside the window,
    not later when kbv reads it. One element per 4 KiB costs a few µs per MiB of output. A tensor
    that is not contiguous (a transposed view) has every page of its whole storage read, as bytes:
    a red-team helper's lazy output returned as ``.t()`` skipped the read and moved its work past
    the clock (2026-12-06)."""
    for t in _flat(out):
        if type(t) is not torch.Tensor or t.device.type != "cpu" or not t.numel():
            continue
        if t.is_contiguous():
            step = max(1, PAGE_BYTES // t.element_size())
            flat = t.detach().reshape(-1)
            if flat.dtype.is_complex or flat.dtype == torch.bool:
                flat = flat.view(torch.uint8)
        else:
            storage = t.untyped_storage()
            step, flat = PAGE_BYTES, torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),), (1,))
        float(flat[::step].sum())


def one_call(fn: Callable[..., object], args: Sequence[object], *, device: torch.device | str,
             flush_bytes: int | None = None, _perf_counter=_perf_counter, _Event=_Event,
             _event_record=_event_record, _event_elapsed=_event_elapsed,
             _cuda_sync=_cuda_sync) -> tuple[float, object, str]:
    """Time one call of ``fn(*args)``: on cuda a synchronize, the L2 flush, CUDA events around
    the call and a synchronize after it (the output is complete when this returns); on cpu
    ``perf_counter`` around the call and :func:`touch_pages`. Returns (ms, output, clock)."""
    device = torch.device(device)
    with torch.inference_mode(False), torch.no_grad(), gc_paused():
        if device.type == "cuda":
            flush = torch.empty(int(flush_bytes) // 4, dtype=torch.int32, device=device) if flush_bytes else None
            start, end = _Event(enable_timing=True), _Event(enable_timing=True)
            _cuda_sync(device)
            _cuda_sleep(LAUNCH_COVER_CYCLES)
            if flush is not None:
                flush.zero_()
            _event_record(start)
            out = fn(*args)
            _owed()
            _event_record(end)
            _cuda_sync(device)
            return float(_event_elapsed(start, end)), out, "cuda-event"
        t0 = _perf_counter()
        out = fn(*args)
        _owed()
        touch_pages(out)
        return (_perf_counter() - t0) * 1e3, out, "perf_counter"


def time_calls(
    fn: Callable[..., object],
    arg_sets: Sequence[Sequence[object]],
    *,
    device: torch.device | str,
    warmup: int,
    trials: int,
    flush_bytes: int | None = None,
    first_set: int = 0,
    refresh: bool = False,
    keep: Collection[int] = (),
    kept: dict | None = None,
    sync_inside: bool = False,
    mutate: Mapping[int, Sequence[tuple]] | None = None,
    mix: Mapping[int, tuple] | None = None,
    sync_each: bool = False,
    copy_out: Callable[[int, object], None] | None = None,
    _perf_counter=_perf_counter,
    _Event=_Event,
    _event_record=_event_record,
    _event_elapsed=_event_elapsed,
    _cuda_sync=_cuda_sync,
) -> tuple[list[float], str]:
    """Time ``trials`` calls of ``fn`` after ``warmup`` untimed ones.

    Call ``j`` (warmup calls first, then timed ones) gets the values of
    ``arg_sets[(first_set + j) % len(arg_sets)]``, so consecutive calls never see the same values
    when there are two or more sets. With ``refresh`` the values are copied (outside the timed
    region, before the L2 flush) into one of two working buffers that alternate, so every call
    gets new values at an address the previous call did not use, and a cache keyed by address
    or by the identity of the argument objects returns stale results (taxonomy 5, 6, 11).

    ``keep``: indices of timed calls whose outputs are copied (after the end event, so outside
    the timed region) into ``kept[index] = (set_index, [tensors])``: the trusted side re-checks
    them against the reference of ``arg_sets[set_index]`` (taxonomy 5, 6).

    ``mix`` (needs ``refresh``): timed-call index → ``(source set index, seed[, skip[, fraction]])``: that
    call's values are :func:`mix_values` of its set and the source set, then ``mutate`` applies.
    ``mutate`` (needs ``refresh``): timed-call index → ``(arg index, index tuple, value)`` changes
    written into that call's working buffer after the copy, outside the timed region (every timed
    call of a verification gets its own, ``kbv.reference.mutation.timed_mutation``: no two see the same values).

    ``sync_inside``: time each call on the host clock around ``fn`` plus a device-wide
    synchronize (no L2 flush): work left running on other streams or threads after ``fn``
    returns is then inside the figure. Compared with the event-only pass (taxonomy 1).

    ``copy_out(i, output)``: called with timed call ``i``'s output right after its clock stops
    (cuda: after its end event is queued, so the copy is outside the event pair but inside any wall
    clock around the whole loop; not with ``sync_inside``): the candidate worker copies every
    output into its own slot there (:mod:`kbv.sandbox.rawcopy`, the bound pass).

    The clock callables are bound as defaults when this module is imported, so reassigning the
    module's globals afterwards (``sys.modules["kbv.sandbox.timer"]._perf_counter = ...``) does not reach
    the loop; callers keep their own reference to this function for the same reason.

    Returns:
        (per-call times in ms, clock name ``cuda-event``, ``perf_counter`` or ``wall-sync``).
    Raises:
        ValueError: no input sets, or ``trials < 1``.
        Whatever ``fn`` raises.
    """
    if not arg_sets or trials < 1:
        raise ValueError("time_calls needs at least one input set and one trial")
    device = torch.device(device)
    cuda = device.type == "cuda"
    n = len(arg_sets)
    keep = frozenset(keep)
    mutate = dict(mutate or {})
    mix = dict(mix or {})
    if (mutate or mix) and not refresh:
        raise ValueError("time_calls: mutate and mix need refresh")
    if refresh:
        buffers = [[a.clone() if isinstance(a, torch.Tensor) else a for a in arg_sets[(first_set + b) % n]]
                   for b in range(2)]

    def args_for(j: int) -> Sequence[object]:
        if not refresh:
            return arg_sets[(first_set + j) % n]
        return call_inputs(buffers[j % 2], arg_sets, first_set + j, tuple(mix.get(j - warmup, ())),
                           mutate.get(j - warmup, ()))

    def keep_output(i: int, out: object) -> None:
        if i in keep and kept is not None:
            kept[i] = ((first_set + warmup + i) % n, [o.detach().clone() for o in _flat(out)])

    with torch.inference_mode(False), torch.no_grad(), gc_paused():
        for i in range(warmup):
            fn(*args_for(i))
        if sync_inside:
            if cuda:
                _cuda_sync(device)
            times = []
            for i in range(trials):
                args = args_for(warmup + i)
                if cuda:
                    _cuda_sync(device)
                t0 = _perf_counter()
                out = fn(*args)
                _owed()
                if cuda:
                    _cuda_sync(device)
                else:
                    touch_pages(out)
                times.append((_perf_counter() - t0) * 1e3)
                keep_output(i, out)
                del out
            return times, "wall-sync"
        if cuda:
            flush = torch.empty(int(flush_bytes or 0) // 4, dtype=torch.int32, device=device) if flush_bytes else None
            _cuda_sync(device)
            starts = [_Event(enable_timing=True) for _ in range(trials)]
            ends = [_Event(enable_timing=True) for _ in range(trials)]
            for i in range(trials):
                args = args_for(warmup + i)
                if sync_each:  # as the candidate's per-call timing does (kbv.pipeline.timing_rounds), side by side
                    _cuda_sync(device)
                    _cuda_sleep(LAUNCH_COVER_CYCLES)
                if flush is not None:
                    flush.zero_()
                _event_record(starts[i])
                out = fn(*args)
                _owed()
                _event_record(ends[i])
                keep_output(i, out)
                if copy_out is not None:
                    copy_out(i, out)
                del out
            _cuda_sync(device)
            times = [float(_event_elapsed(s, e)) for s, e in zip(starts, ends)]
            del flush
            return times, "cuda-event"
        times = []
        for i in range(trials):
            args = args_for(warmup + i)
            t0 = _perf_counter()
            out = fn(*args)
            _owed()
            touch_pages(out)
            times.append((_perf_counter() - t0) * 1e3)
            keep_output(i, out)
            if copy_out is not None:
                copy_out(i, out)
            del out
        return times, "perf_counter"
