"""Proof that the candidate's own code did the work (taxonomy entries 15 and 16).

Two independent probes, both safe to call on an untrusted model: they never raise; any failure
(the model raises, the profiler refuses, the candidate tampers with the probe) comes back as a
result whose ``error`` is set.

1. :func:`compute_ops` (cpu and cuda) runs ``fn(*args)`` once under ``torch.no_grad()`` inside a
   ``TorchDispatchMode`` and counts the aten *compute* ops that reached the dispatcher, by overload
   packet (``aten.mm``, ``aten.relu``, ``aten._softmax``, ...). Ops that do no math (views,
   allocation, copies, fills, metadata; :data:`NO_MATH_OPS`) are left out. Work done by a custom
   C++/CUDA extension's own loops or kernels, or by a Triton kernel, never goes through the
   dispatcher and is invisible here; so is the Triton interpreter (``TRITON_INTERPRET=1``), whose
   loads and stores issue only ``empty``/``new_empty``/``set_``/``copy_`` (all in the list).
   An extension that calls ``at::matmul``/``torch::relu`` from C++ *is* seen: those calls go
   through the dispatcher like Python ones. :func:`reference_covered` compares a reference's count
   with a candidate's, both measured the same way on the same inputs (so both sides sit at the
   same decomposition level: composite ops such as ``F.linear`` or ``torch.matmul`` are decomposed
   before the mode sees them, e.g. ``F.linear`` → ``aten.t`` + ``aten.addmm`` on cpu): a candidate
   that executed every reference compute op re-ran the reference in torch — a SHORTCUT.

2. :func:`kernel_profile` (cuda only) runs ``fn`` under ``torch.profiler.profile`` and lists the
   GPU kernels (and memcpy/memset activities) of the forward calls with their device time; each is
   *library* (launched under an ``aten::`` op, inside a ``torch.compile`` region, or named like a
   PyTorch/vendor-library kernel) or *own* (everything else: a ``load_inline`` extension's or a
   Triton launcher's kernel). :func:`shortcut_reason` turns a profile whose own kernels did no
   measurable work (share below :data:`OWN_SHARE_MIN`) into a reason string.

The two probes complement each other: a ghost kernel or silent fallback (entry 16) shows 0 % own
time and, usually, the reference's ops re-run; a decoy kernel that does a trivial copy next to
``torch.matmul`` (entry 15) can stay above 1 % own time but still covers the reference's ops.

The torch entry points used here are bound when this module is imported (the candidate worker
imports it before any candidate code, as with :mod:`kbv.sandbox.timing`), so reassigning
``torch.profiler.profile`` or ``TorchDispatchMode`` afterwards does not reach these probes. They
stay in-process probes: a determined candidate can detect the dispatch mode or the profiler and
behave differently (taxonomy 6), see docs/architecture.md "Known gaps".
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
import warnings as _warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode as _TorchDispatchMode
from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode, _push_mode

__all__ = [
    "OpCount",
    "KernelProfile",
    "compute_ops",
    "recorded_ops",
    "reference_covered",
    "kernel_profile",
    "shortcut_reason",
    "NO_MATH_OPS",
    "OP_FAMILIES",
    "OWN_SHARE_MIN",
]

# Bound at import (before candidate code runs in the candidate worker).
_no_grad = torch.no_grad
_len_dispatch_stack = torch._C._len_torch_dispatch_stack
_profile = torch.profiler.profile
_ProfilerActivity = torch.profiler.ProfilerActivity
_DeviceType = torch._C._autograd.DeviceType
_cuda_sync = torch.cuda.synchronize
_cuda_available = torch.cuda.is_available

#: longest error message / kernel name kept in a result (characters).
_MAX_TEXT = 512

# ---------------------------------------------------------------------------------------------
# compute ops
# ---------------------------------------------------------------------------------------------

#: Views, reshapes and stride changes: new metadata over the same storage, no math. Any op whose
#: schema marks it as a view (``OpOverload.is_view``) is left out as well, listed or not.
_VIEW_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "as_strided_", "expand",
    "expand_as", "broadcast_to", "t", "t_", "transpose", "transpose_", "permute", "squeeze",
    "squeeze_", "unsqueeze", "unsqueeze_", "flatten", "unflatten", "narrow", "select", "slice",
    "split", "split_with_sizes", "unsafe_split", "unsafe_split_with_sizes", "unbind", "chunk",
    "unsafe_chunk", "tensor_split", "hsplit", "vsplit", "dsplit", "diagonal", "movedim", "moveaxis",
    "view_as", "view_as_real", "view_as_complex", "unfold", "alias", "numpy_T", "matrix_H", "mT",
    "mH", "adjoint", "swapaxes", "swapdims", "real", "imag", "_conj", "conj", "_neg_view",
    "resolve_conj", "resolve_neg", "detach", "detach_", "lift", "lift_fresh", "atleast_1d",
    "atleast_2d", "atleast_3d", "_indices", "_values", "indices", "values", "crow_indices",
    "col_indices", "ccol_indices", "row_indices", "_reshape_from_tensor", "_shape_as_tensor",
})

#: Copies that reproduce the same logical values (layout, dtype or device changes), including the
#: functional ``<view>_copy`` variants of every view above.
_COPY_OPS = frozenset({
    "clone", "copy", "copy_", "_copy_from", "_copy_from_and_resize", "contiguous", "to",
    "_to_copy", "type_as", "_reshape_copy", "lift_fresh_copy", "pin_memory", "_pin_memory",
}) | frozenset(v + "_copy" for v in _VIEW_OPS if not v.endswith("_"))

#: Allocation and input-independent constant fills.
_ALLOC_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like",
    "new_full", "scalar_tensor", "_efficientzerotensor", "arange", "range", "linspace", "logspace",
    "eye", "fill", "fill_", "zero", "zero_", "_empty_affine_quantized",
    "_empty_per_channel_affine_quantized",
})

#: Storage, metadata, scalar reads and runtime asserts.
_META_OPS = frozenset({
    "set_", "resize", "resize_", "resize_as_", "_resize_output_", "item", "_local_scalar_dense",
    "record_stream", "_assert_async", "_assert_scalar", "_assert_tensor_metadata",
    "_functional_assert_async", "_functional_assert_scalar", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "size", "stride", "numel", "dim", "is_same_size",
    "_has_compatible_shallow_copy_type", "is_pinned", "_version", "output_nr", "is_leaf",
    "requires_grad_", "retain_grad", "_make_dep_token", "sym_constrain_range",
    "sym_constrain_range_for_size",
})

#: aten overload packets (names without the ``aten.`` prefix) that do no math and are never
#: counted by :func:`compute_ops`. Ops that read input values to produce new ones are counted even
#: when they only move data (``cat``, ``stack``, ``index``, ``gather``, ``flip``, ``roll``,
#: ``constant_pad_nd``, ``where``): a problem can ask for exactly that work. Casts (``_to_copy``)
#: are copies here.
NO_MATH_OPS: frozenset[str] = _VIEW_OPS | _COPY_OPS | _ALLOC_OPS | _META_OPS

#: Families of aten ops that are the same library computation reached through different entry
#: points; the dispatch picks one by input rank, bias, device or backend (``F.linear`` → ``addmm``
#: or ``mm``, ``torch.matmul`` → ``mm``/``bmm``, ``conv2d`` → ``convolution``, cudnn or mkldnn
#: variants). :func:`reference_covered` compares families, so a candidate that computes the
#: reference's ``F.linear`` with chunked ``torch.mm`` calls still covers it. Other ops are never
#: merged: ``relu`` and ``clamp_min`` are different ops (a reformulation is not a re-run; the
#: kernel profile judges it). In-place variants (``relu_``) count as their out-of-place op.
OP_FAMILIES: dict[str, frozenset[str]] = {
    "gemm": frozenset({
        "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_addmm_activation", "mv",
        "addmv", "dot", "vdot", "einsum", "tensordot", "mkldnn_linear",
    }),
    "convolution": frozenset({
        "convolution", "_convolution", "_convolution_mode", "conv1d", "conv2d", "conv3d",
        "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "cudnn_convolution",
        "cudnn_convolution_transpose", "mkldnn_convolution", "miopen_convolution",
        "miopen_convolution_transpose", "miopen_depthwise_convolution", "_slow_conv2d_forward",
        "slow_conv3d_forward", "slow_conv_transpose2d", "slow_conv_transpose3d",
        "slow_conv_dilated2d", "slow_conv_dilated3d", "thnn_conv2d", "_conv_depthwise2d",
        "conv_depthwise3d", "_nnpack_spatial_convolution", "convolution_overrideable",
    }),
    "softmax": frozenset({"softmax", "_softmax", "_safe_softmax", "special_softmax"}),
    "log_softmax": frozenset({"log_softmax", "_log_softmax", "special_log_softmax"}),
    "layer_norm": frozenset({"layer_norm", "native_layer_norm"}),
    "rms_norm": frozenset({"rms_norm", "_fused_rms_norm"}),
    "group_norm": frozenset({"group_norm", "native_group_norm"}),
    "batch_norm": frozenset({
        "batch_norm", "native_batch_norm", "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training", "_batch_norm_impl_index", "cudnn_batch_norm",
        "miopen_batch_norm", "_batch_norm_with_update", "_batch_norm_no_update",
    }),
    "attention": frozenset({
        "scaled_dot_product_attention", "_scaled_dot_product_attention_math",
        "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable", "_flash_attention_forward",
        "_efficient_attention_forward",
    }),
}
_FAMILY_OF = {op: fam for fam, ops in OP_FAMILIES.items() for op in ops}
# max_pool2d / max_pool2d_with_indices / mkldnn_max_pool2d / adaptive_avg_pool2d / _adaptive_...
_POOL = re.compile(r"^_?(?:mkldnn_)?(adaptive_)?(max|avg)_pool[123]d(?:_with_indices)?$")


@dataclass(frozen=True)
class OpCount:
    """aten compute ops executed by one call (:func:`compute_ops`).

    ``ops`` maps an overload packet's qualified name (``"aten.addmm"``; in-place ops keep their
    own name, ``"aten.relu_"``; a custom op registered through ``torch.library`` appears under its
    namespace, ``"mylib.op"``) to the number of times it was dispatched. ``error`` is ``None``
    when the call completed; otherwise it names the failure and ``ops`` holds what was counted
    before it (incomplete, not to be judged).
    """

    ops: dict[str, int] = field(default_factory=dict)
    error: str | None = None


def _describe(exc: BaseException) -> str:
    """One line naming an exception raised by untrusted code; never raises itself."""
    try:
        name = type(exc).__name__
        if not isinstance(name, str):
            name = "exception"
    except BaseException:  # noqa: BLE001 - a hostile metaclass
        name = "exception"
    try:
        msg = str(exc)
        if not isinstance(msg, str):
            msg = ""
    except BaseException:  # noqa: BLE001 - a hostile __str__
        msg = "<unprintable>"
    text = f"{name}: {msg}" if msg else name
    text = " ".join(text.split())
    return text[:_MAX_TEXT]


def _packet_name(func: Any) -> str:
    try:
        name = str(func.overloadpacket)
        return name if name else "<unknown>"
    except BaseException:  # noqa: BLE001
        return "<unknown>"


def _does_math(func: Any, qualified: str) -> bool:
    ns, _, name = qualified.partition(".")
    if ns == "aten" and name in NO_MATH_OPS:
        return False
    try:
        if func.is_view:
            return False
    except BaseException:  # noqa: BLE001
        pass
    return True


class _OpCounter(_TorchDispatchMode):
    """Counts every compute op dispatched while active, then runs it unchanged."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = _packet_name(func)
        if _does_math(func, name):
            self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def compute_ops(fn: Callable[..., Any], args: Sequence[Any]) -> OpCount:
    """Count the aten compute ops dispatched by one ``fn(*args)`` call under ``torch.no_grad()``.

    Args:
        fn: the forward callable (``model`` or ``model.forward``), run exactly once; on cuda its
            kernels are only launched (no synchronize here), which is enough for counting.
        args: positional arguments, any shapes and devices (cpu or cuda); they are passed as is,
            so pass a copy if ``fn`` may mutate them.

    Returns:
        :class:`OpCount`: ``ops`` = {qualified overload packet: number of dispatches}, leaving out
        :data:`NO_MATH_OPS` and every view op. The count is taken at the level the Python dispatch
        mode sees: composite-implicit ops (``F.linear``, ``torch.matmul``, ``contiguous``) are
        already decomposed, and ops called from inside another op's kernel are not counted
        separately. Call the reference and the candidate the same way (same device, same inputs)
        so their counts are comparable.

    Errors (never raised): ``error`` is set when ``fn`` raises (any ``BaseException``, including
    ``SystemExit`` raised by candidate code; the message is the exception's class and text), when
    the mode cannot be entered or left, or when the candidate removed or replaced the dispatch mode
    during the call ("dispatch mode removed during the call"): the count then misses ops.

    Blind spots: ops run by threads other than the caller's (the mode is thread-local), CUDA graph
    replays and Triton or custom-extension kernels (no aten ops: which is the point), work done at
    construction time.
    """
    counter = None
    try:
        counter = _OpCounter()
        depth = _len_dispatch_stack()
        error = None
        with _no_grad():
            counter.__enter__()
            try:
                fn(*args)
            except BaseException as exc:  # noqa: BLE001 - untrusted code
                error = _describe(exc)
            finally:
                if _restore_stack(counter, depth):
                    error = error or "dispatch mode removed during the call"
        return OpCount(ops=dict(counter.counts), error=error)
    except BaseException as exc:  # noqa: BLE001 - probe failure
        counts = dict(counter.counts) if counter is not None else {}
        return OpCount(ops=counts, error=f"compute_ops failed: {_describe(exc)}")


