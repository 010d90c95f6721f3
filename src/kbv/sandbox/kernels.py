"""The kernel timeline of a forward call (cuda; taxonomy 15, 16): which GPU kernels ran, for how
long, and whether each is the candidate's *own* or a *library* kernel (:func:`kernel_profile`).
Runs in the candidate worker; :func:`kbv.checks.op_coverage.shortcut_reason` judges the result.

The torch entry points are bound when this module is imported (the candidate worker imports it
before any candidate code), as in :mod:`kbv.sandbox.profiling`.
"""

from __future__ import annotations

import bisect
import re
import warnings as _warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch

from kbv.sandbox.profiling import MAX_TEXT, describe_failure

# Bound at import (before candidate code runs in the candidate worker).
_no_grad = torch.no_grad
_profile = torch.profiler.profile
_ProfilerActivity = torch.profiler.ProfilerActivity
_DeviceType = torch._C._autograd.DeviceType
_cuda_sync = torch.cuda.synchronize
_cuda_available = torch.cuda.is_available


#: CPU-side annotations that torch.compile puts around the code it generated (Dynamo frame,
#: Inductor graph call, AOTAutograd function): kernels launched inside them are PyTorch's.
_COMPILE_PREFIXES = ("Torch-Compiled Region", "## Call CompiledFxGraph", "CompiledFunction")


#: Kernel names that only PyTorch or a vendor library produce (ATen, c10, cuBLAS/cuBLASLt incl.
#: its xmma/nvjet/gemv/splitK kernels, cuDNN, Inductor-generated Triton kernels) and copies/fills.
#: Applied to kernels whose launch site shows no aten op: CUDA graph replays of torch ops, torch
#: ops run on a thread the profiler does not watch, direct cuBLAS/cuDNN calls from an extension.
#: A Triton kernel's name is a Python identifier and cannot match the ``::`` forms.
_LIBRARY_KERNEL = re.compile(
    r"at::|c10::|cublas|cudnn|nvjet|xmma|\bgemv|gemmk1|gemmSN|splitKreduce|"
    r"^void (?:ampere|volta|turing|hopper|sm\d+)_|^(?:ampere|volta|turing|hopper|sm\d+)_|"
    r"^triton_(?:poi|red|per|tem|for)_|^Memcpy|^Memset",
    re.IGNORECASE,
)


_DEVICE_ACTIVITIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})


_RUNTIME_ACTIVITIES = frozenset({"cuda_runtime", "cuda_driver", "privateuse1_runtime"})


_SPAN_ACTIVITIES = frozenset({"cpu_op", "user_annotation", "python_function"})


#: CUDA runtime / driver API names (camelCase, no namespace): cudaLaunchKernel, cuLaunchKernelEx.
_RUNTIME_NAME = re.compile(r"^cu(?:da)?[A-Z]\w*$")


#: kineto's own CPU-side bookkeeping events (their correlation ids collide with ops' ids).
_KINETO_INTERNAL = frozenset({
    "Activity Buffer Request", "Iteration Start: PyTorch Profiler", "Record Window End",
    "Buffer Flush", "Overhead", "PyTorch Profiler (0)",
})


#: most kernels listed individually; the rest are merged into two "<other ...>" entries.
_MAX_KERNELS = 64


@dataclass(frozen=True)
class KernelProfile:
    """GPU kernels of the profiled forward calls (:func:`kernel_profile`).

    ``kernels``: ``(name, device_us, own)`` per distinct (kernel name, classification), largest
    first, ``device_us`` being the kernel's summed device time per forward call in microseconds
    (total over the profiled calls / ``repeats``); names longer than 512 characters are cut;
    beyond 64 entries the rest are merged into ``"<other own kernels>"`` /
    ``"<other library kernels>"``. Memcpy and memset activities are listed like kernels.
    ``own_us`` / ``total_us``: own and all device time per call (µs). ``own_share``: own_us /
    total_us, ``None`` when no kernel ran or the profile failed. ``repeats``: profiled calls.
    ``error``: ``None``, or why there is no profile ("cuda only", the model raised, the profiler
    could not start).
    """

    kernels: tuple[tuple[str, float, bool], ...] = ()
    own_us: float = 0.0
    total_us: float = 0.0
    own_share: float | None = None
    repeats: int = 0
    error: str | None = None
    probe_failed: bool = False  #: the profiler itself failed (or was asked wrongly), not the profiled call.
    #: device time per call (µs) with overlapping activities counted once: the union of every kernel's,
    #: memcpy's and memset's [start, end] interval over the profiled calls, / ``repeats`` (kernels on
    #: several streams overlap; ``total_us`` counts each). None where an activity's start is unknown.
    busy_us: float | None = None


@dataclass(frozen=True)
class _Span:
    """A CPU op or annotation: name, profiler thread, [start, end] ns, correlation id."""

    name: str
    thread: int
    start: int
    end: int
    corr: int


@dataclass(frozen=True)
class _Launch:
    """A CUDA runtime/driver call (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch...)."""

    name: str
    start: int
    corr: int


