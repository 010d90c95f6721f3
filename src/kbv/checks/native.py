"""PyTorch's own kernels called from the candidate's native code past the dispatcher, and its
registrations for torch's ops (taxonomy 15).

A C++/CUDA extension that calls ``at::cpu::mm``, ``at::cuda::mm``, ``at::native::relu``,
``at::compositeexplicitautograd::<op>`` (the ``ATen/ops/*_dispatch.h`` and ``*_native.h``
headers) or ``at::_ops::<op>::redispatch`` runs PyTorch's kernel without the dispatcher's
profiling hooks and without the Python dispatch key, so neither op count
(:mod:`kbv.sandbox.profiling`) sees it. The dynamic linker must still resolve each such call:
the built shared object imports the kernel by name. The trusted side reads those imports
(:func:`kbv.processes.elf.symbols`, demangled) and these pure rules name them:

* :func:`aten_kernel_imports` maps the imported symbols to the aten ops whose kernels they are;
* :func:`native_covered` says whether those ops, with the ops the candidate dispatched, cover
  every compute op of the reference (the native counterpart of
  :func:`kbv.checks.op_coverage.reference_covered`): a SHORTCUT;
* :func:`torch_registrations` names the ``TORCH_LIBRARY_IMPL(aten, ...)`` blocks compiled into
  the objects (their own symbols): kernels for torch's ops, a HACK.

An import is linkage, not a call count: a kernel of the reference's op linked into the extension
covers that op whatever share of the work it does (a fallback path included). Calls through the
dispatcher (``at::mm``, ``torch::relu``, ``at::_ops::mm::call``) are not imports of a kernel;
the op counts see and count them.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from kbv.checks.op_coverage import _as_counts, _family
from kbv.sandbox.profiling import NO_MATH_OPS

#: C++ namespaces of ``at::`` whose functions are an op's kernel reached without the dispatcher:
#: the per-backend and composite entry points of ``ATen/ops/<op>_<key>_dispatch.h``, the kernels
#: of ``ATen/ops/<op>_native.h``, and the redispatch helpers of ``ATen/RedispatchFunctions.h``
#: (which skip the dispatcher's profiling hooks).
KERNEL_NAMESPACES = frozenset({
    "cpu", "cuda", "native", "mps", "compositeexplicitautograd", "compositeexplicitautogradnonfunctional",
    "compositeimplicitautograd", "compositeimplicitautogradnestedtensor", "redispatch",
})

#: torch's own BLAS wrappers (``at::native::cpublas::gemm``, ``at::cuda::blas::gemm``): the matmul
#: kernel itself, named after no op; counted as ``mm`` (the gemm family of
#: :data:`kbv.checks.op_coverage.OP_FAMILIES`).
_BLAS = re.compile(r"^(gemm|gemv|dot|vdot|axpy|scaled_gemm|bgemm|gemm_batched\w*|gemm_and_bias|gemm_internal\w*)$")

#: suffixes a kernel's name adds to its op's (``addmm_out_cpu``, ``softmax_cpu_out``,
#: ``mm_outf``, ``relu_stub``), stripped one at a time until an op's name is left.
_SUFFIXES = ("_outf", "_out", "_symint", "_cpu", "_cuda", "_mps", "_kernel", "_stub", "_impl", "_default")

#: ``at::<namespace>::[...::]name(`` of a demangled symbol, and ``at::_ops::<op>::redispatch``.
#: A template function's demangled name starts with its return type (``void at::native::f<float>(...)``);
#: a dispatch stub is an object, no ``(`` (``at::native::gelu_stub``).
_KERNEL = re.compile(r"(?:^|[\s*&])at::(?P<ns>\w+)::(?P<path>(?:\w+::)*)(?P<name>~?\w+)(?:<[^()]*>)?(?:\(|$)")
_REDISPATCH = re.compile(r"(?:^|[\s*&])at::_ops::(?P<op>\w+)::redispatch\(")
#: longest symbol matched against them: libtorch_cpu's longest exported ``at::`` symbol has 3,171
#: characters (torch 2.13); a longer one is none of PyTorch's kernels. :data:`_KERNEL` backtracks
#: in the square of a symbol's length (a red-team object's 500,000-character symbol held the
#: reference worker for a minute; 8,192 characters take about 20 ms).
MAX_SYMBOL_CHARS = 8192


def _op_of(name: str, ops: frozenset[str]) -> str | None:
    """The aten op (bare name) that kernel ``name`` implements, or ``None``: ``name`` itself, or
    with the ``structured_`` prefix and :data:`_SUFFIXES` stripped, if that is an op in ``ops``."""
    cand = name.removeprefix("structured_")
    seen = [name, cand]
    while True:
        for s in seen:
            if s in ops:
                return s
        for suffix in _SUFFIXES:
            if cand.endswith(suffix) and len(cand) > len(suffix):
                cand = cand[: -len(suffix)]
                seen = [cand]
                break
        else:
            return None


def aten_kernel_imports(symbols: Iterable[str], op_names: Iterable[str]) -> dict[str, list[str]]:
    """The aten compute ops whose kernels the candidate's shared objects import.

    Args:
        symbols: demangled names of the undefined dynamic symbols of the candidate's built shared
            objects (``"at::cpu::mm(at::Tensor const&, at::Tensor const&)"``); other lines are
            ignored.
        op_names: torch's operator names (``torch._C._dispatch_get_all_op_names()``: ``"aten::mm"``,
            ``"aten::relu"``, ...); only the ``aten::`` ones are used. Symbols over
            :data:`MAX_SYMBOL_CHARS` are skipped.

    Returns:
        ``{"aten.mm": ["at::cpu::mm(...)", ...]}``: every op in :data:`KERNEL_NAMESPACES`' reach
        (and torch's BLAS wrappers, as ``aten.mm``) whose kernel is imported, its importing
        symbols sorted. Ops that do no math (:data:`kbv.sandbox.profiling.NO_MATH_OPS`: ``empty``,
        ``copy_``, views) are left out, and so are the namespaces' helpers that are no op
        (``at::cuda::getCurrentCUDAStream``). Never raises on odd input lines.
    """
    ops = frozenset(n.split("::", 1)[1].split(".", 1)[0] for n in op_names
                    if isinstance(n, str) and n.startswith("aten::"))
    found: dict[str, set[str]] = {}
    for sym in symbols:
        if not isinstance(sym, str):
            continue
        sym = sym.strip()
        if len(sym) > MAX_SYMBOL_CHARS or "at::" not in sym:
            continue
        op = None
        m = _REDISPATCH.search(sym)
        if m:
            op = _op_of(m.group("op"), ops)
        else:
            m = _KERNEL.search(sym)
            if m is None or m.group("ns") not in KERNEL_NAMESPACES:
                continue
            parts = [p for p in m.group("path").split("::") if p]
            name = m.group("name")
            if parts and parts[-1] in ("cpublas", "blas") and _BLAS.match(name):
                op = "mm"
            elif parts and parts[0].startswith("structured_"):
                op = _op_of(parts[0], ops)  # at::native::structured_mm_out_cpu::impl
            elif not parts:
                op = _op_of(name, ops)
        if op is None:
            continue
        base = op[:-1] if op.endswith("_") and not op.endswith("__") else op
        if op in NO_MATH_OPS or base in NO_MATH_OPS:
            continue
        found.setdefault(f"aten.{op}", set()).add(sym)
    return {op: sorted(syms) for op, syms in sorted(found.items())}


#: torch's operator namespaces as ``TORCH_LIBRARY*`` registrations spell them (``_``: a fallback
#: for every namespace's ops).
_NAMESPACES = r"(?:aten|prims|prim|quantized|_quantized|sparse|_)"
#: the local symbols the ``TORCH_LIBRARY_IMPL(ns, Key, m)``, ``TORCH_LIBRARY_FRAGMENT(ns, m)`` and
#: ``TORCH_LIBRARY(ns, m)`` macros define (``TORCH_LIBRARY_IMPL_static_init_aten_CPU_1``,
#: ``TORCH_LIBRARY_IMPL_init_aten_CPU_1(torch::Library&)``): the key starts upper case, a
#: fragment's counter is a number, so ``aten_mine`` (a namespace of one's own) does not match.
_REGISTRATION = re.compile(rf"^TORCH_LIBRARY(?:_IMPL_(?:static_)?init_{_NAMESPACES}_[A-Z]"
                           rf"|_FRAGMENT_(?:static_)?init_{_NAMESPACES}_\d|_(?:static_)?init_{_NAMESPACES}(?:\(|$))")


def torch_registrations(defined: Iterable[str]) -> list[str]:
    """The registrations for torch's own operator namespaces compiled into a candidate's object:
    the ``TORCH_LIBRARY_IMPL(aten, CPU, m)`` (or ``_FRAGMENT``, plain ``TORCH_LIBRARY``) blocks'
    symbols among ``defined`` (the defined, local ones included, demangled symbol names of
    :func:`kbv.processes.elf.symbols`), sorted. A kernel registered for one of torch's ops runs
    whenever torch runs that op in the candidate's process (the harness's copies included): HACK.
    Registrations for a namespace of the candidate's own (``TORCH_LIBRARY(mylib, m)``) are not."""
    return sorted({d.strip() for d in defined if isinstance(d, str) and _REGISTRATION.match(d.strip())})


