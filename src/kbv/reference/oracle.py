"""The float64 oracle, the normalised error, and the two correctness policies.

Runs only in the reference worker. Nothing here is ever sent to a candidate worker.

**Oracle.** The reference ``Model`` deep-copied and cast to float64 (parameters and buffers;
integer buffers keep their dtype), run on the input set upcast to float64, with the default dtype
set to float64 for the call (so tensors the model creates inside ``forward`` are float64 too).
It runs on the problem's device when the copy and one call fit in free device memory, else on the
CPU (:attr:`Oracle.device` says which). For a bf16/fp16 problem the oracle starts from the
reference's own (rounded) weights and inputs: it is the exact answer to the question the
reference model was asked.

**Normalised error** of an output ``y`` against the oracle ``o`` (both taken to float64)::

    err(y, o) = max_i |y_i - o_i| / (|o_i| + rms(o))        rms(o) = sqrt(mean_i o_i^2)

the smallest ``t`` for which ``|y - o| <= t * |o| + t * rms(o)`` holds at every element: a
relative error for elements at or above the output's typical magnitude, an absolute error in
units of that magnitude for the small ones (where a relative error says nothing: zeros,
cancellation). It is invariant to scaling the output, so one budget fits ×0.01 and ×1000 inputs.
An element where ``o`` is finite and ``y`` is not gives ``inf``. An all-zero oracle output
(``rms = 0``) falls back to the absolute error. For several outputs each has its own error.

**Policies** (:data:`POLICIES`):

* ``kbv`` (default): every output's error is at most the budget ::

      k * max(err(eager-fp32), err(eager-tf32), err(input-rounding)) + floor_eps * eps(float32) [+ tf32_floor]

  the baselines' errors measured against the same oracle on the same inputs (on CPU TF32 does
  not exist, so the eager-fp32 error alone sets the budget). ``input-rounding`` is the problem's
  own sensitivity (:data:`INPUT_ROUNDING`): the oracle run again on the inputs moved by one fp32
  rounding, capped at :data:`INPUT_ROUNDING_CAP`; it keeps an ill-conditioned set (a prefix sum
  across cancelling outliers) from being judged against a baseline more exact than fp32
  arithmetic allows (torch's CPU ``cumsum`` accumulates in float64). ``tf32_floor`` (one TF32 ulp,
  2^-10) is added only where TF32 is in play on that set, i.e. the eager-tf32 baseline's error
  is more than :data:`TF32_ACTIVE_RATIO` times eager-fp32's: TF32 implementations may round the
  fp32 operands (cuBLAS) or truncate them (Triton's ``tl.dot`` in tf32, raw ``mma.tf32``), and
  truncation is biased, so on same-sign data its error grows like K·2^-11 where rounding's grows
  like sqrt(K)·2^-11; the floor admits truncating kernels, which are honest TF32. Integer and
  boolean outputs must equal the eager-fp32 reference exactly. ``k``, ``floor_eps`` and
  ``tf32_floor`` are :class:`~kbv.model.records.EvalConfig` fields; their defaults come from the
  measurements in ``docs/correctness.md``.
* ``kbv-compat``: the KernelBench-Verified rule, ``torch.allclose(out, ref32, atol, rtol)`` with
  atol = rtol = 1e-3 (1e-2 for bf16/fp16) against the eager-fp32 reference
  (:func:`kbv.reference.comparison.compare`).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from kbv.processes.footprint import host_available_bytes

POLICIES = ("kbv", "kbv-compat")

#: eager-tf32 error / eager-fp32 error above which TF32 counts as in play on an input set.
TF32_ACTIVE_RATIO = 4.0

#: a baseline error above this (the eager-fp32 reference more than 1 % away from its own float64
#: version) makes the kbv budget vacuous: a stochastic or fp32-ill-conditioned reference. Such
#: sets are named in the verdict's evidence (``vacuous_budget``); vetting flags the stochastic case.
VACUOUS_BASELINE_ERROR = 1e-2

#: ``baseline_errors`` key of the problem's own sensitivity to fp32 rounding of its inputs: the
#: error of the oracle run on the floating-point inputs moved up by one fp32 rounding,
#: ``a + eps * |a|`` (:meth:`Oracle.input_rounding`). A backward-stable fp32 algorithm has an error
#: of this order times a small constant (Higham, *Accuracy and Stability of Numerical Algorithms*,
#: 2nd ed., §1.5-1.6), so a set whose baselines are more exact than that (torch's CPU ``cumsum``
#: accumulates in float64) does not fail honest fp32 kernels: an fp32 ``x @ triu(ones)`` prefix
#: sum (honest row ``cumsum_triu_matmul_torch``, 8 x 256) failed the old budget on 13 of 1500
#: ``outliers`` sets and stays under 0.17 of the budget with this term over
#: 2000 sets of each of outliers, normal and wide-range (docs/correctness.md).
INPUT_ROUNDING = "input-rounding"
#: the input-rounding error counts at most this much (2^-17 = 64 eps(float32), so k × it <= 2^-13
#: at k = 16, under fp16's and bf16's unit roundoff): a discontinuous reference (floor, round,
#: ties) jumps under any perturbation and must not make the budget vacuous.
INPUT_ROUNDING_CAP = 2.0 ** -17

#: tolerances of the allclose sweep stored with every result (atol = rtol = t).
SWEEP_TOLERANCES: tuple[float, ...] = (1e-2, 1e-3, 1e-4)

CHUNK_ELEMENTS = 1 << 22  #: elements handled at a time (32 MiB of float64 per operand: the temporaries of an error pass stay near 250 MiB).
#: device memory the oracle may take, as a fraction of what is free when it is built.
DEVICE_FRACTION = 0.5


def sweep_key(tol: float) -> str:
    """Key of a tolerance in the sweep mappings: ``"1e-02"``, ``"1e-03"``, ``"1e-04"``."""
    return f"{tol:.0e}"


def floor_for(dtype: torch.dtype, floor_eps: float) -> float:
    """The policy floor: ``floor_eps`` machine epsilons of **float32**, whatever the output dtype.

    The floor only matters where a baseline is (nearly) exact, and there honest alternatives differ
    by a few fp32 ulps of internal arithmetic; a bf16/fp16 output's own rounding already shows in
    the baselines' errors. (Eight bf16 epsilons would be a 6 % allowance.)
    """
    return floor_eps * torch.finfo(torch.float32).eps


def tf32_in_play(baseline_errors: dict[str, float | None]) -> bool:
    """The eager-tf32 baseline's error is over TF32_ACTIVE_RATIO × eager-fp32's (cuda only)."""
    e32, etf = baseline_errors.get("eager-fp32"), baseline_errors.get("eager-tf32")
    return e32 is not None and etf is not None and etf > TF32_ACTIVE_RATIO * e32 and etf > 0


def budget(baseline_errors: dict[str, float | None], dtype: torch.dtype, k: float, floor_eps: float,
           tf32_floor: float = 0.0) -> float:
    """``k * max(baseline errors) + floor_eps * eps(float32)``, plus ``tf32_floor`` where TF32 is in
    play; the :data:`INPUT_ROUNDING` entry counts at most :data:`INPUT_ROUNDING_CAP`. Non-finite
    baseline errors give an infinite budget."""
    errs = [min(v, INPUT_ROUNDING_CAP) if name == INPUT_ROUNDING else v
            for name, v in baseline_errors.items() if v is not None]
    worst = max(errs) if errs else 0.0
    extra = tf32_floor if tf32_in_play(baseline_errors) else 0.0
    return k * worst + floor_for(dtype, floor_eps) + extra


# Normalised error ------------------------------------------------------------------------------

def _rms(o: torch.Tensor) -> float:
    """Root mean square of the finite elements of ``o``; kept on the tensor (an oracle output is
    judged against several times and never changes), so it is computed once."""
    cached = getattr(o, "_kbv_rms", None)
    if cached is not None and cached[0] == o._version:
        return cached[1]
    flat = o.reshape(-1)
    total, count = 0.0, 0
    for s in range(0, flat.numel(), CHUNK_ELEMENTS):
        c = flat[s:s + CHUNK_ELEMENTS].to(torch.float64)
        fin = torch.isfinite(c)
        if bool(fin.all()):
            total += float(torch.dot(c, c))
            count += c.numel()
        else:
            total += float(torch.where(fin, c * c, torch.zeros_like(c)).sum())
            count += int(fin.sum())
    rms = math.sqrt(total / count) if count else 0.0
    try:
        o._kbv_rms = (o._version, rms)
    except (AttributeError, RuntimeError):
        pass
    return rms


def normalised_error(y: torch.Tensor, o: torch.Tensor) -> float:
    """``max_i |y_i - o_i| / (|o_i| + rms(o))`` in float64 (see the module docstring).

    ``y`` is moved to ``o``'s device chunk by chunk. Elements where ``o`` is not finite are
    skipped (a set whose oracle is not finite is dropped before this is called); an element where
    ``o`` is finite and ``y`` is not makes the error ``inf``.

    Raises:
        ValueError: the shapes differ.
    """
    if tuple(y.shape) != tuple(o.shape):
        raise ValueError(f"shape {tuple(y.shape)} != oracle shape {tuple(o.shape)}")
    if o.numel() == 0:
        return 0.0
    rms = _rms(o)
    return _max_error(y, o, rms if rms > 0 else 1.0)  # an all-zero oracle: absolute error


def _max_error(y: torch.Tensor, o: torch.Tensor, scale: float) -> float:
    """``max_i |y_i - o_i| / (|o_i| + scale)`` over the elements where ``o`` is finite (inf where
    ``o`` is finite and ``y`` is not), :data:`CHUNK_ELEMENTS` at a time."""
    worst = 0.0
    yf, of = y.reshape(-1), o.reshape(-1)
    for s in range(0, of.numel(), CHUNK_ELEMENTS):
        oc = of[s:s + CHUNK_ELEMENTS].to(torch.float64)
        yc = yf[s:s + CHUNK_ELEMENTS].to(device=oc.device, dtype=torch.float64, copy=True)
        o_fin = torch.isfinite(oc)
        if bool(o_fin.all()):  # the common case, in place: three passes, no mask
            if not bool(torch.isfinite(yc).all()):
                return math.inf
            e = yc.sub_(oc).abs_().div_(oc.abs().add_(scale))  # ``oc`` may be ``o`` itself: not in place
        else:
            if bool((o_fin & ~torch.isfinite(yc)).any()):
                return math.inf
            e = torch.where(o_fin, (yc - oc).abs() / (oc.abs() + scale), torch.zeros_like(oc))
        worst = max(worst, float(e.max()))
    return worst


def output_errors(outputs: Sequence[torch.Tensor], oracle: Sequence[torch.Tensor]) -> list[float | None]:
    """Normalised error of each output; None for integer/boolean outputs (compared exactly)."""
    return [normalised_error(y, o) if o.is_floating_point() else None for y, o in zip(outputs, oracle)]


def min_allclose_tolerance(y: torch.Tensor, r: torch.Tensor) -> float:
    """Smallest ``t`` with ``|y - r| <= t + t * |r|`` at every element where both are finite.

    ``allclose(y, r, atol=t, rtol=t)`` passes iff this is ``<= t`` and the NaN/Inf patterns agree,
    so one number gives the whole tolerance sweep.
    """
    if r.numel() == 0:
        return 0.0
    worst = 0.0
    yf, rf = y.reshape(-1), r.reshape(-1)
    for s in range(0, rf.numel(), CHUNK_ELEMENTS):
        rc = rf[s:s + CHUNK_ELEMENTS].to(torch.float64)
        yc = yf[s:s + CHUNK_ELEMENTS].to(device=rc.device, dtype=torch.float64)
        fin = torch.isfinite(rc) & torch.isfinite(yc)
        e = torch.where(fin, (yc - rc).abs() / (1.0 + rc.abs()), torch.zeros_like(rc))
        worst = max(worst, float(e.max()))
    return worst


# The kbv policy on one input set ----------------------------------------------------------------

@dataclass(frozen=True)
class PolicyCheck:
    """Outcome of the ``kbv`` rule on one input set."""

    passed: bool
    error: float | None  #: candidate's normalised error on the binding output.
    budget: float | None  #: that output's budget.
    baseline_errors: dict  #: baseline name → its normalised error on the binding output.
    fault: str | None


def kbv_check(
    outputs: Sequence[torch.Tensor],
    reference: Sequence[torch.Tensor],
    oracle: Sequence[torch.Tensor],
    baselines: dict[str, Sequence[torch.Tensor]] | None = None,
    *,
    k: float,
    floor_eps: float,
    tf32_floor: float = 0.0,
    baseline_errors: dict[str, Sequence[float | None]] | None = None,
) -> PolicyCheck:
    """Apply the ``kbv`` rule. ``outputs`` already match ``reference`` in count, shape and dtype.

    ``baselines`` maps a baseline name to its outputs on the same inputs (eager-fp32 is
    ``reference`` itself); or ``baseline_errors`` gives their :func:`output_errors` already
    (so a large baseline output need not be held until the candidate's arrives). The binding
    output is the one with the largest error / budget.
    """
    cand = output_errors(outputs, oracle)
    base = dict(baseline_errors) if baseline_errors is not None else {
        name: output_errors(outs, oracle) for name, outs in (baselines or {}).items()}
    worst_ratio, binding = -1.0, None
    fault = None
    for i, (o_ref, e) in enumerate(zip(reference, cand)):
        tag = f"output {i}" if len(reference) > 1 else "output"
        if e is None:  # integer / boolean output: exact match with the eager-fp32 reference
            y = outputs[i].to(o_ref.device)
            if not torch.equal(y, o_ref):
                n = int((y != o_ref).sum())
                return PolicyCheck(False, None, None, {}, f"{tag}: {n} of {o_ref.numel()} element(s) differ "
                                                          "from the reference (integer output, compared exactly)")
            continue
        b = {name: errs[i] for name, errs in base.items()}
        bud = budget(b, o_ref.dtype, k, floor_eps, tf32_floor)
        ratio = math.inf if math.isinf(e) else (e / bud if bud > 0 else (0.0 if e == 0 else math.inf))
        if ratio > worst_ratio:
            worst_ratio, binding = ratio, (e, bud, b, tag)
    if binding is None:  # only integer outputs, all equal
        return PolicyCheck(True, None, None, {}, None)
    e, bud, b, tag = binding
    passed = e <= bud
    if not passed:
        if math.isinf(e):
            fault = f"{tag}: NaN/Inf where the fp64 oracle is finite"
        else:
            base_txt = ", ".join(f"{n} {v:.2e}" for n, v in b.items())
            plus = " + TF32 floor" if tf32_in_play(b) and tf32_floor else ""
            fault = (f"{tag}: normalised error {e:.2e} vs the fp64 oracle exceeds the budget {bud:.2e} "
                     f"(= k {k:g} x max({base_txt}) + floor{plus})")
    return PolicyCheck(passed, e, bud, b, fault)


# The oracle ------------------------------------------------------------------------------------

def upcast(args: Sequence[Any], device: torch.device) -> list[Any]:
    """Floating-point tensors to float64 on ``device``; other tensors moved; the rest unchanged."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            a = a.to(device=device, dtype=torch.float64 if a.is_floating_point() else a.dtype)
        out.append(a)
    return out


class OracleUnavailable(RuntimeError):
    """The float64 copy of the model could not be built or run (one line). ``memory`` is True when
    the cause is memory (device and host both too small): kbv's failure, not the candidate's."""

    def __init__(self, message: str, memory: bool = False):
        super().__init__(message)
        self.memory = memory


def _batch_size(args: Sequence[Any]) -> int | None:
    """The common leading size of every tensor argument (None if they differ or there is none)."""
    sizes = {a.shape[0] for a in args if isinstance(a, torch.Tensor) and a.dim() > 0}
    ok = all(a.dim() > 0 for a in args if isinstance(a, torch.Tensor))
    return sizes.pop() if ok and len(sizes) == 1 else None


#: float64 input bytes of one oracle call above which a row-separable model runs in pieces of the
#: batch (:meth:`Oracle._plan`): kbv's memory stays near the problem's own size.
PIECE_BYTES = 64 << 20
#: pieces a batch is split into when the float64 oracle does not fit on the device in one call.
ORACLE_PIECES: tuple[int, ...] = (4, 16, 64)
#: a reference run on one piece of the batch must match the whole run's rows to this normalised
#: error for the model to count as row-separable (fp32 kernels for other batch sizes may reorder
#: a reduction: a few fp32 ulps; a model that mixes rows, batch norm in training mode, is far off).
SEPARABLE_ERROR = 1e-5


class Oracle:
    """A float64 copy of a reference model; built on first use.

    ``device`` is the reference's device when the copy fits (it then stays there), else the CPU.
    Where one float64 call does not fit on the device, a model shown row-separable on the set
    (:meth:`__call__` with ``reference``) runs in pieces of the batch on the device; otherwise
    the CPU is used if host memory allows.
    """

    def __init__(self, model: torch.nn.Module, device: torch.device):
        self._source = model
        self.device = device
        self._home = device
        self._model: torch.nn.Module | None = None
        self._failed: str | None = None
        self.chunked = 0  #: pieces used by the last call (0: one call).
        self._pieces_planned: int | None = None

    def _build(self, input_bytes: int) -> torch.nn.Module:
        if self._failed:
            raise OracleUnavailable(self._failed)
        if self._model is not None:
            return self._model
        try:
            model = copy.deepcopy(self._source)
        except Exception as exc:  # noqa: BLE001 - a model that cannot be copied
            self._failed = f"cannot copy the reference model: {type(exc).__name__}: {exc}"
            raise OracleUnavailable(self._failed) from None
        elements = sum(t.numel() for t in list(model.parameters()) + list(model.buffers()))
        if self.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(self.device)
            if 8 * elements > DEVICE_FRACTION * free:  # the weights alone do not fit: host copy
                self.device = torch.device("cpu")
        try:
            model = model.to(self.device).to(torch.float64)
        except torch.cuda.OutOfMemoryError:
            self.device = torch.device("cpu")
            model = model.to("cpu").to(torch.float64)
        self._model = model
        return model

    def _run(self, model: torch.nn.Module, args: Sequence[Any]) -> list[torch.Tensor]:
        saved = torch.get_default_dtype()
        try:
            torch.set_default_dtype(torch.float64)
            with torch.no_grad():
                out = model(*upcast(args, self.device))
            outs = [out] if isinstance(out, torch.Tensor) else list(out)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            return outs
        finally:
            torch.set_default_dtype(saved)

    def _separable(self, args: Sequence[Any], reference: Sequence[torch.Tensor], n: int, pieces: int) -> bool:
        """The fp32 reference run on the first, a middle and the last piece of the batch alone
        gives the whole run's rows there (a prefix or suffix scan along the batch, which one end
        alone would pass, fails the other)."""
        step = -(-n // pieces)
        starts = sorted({0, (n // 2) // step * step, (n - 1) // step * step})
        for s0 in starts:
            part = [a[s0:s0 + step] if isinstance(a, torch.Tensor) else a for a in args]
            try:
                with torch.no_grad():
                    out = self._source(*part)
            except Exception:  # noqa: BLE001 - a model that cannot take a smaller batch
                return False
            outs = [out] if isinstance(out, torch.Tensor) else list(out)
            if len(outs) != len(reference):
                return False
            for o, r in zip(outs, reference):
                rows = min(step, n - s0)
                if r.dim() == 0 or r.shape[0] != n or tuple(o.shape) != (rows, *r.shape[1:]):
                    return False
                if o.is_floating_point() and normalised_error(o, r[s0:s0 + rows]) > SEPARABLE_ERROR:
                    return False
                if not o.is_floating_point() and not torch.equal(o, r[s0:s0 + rows]):
                    return False
        return True

    def _pieces(self, model: torch.nn.Module, args: Sequence[Any], n: int, pieces: int) -> list[torch.Tensor]:
        step = -(-n // pieces)
        outs: list[torch.Tensor] | None = None
        for s in range(0, n, step):
            part = self._run(model, [a[s:s + step] if isinstance(a, torch.Tensor) else a for a in args])
            if outs is None:
                outs = [torch.empty((n, *p.shape[1:]), dtype=p.dtype, device=p.device) for p in part]
            for o, p in zip(outs, part):
                o[s:s + step] = p
            del part
        self.chunked = pieces
        return outs or []

    def _plan(self, args: Sequence[Any], reference: Sequence[torch.Tensor] | None) -> int:
        """Pieces of the batch each float64 call runs in: where one set's float64 inputs take more
        than :data:`PIECE_BYTES` and the model is row-separable on it (checked once per oracle,
        on the first set with a reference), so the float64 inputs and intermediates of a large
        problem never exist whole; 0 for one call."""
        if self._pieces_planned is not None:
            return self._pieces_planned
        if reference is None:
            return 0
        n = _batch_size(args)
        f64 = sum(a.numel() * 8 for a in args if isinstance(a, torch.Tensor))
        pieces = 0
        if n is not None and n > 1 and f64 > PIECE_BYTES:
            want = min(n, -(-f64 // PIECE_BYTES))
            if self._separable(args, reference, n, want):
                pieces = want
        self._pieces_planned = pieces
        return pieces

    def __call__(self, args: Sequence[Any], reference: Sequence[torch.Tensor] | None = None) -> list[torch.Tensor]:
        """Oracle outputs (float64 for floating-point outputs) for one input set.

        ``reference`` (the fp32 reference outputs on ``args``) lets a device that cannot hold one
        float64 call run it in pieces of the batch, when the reference is row-separable there.

        Raises:
            OracleUnavailable: the copy could not be built, or the float64 forward raised
                (``memory`` set when memory ran out on the device and on the host).
        """
        input_bytes = sum(a.numel() * 8 for a in args if isinstance(a, torch.Tensor))  # once upcast
        model = self._build(input_bytes)
        self.chunked = 0
        planned = self._plan(args, reference)
        n = _batch_size(args)
        try:
            if planned and n is not None:
                return self._pieces(model, args, n, planned)
            return self._run(model, args)
        except torch.cuda.OutOfMemoryError:
            if self.device.type != "cuda":
                raise OracleUnavailable("float64 forward ran out of memory", memory=True) from None
        except MemoryError:
            raise OracleUnavailable("float64 forward ran out of host memory", memory=True) from None
        except Exception as exc:  # noqa: BLE001 - the model does not run in float64
            raise OracleUnavailable(f"float64 forward raised {type(exc).__name__}: "
                                    f"{str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}") from None
        torch.cuda.empty_cache()
        n = _batch_size(args)
        if reference is not None and n is not None and n > 1:
            for pieces in ORACLE_PIECES:
                if pieces > n or not self._separable(args, reference, n, pieces):
                    continue
                try:
                    return self._pieces(model, args, n, pieces)
                except torch.cuda.OutOfMemoryError:
                    torch.cuda.empty_cache()
        # the host: only when it can hold the float64 inputs and outputs twice over
        need = 4 * input_bytes + 8 * sum(t.numel() for t in model.parameters())
        avail = host_available_bytes()
        if need > avail:
            raise OracleUnavailable(f"the float64 oracle does not fit: the device ran out of memory and the host "
                                    f"needs ~{need / 2**30:.1f} GiB, {avail / 2**30:.1f} GiB free", memory=True)
        self.device = torch.device("cpu")
        self._model = model = model.to("cpu")
        torch.cuda.empty_cache()
        try:
            return self._run(model, args)
        except MemoryError:
            raise OracleUnavailable("float64 forward ran out of memory on the device and the host", memory=True) from None

    def input_rounding(self, args: Sequence[Any], reference: Sequence[torch.Tensor] | None = None
                       ) -> list[torch.Tensor] | None:
        """Oracle outputs for ``args`` with every floating-point element moved up by one fp32
        rounding, ``a + eps(float32) * |a|`` (see :data:`INPUT_ROUNDING`); None when the oracle is
        unavailable or an output is not finite there (the entry is then left out, never infinite).

        The move is the same sign for every element, so for sums, prefix sums, means and pooling
        the change is ``eps * sum |a|``, the componentwise condition bound (Higham §1.6), whatever
        the data; random signs cancel across a few large elements and then understate it (a
        triu-matmul prefix sum still failed 2 of 2000 ``outliers`` sets with them, measured by
        kbv).
        """
        eps = torch.finfo(torch.float32).eps
        moved = []
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                m = torch.empty(a.shape, dtype=torch.float64, device=self.device)
                src, dst = a.reshape(-1), m.view(-1)
                for s in range(0, src.numel(), CHUNK_ELEMENTS):  # no full-size temporaries
                    c = src[s:s + CHUNK_ELEMENTS].to(device=self.device, dtype=torch.float64)
                    dst[s:s + CHUNK_ELEMENTS] = c.add_(c.abs().mul_(eps))
                a = m
            moved.append(a)
        try:
            outs = self(moved, reference)
        except OracleUnavailable:
            return None
        finally:
            del moved
        for o in outs:
            if isinstance(o, torch.Tensor) and o.is_floating_point() and not bool(torch.isfinite(o).all()):
                return None
        return outs

    def input_rounding_errors(self, args: Sequence[Any], oracle: Sequence[torch.Tensor],
                              reference: Sequence[torch.Tensor] | None = None) -> list[float | None] | None:
        """:func:`output_errors` of :meth:`input_rounding`'s outputs against ``oracle`` (the oracle
        on ``args``), without holding them whole where the oracle runs in pieces: each piece's
        moved inputs and outputs are judged against the oracle's rows and dropped. None where
        :meth:`input_rounding` gives None."""
        n = _batch_size(args)
        pieces = self._plan(args, reference)
        if not pieces or n is None:
            moved = self.input_rounding(args, reference)
            return None if moved is None else output_errors(moved, oracle)
        eps = torch.finfo(torch.float32).eps
        scales = []
        for o in oracle:
            rms = _rms(o) if o.is_floating_point() else 0.0
            scales.append(rms if rms > 0 else 1.0)
        worst: list[float | None] = [0.0 if o.is_floating_point() else None for o in oracle]
        step = -(-n // pieces)
        model = self._build(0)
        for s0 in range(0, n, step):
            part = []
            for a in args:
                if isinstance(a, torch.Tensor):
                    a = a[s0:s0 + step].to(device=self.device, dtype=torch.float64 if a.is_floating_point() else a.dtype)
                    if a.is_floating_point():
                        a = a + eps * a.abs()
                part.append(a)
            try:
                outs = self._run(model, part)
            except Exception:  # noqa: BLE001 - the move is optional evidence
                return None
            del part
            if len(outs) != len(oracle):
                return None
            for k, (y, o) in enumerate(zip(outs, oracle)):
                if worst[k] is None:
                    continue
                if not bool(torch.isfinite(y).all()):
                    return None
                worst[k] = max(worst[k], _max_error(y, o[s0:s0 + step], scales[k]))
            del outs
        return worst

    def release(self) -> None:
        """Drop the float64 copy; the next call builds it again, on the problem's device first."""
        self._model = None
        self.device = self._home