@dataclass(frozen=True)
class _DeviceEvent:
    """A kernel/memcpy/memset: name, duration ns, CUPTI correlation id, linked CPU op id."""

    name: str
    dur: int
    corr: int
    linked: int
    start: int | None = None  #: ns, on the profiler's clock (None: not known).


def _is_library_span(name: str) -> bool:
    return name.startswith("aten::") or name.startswith(_COMPILE_PREFIXES)


def _library_spans(spans: Sequence[_Span]) -> dict[int, bool]:
    """For each span's correlation id: is it, or any span enclosing it on its thread, library?"""
    by_thread: dict[int, list[_Span]] = {}
    for s in spans:
        by_thread.setdefault(s.thread, []).append(s)
    flags: dict[int, bool] = {}
    for group in by_thread.values():
        group.sort(key=lambda s: (s.start, -s.end))
        stack: list[tuple[_Span, bool]] = []
        for s in group:
            while stack and stack[-1][0].end < s.start:
                stack.pop()
            inherited = bool(stack) and stack[-1][1]
            flag = inherited or _is_library_span(s.name)
            flags[s.corr] = flag
            stack.append((s, flag))
    return flags


def _merged(intervals: Iterable[tuple[int, int]]) -> tuple[list[int], list[int]]:
    starts: list[int] = []
    ends: list[int] = []
    for a, b in sorted(intervals):
        if ends and a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return starts, ends


def _summarise(spans: Sequence[_Span], launches: Sequence[_Launch],
               devices: Sequence[_DeviceEvent], repeats: int) -> KernelProfile:
    """Classify device events by launch site and aggregate them per call (pure; unit-tested).

    A device event is *library* when (a) the CPU op it is linked to (the innermost op active when
    it was launched) or any span enclosing that op is an ``aten::`` op or a torch.compile region;
    or (b) its runtime launch call lies inside such a span on any thread (covers launches the
    profiler linked to no op); or (c) its name matches :data:`_LIBRARY_KERNEL`. Otherwise *own*.
    """
    flags = _library_spans(spans)
    lib_starts, lib_ends = _merged((s.start, s.end) for s in spans if _is_library_span(s.name))
    launch_by_corr = {r.corr: r for r in launches}
    per: dict[tuple[str, bool], int] = {}
    for d in devices:
        lib = flags.get(d.linked, False) if d.linked else False
        if not lib:
            r = launch_by_corr.get(d.corr)
            if r is not None:
                i = bisect.bisect_right(lib_starts, r.start) - 1
                lib = i >= 0 and r.start <= lib_ends[i]
        if not lib and _LIBRARY_KERNEL.search(d.name):
            lib = True
        key = (d.name[:MAX_TEXT], not lib)
        per[key] = per.get(key, 0) + max(int(d.dur), 0)
    n = max(int(repeats), 1)
    rows = sorted(((name, ns / 1000.0 / n, own) for (name, own), ns in per.items()),
                  key=lambda r: (-r[1], r[0]))
    if len(rows) > _MAX_KERNELS:
        rest = rows[_MAX_KERNELS - 2:]
        rows = rows[:_MAX_KERNELS - 2]
        for own, label in ((True, "<other own kernels>"), (False, "<other library kernels>")):
            us = sum(r[1] for r in rest if r[2] is own)
            if us > 0:
                rows.append((label, us, own))
    own_us = sum(r[1] for r in rows if r[2])
    total_us = sum(r[1] for r in rows)
    share = own_us / total_us if total_us > 0 else None
    return KernelProfile(kernels=tuple(rows), own_us=own_us, total_us=total_us, own_share=share,
                         repeats=n, busy_us=_busy_us(devices, n))


def _busy_us(devices: Sequence[_DeviceEvent], repeats: int) -> float | None:
    """The union of the device events' [start, start + dur] intervals in µs / ``repeats``; None
    when a start is unknown."""
    if any(d.start is None for d in devices):
        return None
    starts, ends = _merged((d.start, d.start + max(int(d.dur), 0)) for d in devices if d.start is not None)
    return sum(b - a for a, b in zip(starts, ends)) / 1000.0 / max(int(repeats), 1)


def _call(obj: Any, name: str, default: Any) -> Any:
    try:
        return getattr(obj, name)()
    except BaseException:  # noqa: BLE001 - an older torch without this accessor
        return default