def _experimental_all_threads() -> Any:
    """A profiler config that records every thread of the process, or ``None`` where this
    torch has no ``profile_all_threads`` switch (then only the calling thread is recorded)."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return _ExperimentalConfig(profile_all_threads=True)
    except BaseException:  # noqa: BLE001
        return None


@contextlib.contextmanager
def _quiet_stderr() -> Any:
    """Send file descriptor 2 to /dev/null for the block: Kineto prints ``USDT: ...
    profiler_start/stop`` lines there on every CPU profiler session, which cluttered every case
    of ``kbv demo``. Best effort: does nothing if the
    descriptors cannot be duplicated."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 2)
        finally:
            os.close(null)
        yield
    finally:
        try:
            os.dup2(saved, 2)
        finally:
            os.close(saved)


def recorded_ops(fn: Callable[..., Any], args: Sequence[Any]) -> OpCount:
    """Count the aten compute ops of one ``fn(*args)`` call, as the autograd profiler records
    them in **every thread** of the process (``profile_all_threads``), at the dispatcher.

    A second count next to :func:`compute_ops`, which sees only what a Python dispatch mode sees
    in the calling thread: ops run by the candidate's own threads (also ones started through
    ``_thread``, or called from C such as ``map(torch.softmax, ...)``), ops dispatched with the
    Python dispatch key excluded (``torch._C._DisableTorchDispatch``) and ops run inside a Python
    (each a way to hide ops from the dispatch mode).

    *Top-level* ops only (no ``aten::`` compute op above them in their thread): ``softmax`` once, not
    again as the ``_softmax`` it calls; composite ops such as ``aten.linear`` are not decomposed.
    Counting every depth was tried and dropped: one ``F.linear`` then counts three gemm ops and
    an honest ``x.mean()`` covers a ``sum`` reference. Count
    the reference the same way; :func:`reference_covered` compares by family. User annotations
    (``record_function``, whatever their name) are neither counted nor treated as parents, and
    neither are ops that do no math (``clone``, ``copy_``, ``empty``): a Tensor subclass whose
    ``__torch_dispatch__`` runs torch.softmax inside a ``clone`` (an evasion otherwise) has its
    softmax counted at the top level. Ops
    hidden inside a kernel the candidate registered for another aten op are left to the scan
    (``scan:overrides-torch-op``) and the worker's registration check.

    Returns:
        :class:`OpCount` (``aten.<name>`` → calls, without :data:`NO_MATH_OPS`); ``error`` when
        ``fn`` raises or the profiler cannot start or be read (e.g. another profiler is active).
        Where this torch has no ``profile_all_threads`` switch only the calling thread is
        recorded. Never raises. Cost: the first profiler session of a process initialises Kineto
        (about 3 s on the 2-core CI machine under load; 64 ms on the H200); later ones
        add a few ms to the call.
    """
    error = None
    top: dict[str, int] = {}
    try:
        cfg = _experimental_all_threads()
        kwargs = {"experimental_config": cfg} if cfg is not None else {}
        with _no_grad(), _quiet_stderr():
            with _profile(activities=[_ProfilerActivity.CPU], **kwargs) as prof:
                try:
                    fn(*args)
                except BaseException as exc:  # noqa: BLE001 - untrusted code
                    error = _describe(exc)

        def is_op(ev: Any) -> bool:
            return str(ev.name).startswith("aten::") and not getattr(ev, "is_user_annotation", False)

        def is_math(ev: Any) -> bool:  # a parent that can legitimately contain compute ops
            return is_op(ev) and str(ev.name)[len("aten::"):] not in NO_MATH_OPS

        for ev in prof.events():
            if not is_op(ev):
                continue
            op = str(ev.name)[len("aten::"):]
            if op in NO_MATH_OPS:
                continue
            key = f"aten.{op}"
            parent = ev.cpu_parent
            while parent is not None and not is_math(parent):
                parent = parent.cpu_parent
            if parent is None:
                top[key] = top.get(key, 0) + 1
        return OpCount(ops=top, error=error)
    except BaseException as exc:  # noqa: BLE001 - probe failure
        return OpCount(ops=top, error=f"recorded_ops failed: {_describe(exc)}")


