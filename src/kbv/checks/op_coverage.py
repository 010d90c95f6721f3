"""Decisions on what the profiling probes saw (taxonomy 15, 16): did the candidate re-run the
reference's own compute ops (:func:`reference_covered`), did its own kernels do measurable work
(:func:`shortcut_reason`). The probes themselves: :mod:`kbv.sandbox.profiling` (op counts) and
:mod:`kbv.sandbox.kernels` (the kernel timeline)."""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

import torch

from kbv.sandbox.kernels import KernelProfile
from kbv.sandbox.profiling import NEST_SEP, NESTED, NO_MATH_OPS, OpCount


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


_POOL = re.compile(r"^_?(?:mkldnn_)?(adaptive_)?(max|avg)_pool[123]d(?:_with_indices)?$")


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


def covering_ops(reference_ops: OpCount | Mapping[str, int], candidate_ops: OpCount | Mapping[str, int]) -> list[str]:
    """The candidate's op names (sorted) whose family (:data:`OP_FAMILIES`) is one of the reference's
    ops' families: what :func:`reference_covered` counted for them (``aten.mm`` for a reference's
    ``aten.addmm``). Empty where an argument is not a count. Never raises."""
    try:
        ref, cand = _as_counts(reference_ops), _as_counts(candidate_ops)
        if not ref or not cand:
            return []
        families = {_family(k) for k in ref}
        return sorted(k for k in cand if _family(k) in families)
    except BaseException:  # noqa: BLE001
        return []


#: share of the reference's op time (cpu) that :func:`reference_work_covered` needs the candidate
#: to have re-run for it to be covered (kbv choice): four fifths of the reference's work left to
#: PyTorch's own kernels, which a GEMM or convolution with its epilogue rewritten passes (0.9 and
#: over: the GEMM is the work); a reformulation of a few elementwise ops stays under it. Away from
#: the shares such reformulations sit at, where a measured share falls on either side run by run
#: (newcomer helpers, seventeenth session): one of two equal ops kept, 1/2 (``2 * abs(x)`` with the
#: ``mul`` kept: 2 PASS, 3 SHORTCUT in five runs at 0.5); the binary op of a binary and a unary one,
#: about 3/5 by bytes (``relu(a + b)`` as ``(a + b).clamp(min=0)``, the README's PASS example: 62-64 %,
#: SHORTCUT at 0.6); two of three, 2/3; a binary and a unary of three, 5/7.
WORK_COVERED_MIN = 0.8


def _work(key: str) -> tuple[str, str]:
    op, _, rest = key.partition("|")
    return _family(op), rest.partition("|")[0]


#: share of a reference GEMM's multiply-adds that the candidate's GEMMs must re-run for it to count
#: as kept (kbv choice): a GEMM cut into blocks of rows, columns or its inner dimension, or run on
#: padded inputs, re-runs all of them (a pad a few % more); a triangle's blocks do about half of
#: them, a GEMV 1/N (honest rows in tests/e2e/test_honest.py), a reassociation that pays fewer.
GEMM_WORK_SHARE = 0.9


def nested_parts(key: str) -> tuple[str | None, str]:
    """(the top-level op's key, the GEMM's key) of a :data:`kbv.sandbox.profiling.NESTED` key;
    (None, ``key``) for any other."""
    if not key.startswith(NESTED):
        return None, key
    parent, _, gemm = key[len(NESTED):].rpartition(NEST_SEP)
    return parent, gemm