def native_covered(reference_ops: Mapping[str, int], dispatched_ops: Mapping[str, int],
                   imported: Mapping[str, object]) -> list[str] | None:
    """The reference's compute ops if the candidate reached every one of them, with at least one
    through an imported kernel, else ``None``.

    ``reference_ops`` and ``dispatched_ops`` are op counts of one call (``{"aten.mm": 1}``, as
    :func:`kbv.sandbox.profiling.compute_ops` gives them: the reference's and the candidate's);
    ``imported`` the keys of :func:`aten_kernel_imports`. A reference op is reached when an
    imported kernel is of its family (:data:`kbv.checks.op_coverage.OP_FAMILIES`, whatever the number
    of calls: an import says nothing of how often it runs), or when the candidate dispatched
    ops of its family at least as often as the reference. ``None`` too when the reference has no
    compute op, when no imported kernel is needed to cover it (the op counts decide that case,
    :func:`kbv.checks.op_coverage.reference_covered`) and when an argument is not a count. Never raises.
    """
    try:
        ref = _as_counts(dict(reference_ops))
        cand = _as_counts(dict(dispatched_ops)) or {}
        if not ref:
            return None
        linked = {_family(str(k)) for k in imported}
        need: dict[str, int] = {}
        for k, v in ref.items():
            need[_family(k)] = need.get(_family(k), 0) + v
        have: dict[str, int] = {}
        for k, v in cand.items():
            have[_family(k)] = have.get(_family(k), 0) + v
        by_import = [f for f in need if f in linked]
        if by_import and all(f in linked or have.get(f, 0) >= n for f, n in need.items()):
            return sorted(ref)
        return None
    except BaseException:  # noqa: BLE001
        return None
