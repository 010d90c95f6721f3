"""The reference problem built in the reference worker: import, construction and reference runs
(hidden test files: :mod:`kbv.reference.hidden_tests`).

Runs only in the reference worker (it imports problem code, which is trusted as the benchmark's).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kbv.checks.outputs import bitwise_equal, has_zero_stride
from kbv.intake.problems import ProblemError
from kbv.model.records import EvalConfig, ProblemRef
from kbv.reference import domains as dom
from kbv.reference import inputs as inp
from kbv.reference import workloads as wl
from kbv.sandbox import numeric_flags as bl
from kbv.sandbox import call_probes as ig


def first_line(exc: BaseException | str) -> str:
    """The first line of an exception's text (or its type name), at most 300 characters."""
    text = str(exc).strip() or (type(exc).__name__ if isinstance(exc, BaseException) else "")
    return text.splitlines()[0][:300] if text else ""


@dataclass
class ReferenceProblem:
    """A problem imported in the reference worker, with its reference model built."""

    ref: ProblemRef
    module: types.ModuleType
    init_args: list
    model: torch.nn.Module
    model_bytes: int | None
    device: torch.device
    precision: str
    domains: dict = field(default_factory=dict)  #: declared input domains by position (kbv.reference.domains).
    structure: str | None = None  #: what forward returns: ``tensor`` or ``tuple`` (set on first run).
    aliases_inputs: bool = False  #: the reference returns (views of) its inputs.
    zero_strides: bool = False  #: the reference returns expanded (zero-stride) outputs.
    mutates_inputs: bool = False  #: the reference changes its inputs in place.
    mutation_checked: bool = False
    output_bytes: int = 0  #: bytes of one call's outputs (set on every run; sizes the timed re-checks).
    #: no op of the reference's reached by the TF32 switches (kbv.checks.tf32_rules); None until counted.
    tf32_inert: bool | None = None
    #: cpu: the reference's outputs are the same bits under eager-fp32's and eager-tf32's flags
    #: (:func:`same_bits_under`); None until compared.
    tf32_same_cpu: bool | None = None
    #: the size constants a secret shape changes (kbv.pipeline.secret_shapes), () when none can; None until searched.
    shape_search: tuple | None = None
    #: declared workloads, ``{name: {size constant: value}}`` in the order written (kbv.reference.workloads).
    workloads: dict = field(default_factory=dict)
    #: the problem's own settings, ``KBV_METADATA["config"]`` (:meth:`EvalConfig.with_problem`).
    settings: dict = field(default_factory=dict)
    #: the source this reference was built from when not the problem's own file (a workload's sizes).
    source_text: str | None = None
    #: per size constant a declared workload raised, the problem's own size: its secret shape draws
    #: between the two (:func:`kbv.reference.shapes.secret_sizes`).
    shape_floors: dict = field(default_factory=dict)

    def get_inputs(self) -> list:
        return list(self.module.get_inputs())


def flatten_outputs(out: Any) -> list:
    """``forward``'s result as a list of tensors.

    Raises:
        TypeError: it is neither a tensor nor a tuple/list of tensors.
    """
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return list(out)
    raise TypeError(f"returns {type(out).__name__}, not a tensor or a tuple of tensors")


def import_problem(ref: ProblemRef, source: str | None = None) -> types.ModuleType:
    """Import a problem file as a fresh module; ``source``: the file's text with other sizes
    (:func:`kbv.intake.sizes.with_sizes`), run in a module of its own name.

    Raises:
        ProblemError: the import raised, or a required name is not callable.
    """
    import hashlib

    name = f"kbv_problem_{ref.sha256[:16]}"
    if source is not None:
        name += f"_{hashlib.sha256(source.encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, ref.path)
    if spec is None or spec.loader is None:
        raise ProblemError(ref.path, "cannot be imported as a module")
    module = importlib.util.module_from_spec(spec)
    try:
        if source is None:
            spec.loader.exec_module(module)
        else:
            exec(compile(source, ref.path, "exec"), module.__dict__)  # noqa: S102 - the benchmark's own file, resized
    except BaseException as exc:  # noqa: BLE001 - any failure of a problem file is its fault
        raise ProblemError(ref.path, f"import failed: {type(exc).__name__}: {first_line(exc)}") from None
    for n in ("Model", "get_inputs", "get_init_inputs"):
        if not callable(getattr(module, n, None)):
            raise ProblemError(ref.path, f"{n} is not callable")
    sys.modules[name] = module
    return module