def _current_mode() -> Any:
    return _get_current_dispatch_mode()


def _restore_stack(counter: _OpCounter, depth: int) -> bool:
    """Leave the dispatch-mode stack as it was before ``counter`` was entered.

    Pops modes the candidate left above ours, then exits ours (pushing it back first if the
    candidate popped it, so that its bookkeeping is undone). True when the stack was not as we
    left it, i.e. part of the call may have run without the counter.
    """
    tampered = False
    while _len_dispatch_stack() > depth and _current_mode() is not counter:
        _pop_mode()
        tampered = True
    if not (_len_dispatch_stack() == depth + 1 and _current_mode() is counter):
        tampered = True
        _push_mode(counter)
    counter.__exit__(None, None, None)
    return tampered


def _family(qualified: str) -> str:
    """Canonical comparison key of an op: its family for aten ops, the name itself otherwise."""
    ns, dot, name = qualified.partition(".")
    if not dot or ns != "aten":
        return qualified
    if name.endswith("_") and not name.endswith("__") and len(name) > 1:
        name = name[:-1]  # in-place variant
    fam = _FAMILY_OF.get(name)
    if fam is not None:
        return f"family:{fam}"
    m = _POOL.match(name)
    if m:
        return f"family:{m.group(1) or ''}{m.group(2)}_pool"
    return f"aten.{name}"