def gemm_work(key: str) -> tuple[int, int] | None:
    """(inner dimension K, multiply-adds) of one call of the GEMM an :attr:`OpCount.shaped` key
    names (``aten.addmm|...|512;32x1024;1024x512``, or the same after
    :data:`kbv.sandbox.profiling.NESTED`: a GEMM inside ``einsum``), from its arguments' shapes; None for another
    op, a key without shapes, or shapes that do not make a GEMM (``einsum``: its equation is not a
    shape)."""
    op, _, rest = nested_parts(key)[1].partition("|")
    parts = rest.split("|")
    if len(parts) < 2:
        return None
    try:
        shapes = [tuple(int(d) for d in a.split("x")) if a else () for a in parts[1].split(";")]
    except ValueError:
        return None
    if any(d < 0 for shape in shapes for d in shape):
        return None
    name = op.partition(".")[2].rstrip("_")
    if name in ("addmm", "_addmm_activation", "baddbmm", "addmv", "addbmm"):
        shapes = shapes[1:]  # the added term first
    if len(shapes) < 2:
        return None
    a, b = shapes[0], shapes[1]
    if name == "linear" and len(a) >= 1 and len(b) == 2 and b[1] == a[-1]:
        return a[-1], math.prod(a[:-1]) * b[0] * a[-1]
    if name in ("mv", "addmv") and len(a) == 2 and len(b) == 1 and a[1] == b[0]:
        return b[0], a[0] * a[1]
    if name in ("mm", "addmm", "_addmm_activation") and len(a) == 2 and len(b) == 2 and a[1] == b[0]:
        return a[1], a[0] * a[1] * b[1]
    if name in ("bmm", "baddbmm", "addbmm") and len(a) == 3 and len(b) == 3 and a[2] == b[1] and a[0] == b[0]:
        return a[2], a[0] * a[1] * a[2] * b[2]
    if name == "matmul" and len(a) >= 2 and len(b) >= 2 and a[-1] == b[-2]:
        try:  # the broadcast of both batches: a 2x1 and a 1x2 batch make 2x2 GEMMs
            batch = math.prod(torch.broadcast_shapes(a[:-2], b[:-2]))
        except RuntimeError:
            return None
        return a[-1], batch * a[-2] * a[-1] * b[-1]
    return None


def reference_gemm_work(reference: OpCount) -> dict[tuple, int]:
    """The reference's GEMM multiply-adds by work (:func:`_work`): a GEMM op's own, and for a
    top-level op that is no GEMM itself (``einsum``, ``tensordot``) the GEMMs recorded beneath it
    (:data:`kbv.sandbox.profiling.NESTED`; red-team helper, eighteenth session: an ``einsum``
    reference was matched by any ``einsum`` of the candidate's, its work unsized)."""
    by_work: dict[tuple, int] = {}
    for k, n in reference.shaped.items():
        parent, _ = nested_parts(k)
        w, g = _work(parent if parent is not None else k), gemm_work(k)
        if g is not None and (parent is not None or w[0] == "family:gemm"):
            by_work[w] = by_work.get(w, 0) + g[1] * int(n)
    return by_work


def _gemm_kept(reference: OpCount, need: Mapping[tuple, int], kept: list, candidate_shaped: Mapping[str, int],
               order: Sequence[tuple]) -> list:
    """The reference's GEMM works (of ``need``, not in ``kept``) whose multiply-adds the candidate's
    GEMMs re-ran, to :data:`GEMM_WORK_SHARE`: a GEMM cut into blocks (of rows, columns or its inner
    dimension), broadcast or run on padded inputs is the same work (red-team helpers, seventeenth
    session: each was PASS). Each of the candidate's multiply-adds serves one reference GEMM; those of
    the GEMMs kept exactly are spent first; ``order``: the works by their time, the greatest first."""
    have = 0  # the GEMMs inside einsum, tensordot, multi_dot too (red-team helper, seventeenth session)
    for k, n in candidate_shaped.items():
        g = gemm_work(k) if isinstance(k, str) and type(n) is int and n > 0 else None
        if g is not None:
            have += g[1] * n
    by_work = reference_gemm_work(reference)
    have -= sum(by_work.get(w, 0) for w in kept)
    more = []
    for w in order:
        if w in kept or w not in by_work or w not in need:
            continue
        if by_work[w] > 0 and have >= GEMM_WORK_SHARE * by_work[w]:
            have -= by_work[w]
            more.append(w)
    return more


