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

import time
from typing import Callable, Sequence

import torch

_perf_counter = time.perf_counter
_Event = torch.cuda.Event
_event_record = torch.cuda.Event.record
_event_elapsed = torch.cuda.Event.elapsed_time
_cuda_sync = torch.cuda.synchronize

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
        "kbv.timing._perf_counter": (_MODULE["_perf_counter"], _perf_counter),
        "kbv.timing._Event": (_MODULE["_Event"], _Event),
        "kbv.timing._event_record": (_MODULE["_event_record"], _event_record),
        "kbv.timing._event_elapsed": (_MODULE["_event_elapsed"], _event_elapsed),
        "kbv.timing._cuda_sync": (_MODULE["_cuda_sync"], _cuda_sync),
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


def time_calls(
    fn: Callable[..., object],
    arg_sets: Sequence[Sequence[object]],
    *,
    device: torch.device | str,
    warmup: int,
    trials: int,
    flush_bytes: int | None = None,
    first_set: int = 0,
    _perf_counter=_perf_counter,
    _Event=_Event,
    _event_record=_event_record,
    _event_elapsed=_event_elapsed,
    _cuda_sync=_cuda_sync,
) -> tuple[list[float], str]:
    """Time ``trials`` calls of ``fn`` after ``warmup`` untimed ones.

    Call ``j`` (warmup calls first, then timed ones) gets ``arg_sets[(first_set + j) % len(arg_sets)]``,
    so consecutive calls never see the same input set when there are two or more.

    The clock callables are bound as defaults when this module is imported, so reassigning the
    module's globals afterwards (``sys.modules["kbv.timing"]._perf_counter = ...``) does not reach
    the loop; callers keep their own reference to this function for the same reason.

    Returns:
        (per-call times in ms, clock name ``cuda-event`` or ``perf_counter``).
    Raises:
        ValueError: no input sets, or ``trials < 1``.
        Whatever ``fn`` raises.
    """
    if not arg_sets or trials < 1:
        raise ValueError("time_calls needs at least one input set and one trial")
    device = torch.device(device)
    n = len(arg_sets)
    with torch.inference_mode(False), torch.no_grad():
        if device.type == "cuda":
            flush = torch.empty(int(flush_bytes or 0) // 4, dtype=torch.int32, device=device) if flush_bytes else None
            for i in range(warmup):
                fn(*arg_sets[(first_set + i) % n])
            _cuda_sync(device)
            starts = [_Event(enable_timing=True) for _ in range(trials)]
            ends = [_Event(enable_timing=True) for _ in range(trials)]
            for i in range(trials):
                if flush is not None:
                    flush.zero_()
                args = arg_sets[(first_set + warmup + i) % n]
                _event_record(starts[i])
                fn(*args)
                _event_record(ends[i])
            _cuda_sync(device)
            times = [float(_event_elapsed(s, e)) for s, e in zip(starts, ends)]
            del flush
            return times, "cuda-event"
        for i in range(warmup):
            fn(*arg_sets[(first_set + i) % n])
        times = []
        for i in range(trials):
            args = arg_sets[(first_set + warmup + i) % n]
            t0 = _perf_counter()
            fn(*args)
            times.append((_perf_counter() - t0) * 1e3)
        return times, "perf_counter"