def _as_counts(value: Any) -> dict[str, int] | None:
    """Compute-op counts from an :class:`OpCount` (``None`` if it failed) or a mapping."""
    if isinstance(value, OpCount):
        if value.error is not None:
            return None
        value = value.ops
    if not isinstance(value, Mapping):
        return None
    out: dict[str, int] = {}
    for k, v in value.items():
        if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            continue
        ns, _, name = k.partition(".")
        if ns == "aten" and name in NO_MATH_OPS:
            continue
        out[k] = v
    return out


def reference_covered(reference_ops: OpCount | Mapping[str, int],
                      candidate_ops: OpCount | Mapping[str, int]) -> list[str] | None:
    """The reference's compute ops if the candidate executed all of them, else ``None``.

    Both arguments are :func:`compute_ops` results (or their ``ops`` mappings) of the reference
    and the candidate called the same way on the same inputs. The candidate *covers* the reference
    when, for every reference op, it dispatched an op of the same family (:data:`OP_FAMILIES`;
    in-place variants count as their op) at least as many times as the reference did. Counting
    calls, not just names, keeps a candidate that wrote its own kernel for one of two reference
    ``linear`` layers (and called torch for the other) from being covered.

    Returns:
        the sorted qualified names of the reference's compute ops (e.g. ``["aten.addmm",
        "aten.relu"]``) when covered: the candidate re-ran the reference's own torch ops, a
        SHORTCUT (taxonomy 15/16). ``None`` when not covered, when the reference has no compute
        ops (nothing to compare), when either count failed (``error`` set) or when an argument is
        not a count. Never raises.
    """
    try:
        ref = _as_counts(reference_ops)
        cand = _as_counts(candidate_ops)
        if not ref or cand is None:
            return None
        need: dict[str, int] = {}
        for k, v in ref.items():
            need[_family(k)] = need.get(_family(k), 0) + v
        have: dict[str, int] = {}
        for k, v in cand.items():
            have[_family(k)] = have.get(_family(k), 0) + v
        if all(have.get(f, 0) >= n for f, n in need.items()):
            return sorted(ref)
        return None
    except BaseException:  # noqa: BLE001
        return None