def build_reference(ref: ProblemRef, config: EvalConfig, source: str | None = None) -> ReferenceProblem:
    """Import the problem and construct ``Model(*get_init_inputs())`` under ``torch.manual_seed(init_seed)``;
    ``source``: the problem's text with other sizes (:func:`import_problem`).

    Raises:
        ProblemError: any step fails, or ``get_inputs()`` returns something unusable.
    """
    module = import_problem(ref, source)
    device = torch.device("cuda", torch.cuda.current_device()) if config.device == "cuda" else torch.device("cpu")
    try:
        init_args = list(module.get_init_inputs())
    except BaseException as exc:  # noqa: BLE001
        raise ProblemError(ref.path, f"get_init_inputs() failed: {type(exc).__name__}: {first_line(exc)}") from None
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
    try:
        torch.manual_seed(config.init_seed)
        model = module.Model(*init_args)
        model = model.to(device)
        if config.precision != "fp32":
            model = model.to(inp.PRECISION_DTYPES[config.precision])
    except BaseException as exc:  # noqa: BLE001
        raise ProblemError(ref.path, f"Model(*get_init_inputs()) failed: {type(exc).__name__}: {first_line(exc)}") from None
    model_bytes = None
    if cuda:
        torch.cuda.synchronize(device)
        model_bytes = torch.cuda.memory_allocated(device) - before
    rp = ReferenceProblem(ref, module, init_args, model, model_bytes, device, config.precision, source_text=source)
    try:
        # shapes and dtypes are all the checks below need: a draw on the meta device allocates
        # nothing (a 16 GiB problem is not drawn just to be looked at); the real device if the
        # problem's get_inputs() cannot run there
        try:
            sample = inp.draw(module.get_inputs, config.init_seed, "meta")
        except Exception:  # noqa: BLE001
            sample = rp.get_inputs()
    except BaseException as exc:  # noqa: BLE001
        raise ProblemError(ref.path, f"get_inputs() failed: {type(exc).__name__}: {first_line(exc)}") from None
    if not isinstance(sample, list) or not sample:
        raise ProblemError(ref.path, "get_inputs() must return a non-empty list")
    try:
        meta = getattr(module, dom.METADATA_NAME, None)
        wl.check_metadata_keys(meta)
        rp.domains = dom.declared_domains(module, sample)
        if source is None:  # the problem's own sizes: its declared workloads (a workload's build has none)
            rp.workloads = wl.declared_workloads(meta, Path(ref.path).read_text(encoding="utf-8"))
        if isinstance(meta, dict) and meta.get("config"):  # checked here: a bad value is the problem's error
            config.with_problem(meta["config"])
            rp.settings = dict(meta["config"])
    except (dom.DomainError, wl.WorkloadError, ValueError, TypeError) as exc:
        raise ProblemError(ref.path, f"{dom.METADATA_NAME}: {exc}") from None
    except OSError as exc:
        raise ProblemError(ref.path, f"unreadable: {first_line(exc)}") from None
    return rp


def tensor_versions(args: list) -> tuple | None:
    """The autograd version counters of the tensors in ``args`` (torch bumps one at every in-place op
    on the tensor or a view sharing it, values changed or not), or None where a tensor keeps none
    (an inference tensor)."""
    try:
        return tuple(a._version for a in args if isinstance(a, torch.Tensor))
    except RuntimeError:
        return None


def run_reference(rp: ReferenceProblem, args: list, flags: dict, original: list | None = None) -> list:
    """Run the reference on ``args`` under ``flags``; returns its flattened outputs. Records on
    ``rp`` whether the reference itself returns views of its inputs, zero-stride outputs or
    changes its inputs (then the matching candidate probes stay quiet): on the first run, a value
    changed or an in-place op on an input at all (its version counter moved: ``x.clamp_()`` that
    changed nothing on this set may on another). ``original``: the values ``args`` were cloned
    from, kept by the caller (the mutation check then needs no copy of its own)."""
    bl.apply_flags(flags)
    before = (original if original is not None else inp.clone_args(args)) if not rp.mutation_checked else None
    versions = tensor_versions(args) if before is not None else None
    with torch.no_grad():
        raw = rp.model(*args)
    rp.structure = "tensor" if isinstance(raw, torch.Tensor) else "tuple"
    out = flatten_outputs(raw)
    rp.output_bytes = max(rp.output_bytes, sum(o.numel() * o.element_size() for o in out))
    if ig.overlaps(out, args):
        rp.aliases_inputs = True
    if any(has_zero_stride(o) for o in out):
        rp.zero_strides = True
    if before is not None:
        rp.mutation_checked = True
        rp.mutates_inputs = any(isinstance(a, torch.Tensor) and not bitwise_equal(a, b)
                                for a, b in zip(args, before)) or versions is None or tensor_versions(args) != versions
    if rp.device.type == "cuda":
        torch.cuda.synchronize(rp.device)
    return out


def same_bits_under(rp: ReferenceProblem, args: list, flags: dict, other: dict) -> bool:
    """Whether the reference's outputs on copies of ``args`` are the same bits under ``flags`` and
    ``other`` (two forwards; ``flags`` applied again after). On cpu eager-fp32's and eager-tf32's
    flags differ only in ``float32_matmul_precision`` ("high" asks oneDNN for TF32 matmuls, which
    few CPUs have): the same bits there say the same kernels ran, and one baseline's times serve
    both. False where the reference raised (both are then timed)."""
    try:
        a = run_reference(rp, inp.clone_args(args), flags)
        b = run_reference(rp, inp.clone_args(args), other)
        return len(a) == len(b) and all(bitwise_equal(x, y) for x, y in zip(a, b))
    except Exception:  # noqa: BLE001 - the reference's own failure on these values
        return False
    finally:
        bl.apply_flags(flags)