def _events(prof: Any) -> tuple[list[_Span], list[_Launch], list[_DeviceEvent]]:
    """The raw kineto events of a finished ``torch.profiler.profile``, split by kind.

    Uses ``activity_type()`` where the event has it (torch ≥ 2.13); torch 2.11 has none, so a
    CPU event named like a CUDA API call (``cudaLaunchKernel``, ``cuLaunchKernelEx``,
    ``cudaGraphLaunch``) is a launch, kineto's own bookkeeping events are dropped, and a CUDA
    event is kept as a kernel/memcpy/memset when a launch carries its correlation id or, failing
    that, when no CPU span has its name (GPU-side copies of annotations have no launch).
    """
    raw = prof.profiler.kineto_results.events()
    spans: list[_Span] = []
    launches: list[_Launch] = []
    devices: list[tuple[str, int, int, int, str, int]] = []
    for e in raw:
        name = str(e.name())
        activity = str(_call(e, "activity_type", "") or "").lower().rsplit(".", 1)[-1]
        dtype = e.device_type()
        start, end = int(e.start_ns()), int(e.end_ns())
        if dtype == _DeviceType.CUDA:
            devices.append((name, end - start, int(e.correlation_id()),
                            int(_call(e, "linked_correlation_id", 0) or 0), activity, start))
        elif dtype == _DeviceType.CPU:
            if activity in _RUNTIME_ACTIVITIES or (not activity and _RUNTIME_NAME.match(name)):
                launches.append(_Launch(name, start, int(e.correlation_id())))
            elif activity in _SPAN_ACTIVITIES or (not activity and name not in _KINETO_INTERNAL):
                spans.append(_Span(name, int(e.start_thread_id()), start, end,
                                   int(e.correlation_id())))
    launched = {r.corr for r in launches}
    span_names = {s.name for s in spans}
    kept = []
    for name, dur, corr, linked, activity, start in devices:
        if activity:
            keep = activity in _DEVICE_ACTIVITIES
        else:
            keep = corr in launched or name not in span_names
        if keep:
            kept.append(_DeviceEvent(name, dur, corr, linked, start))
    return spans, launches, kept


def kernel_profile(fn: Callable[..., Any], args: Sequence[Any], device: Any,
                   repeats: int = 3) -> KernelProfile:
    """Profile the GPU kernels of ``fn(*args)`` and split their device time into own / library.

    One un-profiled warm-up call first (Triton JIT and autotuning, ``load_inline`` lazy loading,
    cuBLAS handles and workspaces stay out of the profile), a device synchronize, then ``repeats``
    calls under ``torch.no_grad()`` inside ``torch.profiler.profile(activities=[CPU, CUDA])``
    followed by a synchronize inside the profile, so every launched kernel has finished.

    Args:
        fn: the forward callable. args: its inputs on ``device``. device: a cuda device
            (``"cuda"``, ``"cuda:0"``, ``torch.device``); anything else gives ``error="cuda
            only"``, as does a machine without CUDA. repeats: profiled calls (≥ 1).

    Returns:
        :class:`KernelProfile` with per-call device times in µs (see there; ``busy_us`` the union of
        the activities' intervals, which overlap across streams). Classification:
        *library* = launched under an ``aten::`` op (cuBLAS, cuDNN, at::native kernels, also when a
        C++ extension calls ``at::``/``torch::`` functions, which go through the dispatcher), inside
        a torch.compile region, or named like a PyTorch/vendor-library kernel (covers CUDA graph
        replays of torch ops, whose launch site is ``graph.replay()``); *own* = everything else
        (kernels launched by a ``load_inline`` extension's own code or a Triton launcher).

    Errors (never raised): ``error`` is set when the device is not cuda, when ``fn`` raises in
    the warm-up or the profiled calls, or when the profiler cannot start or be read (e.g. another
    profiler is active).

    Cost: the warm-up plus ``repeats`` calls under CUPTI tracing, and the trace post-processing
    (H200, torch 2.11: 64 ms on a first use in a process, 6 ms after, for a small model; it grows
    with the number of ops and kernels). No lasting overhead on later launches was measured.
    Do not call it inside a timed region, a CUDA graph capture or while another profiler runs
    (that gives ``error``).
    """
    try:
        dev = torch.device(device)
        if dev.type != "cuda" or not _cuda_available():
            return KernelProfile(error="cuda only", probe_failed=True)
        n = int(repeats)
        if n < 1:
            return KernelProfile(error=f"repeats must be >= 1, got {n}", probe_failed=True)
    except BaseException as exc:  # noqa: BLE001
        return KernelProfile(error=f"bad device: {describe_failure(exc)}", probe_failed=True)
    try:
        with _no_grad():
            fn(*args)
        _cuda_sync(dev)
    except BaseException as exc:  # noqa: BLE001 - untrusted code
        return KernelProfile(error=f"warm-up call failed: {describe_failure(exc)}")
    failure = None
    try:
        # the profiler warns once per process that it "clears events at the end of each cycle"
        with _warnings.catch_warnings():
            _warnings.simplefilter("ignore")
            with _profile(activities=[_ProfilerActivity.CPU, _ProfilerActivity.CUDA]) as prof:
                try:
                    with _no_grad():
                        for _ in range(n):
                            fn(*args)
                    _cuda_sync(dev)
                except BaseException as exc:  # noqa: BLE001 - untrusted code
                    failure = f"profiled call failed: {describe_failure(exc)}"
        if failure is not None:
            return KernelProfile(repeats=n, error=failure)
        spans, launches, devices = _events(prof)
        return _summarise(spans, launches, devices, n)
    except BaseException as exc:  # noqa: BLE001 - profiler failure
        return KernelProfile(repeats=n, error=failure or f"profiler failed: {describe_failure(exc)}",
                             probe_failed=failure is None)