# ---------------------------------------------------------------------------------------------
# kernel profile
# ---------------------------------------------------------------------------------------------

#: Below this share of device time the candidate's own kernels "did no measurable work". An honest
#: candidate's own kernels carry the computation (shares near 100 %, the library part being a
#: few allocations, fills or copies); a ghost kernel or silent fallback gives exactly 0 %. 1 %
#: leaves room for a token own kernel (a flag write, a tiny reduction) next to library kernels
#: doing the work, without touching candidates whose kernels do any real share of it. Partial
#: shortcuts above it are left to :func:`reference_covered` and to the reported share.
OWN_SHARE_MIN = 0.01

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
        key = (d.name[:_MAX_TEXT], not lib)
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
                         repeats=n)


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
    devices: list[tuple[str, int, int, int, str]] = []
    for e in raw:
        name = str(e.name())
        activity = str(_call(e, "activity_type", "") or "").lower().rsplit(".", 1)[-1]
        dtype = e.device_type()
        start, end = int(e.start_ns()), int(e.end_ns())
        if dtype == _DeviceType.CUDA:
            devices.append((name, end - start, int(e.correlation_id()),
                            int(_call(e, "linked_correlation_id", 0) or 0), activity))
        elif dtype == _DeviceType.CPU:
            if activity in _RUNTIME_ACTIVITIES or (not activity and _RUNTIME_NAME.match(name)):
                launches.append(_Launch(name, start, int(e.correlation_id())))
            elif activity in _SPAN_ACTIVITIES or (not activity and name not in _KINETO_INTERNAL):
                spans.append(_Span(name, int(e.start_thread_id()), start, end,
                                   int(e.correlation_id())))
    launched = {r.corr for r in launches}
    span_names = {s.name for s in spans}
    kept = []
    for name, dur, corr, linked, activity in devices:
        if activity:
            keep = activity in _DEVICE_ACTIVITIES
        else:
            keep = corr in launched or name not in span_names
        if keep:
            kept.append(_DeviceEvent(name, dur, corr, linked))
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
        :class:`KernelProfile` with per-call device times in µs (see there). Classification:
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
            return KernelProfile(error="cuda only")
        n = int(repeats)
        if n < 1:
            return KernelProfile(error=f"repeats must be >= 1, got {n}")
    except BaseException as exc:  # noqa: BLE001
        return KernelProfile(error=f"bad device: {_describe(exc)}")
    try:
        with _no_grad():
            fn(*args)
        _cuda_sync(dev)
    except BaseException as exc:  # noqa: BLE001 - untrusted code
        return KernelProfile(error=f"warm-up call failed: {_describe(exc)}")
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
                    failure = f"profiled call failed: {_describe(exc)}"
        if failure is not None:
            return KernelProfile(repeats=n, error=failure)
        spans, launches, devices = _events(prof)
        return _summarise(spans, launches, devices, n)
    except BaseException as exc:  # noqa: BLE001 - profiler failure
        return KernelProfile(repeats=n, error=failure or f"profiler failed: {_describe(exc)}")


