"""The op tables and the result type of :mod:`kbv.sandbox.profiling`'s op counts: which aten ops do
no math (views, copies, allocation, metadata), how a GEMM run beneath another op is keyed, and
:class:`OpCount`. Plain data, imported by the candidate worker before any candidate code (its names
are under :class:`kbv.sandbox.guard.HarnessGuard`'s watch with every kbv module's)."""

from __future__ import annotations

from dataclasses import dataclass, field

#: longest error message / kernel name kept in a result (characters).
MAX_TEXT = 512

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
#: counted by :func:`kbv.sandbox.profiling.compute_ops`. Ops that read input values to produce new ones are counted even
#: when they only move data (``cat``, ``stack``, ``index``, ``gather``, ``flip``, ``roll``,
#: ``constant_pad_nd``, ``where``): a problem can ask for exactly that work. Casts (``_to_copy``)
#: are copies here.
NO_MATH_OPS: frozenset[str] = _VIEW_OPS | _COPY_OPS | _ALLOC_OPS | _META_OPS

# max_pool2d / max_pool2d_with_indices / mkldnn_max_pool2d / adaptive_avg_pool2d / _adaptive_...


#: longest argument-shape part of an :attr:`OpCount.shaped` key (a ``cat`` of many tensors leaves it out)
SHAPES_CHARS = 200
#: prefix of an :attr:`OpCount.shaped` key for a GEMM run beneath a top-level op that is no GEMM of
#: its own (``einsum``'s ``bmm``, ``tensordot``'s ``mm``, ``linalg_matmul``'s ``matmul``): NESTED, the
#: top-level op's key, :data:`NEST_SEP`, the GEMM's key; sized by
#: :func:`kbv.checks.op_coverage.gemm_work` as that op's work, never counted as an op of its own
NESTED = "nested:"
NEST_SEP = ">"
#: the GEMMs :func:`kbv.checks.op_coverage.gemm_work` sizes: one beneath another is part of it
GEMM_OPS = frozenset({"mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "matmul", "linear",
                      "_addmm_activation"})


@dataclass(frozen=True)
class OpCount:
    """aten compute ops executed by one call (:func:`kbv.sandbox.profiling.compute_ops`).

    ``ops`` maps an overload packet's qualified name (``"aten.addmm"``; in-place ops keep their
    own name, ``"aten.relu_"``; a custom op registered through ``torch.library`` appears under its
    namespace, ``"mylib.op"``) to the number of times it was dispatched. ``error`` is ``None``
    when the call completed; otherwise it names the failure and ``ops`` holds what was counted
    before it (incomplete, not to be judged).
    """

    ops: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    #: :func:`kbv.sandbox.profiling.recorded_ops` only: the same ops keyed ``"aten.addmm|32,512,512,1024,1024|512;32x1024;1024x512"``
    #: (the sizes of every tensor argument, sorted: the same work whatever the argument order or a
    #: transpose; then each argument's shape in order, left out past :data:`SHAPES_CHARS`); and
    #: keyed :data:`NESTED`, the GEMMs run beneath a top-level op that is no GEMM itself
    shaped: dict[str, int] = field(default_factory=dict)
    #: :func:`kbv.sandbox.profiling.recorded_ops` only: µs of wall time in the calling or worker thread per :attr:`shaped`
    #: key (the profiler's ``cpu_time_total``, children included), summed over its calls.
    time_us: dict[str, float] = field(default_factory=dict)
    #: the counter itself failed (it would not start, a harness error), not the counted call: never
    #: the candidate's, set where the failure is caught.
    probe_failed: bool = False


def union(counts: "list[OpCount]") -> OpCount:
    """Several calls' counts as one: each op (and each sized op, and its time) the most any call
    dispatched it, the first failure, the counter's own failure where any call's counter failed. A
    forward that takes another path on some inputs is counted on every path it took (the op count's
    calls on a timed call's inputs and on fresh ones: :meth:`kbv.sandbox.probe_requests.ProbeRequests.count_ops`)."""
    ops: dict = {}
    shaped: dict = {}
    time_us: dict = {}
    error, probe_failed = None, False
    for c in counts:
        for mine, theirs in ((ops, c.ops), (shaped, c.shaped), (time_us, c.time_us)):
            for k, v in theirs.items():
                mine[k] = max(mine.get(k, v), v)
        error = error or c.error
        probe_failed = probe_failed or c.probe_failed
    return OpCount(ops=ops, error=error, shaped=shaped, time_us=time_us, probe_failed=probe_failed)


def describe_failure(exc: BaseException) -> str:
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
    return text[:MAX_TEXT]