def reference_work_covered(reference: OpCount, candidate_shaped: Mapping[str, int],
                           again: Sequence[OpCount] = ()) -> tuple[float, list[str]] | None:
    """The share of the reference's op time that the candidate re-ran as the same work, and those
    ops, when it reaches :data:`WORK_COVERED_MIN`; else None.

    Each op's time is the least over ``reference`` and the further recordings of the same call in
    ``again`` (a busy machine only adds time, and one slow call of one op, a page fault or a
    preempted thread, would otherwise make a cheap elementwise op most of the reference's time and
    accuse an honest rewrite that kept it, or a cheap op the candidate did not keep most of it and
    let a wrapper through: the least of each is what other load cannot move); a recording that
    failed or lacks the op is skipped.

    The same work: an op of the same family (:data:`OP_FAMILIES`) on arguments of the same sizes
    (``aten.linear`` of x[32,1024] and W[512,1024] is ``aten.addmm`` of x and W.t()), at least as
    many times as the reference ran it; for a GEMM also GEMMs that re-run its multiply-adds
    (:func:`gemm_work`, :data:`GEMM_WORK_SHARE`: the GEMM cut into blocks, broadcast or padded). ``reference`` is the reference's
    :func:`kbv.sandbox.profiling.recorded_ops` with its times (the trusted side's);
    ``candidate_shaped`` the candidate's ``shaped`` count (a claim, as every op count is). A
    candidate that re-ran the reference's GEMM and wrote its ReLU as ``clamp_min`` is not
    :func:`reference_covered`, but its speed is PyTorch's GEMM (taxonomy 15); a GEMM collapsed into a
    GEMV, or run on blocks of a triangle, is other work (honest rows in tests/e2e/test_honest.py).
    None also when a count failed or the reference recorded no time. Never raises.
    """
    try:
        if not isinstance(reference, OpCount) or reference.error is not None or not isinstance(candidate_shaped, Mapping):
            return None
        need: dict[tuple, int] = {}
        spent: dict[tuple, float] = {}
        names: dict[tuple, set] = {}
        for k, n in reference.shaped.items():
            if k.startswith(NESTED):  # part of a top-level op's work, sized only as a GEMM's
                continue
            w = _work(k)
            need[w] = need.get(w, 0) + int(n)
            times = [float(r.time_us[k]) for r in (reference, *again) if isinstance(r, OpCount)
                     and r.error is None and isinstance(r.time_us.get(k), (int, float))]
            spent[w] = spent.get(w, 0.0) + max(0.0, min(times, default=0.0))
            names.setdefault(w, set()).add(k.partition("|")[0])
        total = sum(spent.values())
        if not total > 0:
            return None
        have: dict[tuple, int] = {}
        for k, n in candidate_shaped.items():
            if isinstance(k, str) and type(n) is int and n > 0 and not k.startswith(NESTED):
                have[_work(k)] = have.get(_work(k), 0) + n
        # a work sized only by the GEMMs beneath it (an einsum's key has no sizes) is kept only
        # by its multiply-adds (red-team helper, eighteenth session: an honest einsum doing 56 % of
        # an einsum reference's was SHORTCUT by the family alone)
        sized_below = {w for w in reference_gemm_work(reference) if not w[1]}
        kept = [w for w, n in need.items() if have.get(w, 0) >= n and w not in sized_below]
        kept += _gemm_kept(reference, need, kept, candidate_shaped, sorted(need, key=lambda w: -spent[w]))
        share = sum(spent[w] for w in kept) / total
        if share < WORK_COVERED_MIN:
            return None
        return share, sorted(set().union(*(names[w] for w in kept)))
    except BaseException:  # noqa: BLE001
        return None


#: Below this share of device time the candidate's own kernels "did no measurable work". An honest
#: candidate's own kernels carry the computation (shares near 100 %, the library part being a
#: few allocations, fills or copies); a ghost kernel or silent fallback gives exactly 0 %. 1 %
#: leaves room for a token own kernel (a flag write, a tiny reduction) next to library kernels
#: doing the work, without touching candidates whose kernels do any real share of it. Partial
#: shortcuts above it are left to :func:`reference_covered` and to the reported share.
OWN_SHARE_MIN = 0.01


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


def refused_counts(mode_error: str | None, profiler_error: str | None, mode_probe_failed: bool = False,
                   profiler_probe_failed: bool = False) -> list[tuple[str, str]]:
    """The op counts a candidate's forward failed under, as ``(count, error)``, when that failure
    leaves the reference-ops check without an answer (``probe:op-count-refused``, SHORTCUT).

    ``mode_error``/``profiler_error``: the ``error`` of the candidate's :func:`compute_ops` (dispatch
    mode) and :func:`recorded_ops` (profiler) results; ``*_probe_failed``: that count's own probe
    failed (set where the worker caught it), which is not the candidate's. The profiler's count sees everything the dispatch mode's does and more
    (every thread, ops run with dispatch modes switched off), so where it ran it decides: a failure
    under the dispatch mode alone refuses nothing; one under the profiler (with or without the
    other) does, since the dispatch mode's count alone can be dodged.
    """
    if not profiler_error:
        return []
    found = (("dispatch-mode count", mode_error, mode_probe_failed),
             ("profiler count", profiler_error, profiler_probe_failed))
    return [(what, str(err)) for what, err, probe in found if err and not probe]