def shortcut_reason(profile: KernelProfile) -> str | None:
    """Why a profile shows a shortcut, or ``None``.

    A reason (one line: own and total µs per call, the share, the largest library kernels) when
    kernels ran (``total_us > 0``) but the candidate's own kernels did less than
    :data:`OWN_SHARE_MIN` (1 %) of the device time: the work was done by PyTorch or a vendor
    library (taxonomy 15 baseline wrapper, 16 ghost kernel / silent fallback). ``None`` when the
    own share is at least that, when no kernel ran (nothing to judge here: a passthrough or a CPU
    result is other detectors' business) and when the profile failed (``error`` set). Never raises.
    """
    try:
        if not isinstance(profile, KernelProfile) or profile.error is not None:
            return None
        if profile.own_share is None or not profile.total_us > 0:
            return None
        if profile.own_share >= OWN_SHARE_MIN:
            return None
        top = [name for name, _, own in profile.kernels if not own][:3]
        short = [t if len(t) <= 80 else t[:77] + "..." for t in top]
        return (f"own kernels did {profile.own_us:.2f} of {profile.total_us:.2f} µs device time per"
                f" call ({profile.own_share:.1%} < {OWN_SHARE_MIN:.0%}); library kernels: "
                + "; ".join(short))
    except BaseException:  # noqa: BLE001
        return None
