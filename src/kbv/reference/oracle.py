"""The float64 oracle: the exact answer a candidate is judged against.

Runs only in the reference worker. Nothing here is ever sent to a candidate worker.

**Oracle.** The reference ``Model`` deep-copied and cast to float64 (parameters and buffers;
integer buffers keep their dtype), run on the input set upcast to float64, with the default dtype
set to float64 for the call (so tensors the model creates inside ``forward`` are float64 too).
It runs on the problem's device when the copy and one call fit in free device memory, else on the
CPU (:attr:`Oracle.device` says which). For a bf16/fp16 problem the oracle starts from the
reference's own (rounded) weights and inputs: it is the exact answer to the question the
reference model was asked.

The normalised error and the two correctness policies that judge against this oracle:
:mod:`kbv.reference.policy`.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Sequence

import torch

from kbv.processes.footprint import host_available_bytes
from kbv.reference.batch_pieces import SPLIT_ALL, SPLIT_FIRST, cut_rows, split_args
from kbv.reference.passes import all_finite
from kbv.reference.rounding_moves import ROUNDING_MOVES, rounded_up
from kbv.reference.policy import CHUNK_ELEMENTS, max_error, normalised_error, output_errors, rms_of


# Normalised error ------------------------------------------------------------------------------


# The kbv policy on one input set ----------------------------------------------------------------


# The oracle ------------------------------------------------------------------------------------

#: device memory the oracle may take, as a fraction of what is free when it is built.
DEVICE_FRACTION = 0.5


def upcast(args: Sequence[Any], device: torch.device) -> list[Any]:
    """Floating-point tensors to float64 on ``device``; other tensors moved; the rest unchanged."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            a = a.to(device=device, dtype=torch.float64 if a.is_floating_point() else a.dtype)
        out.append(a)
    return out


def _finite_from_error(y: Any, error: float | None) -> bool:
    """Whether every element of ``y`` (a moved oracle output) is finite, given its error against an
    oracle output found finite (:meth:`Oracle.input_rounding_errors`): a finite error proves it (a NaN
    or an infinity of ``y`` where the oracle is finite makes the error infinite), so only an
    infinite one (or an integer output's None) reads ``y`` again (:func:`all_finite`): the same
    figure as a finiteness pass before the error pass, one read of ``y`` fewer (issue 21)."""
    if not isinstance(y, torch.Tensor) or (error is not None and math.isfinite(error)):
        return True
    return all_finite(y, CHUNK_ELEMENTS)


class OracleUnavailable(RuntimeError):
    """The float64 copy of the model could not be built or run (one line). ``memory`` is True when
    the cause is memory (device and host both too small): kbv's failure, not the candidate's."""

    def __init__(self, message: str, memory: bool = False):
        super().__init__(message)
        self.memory = memory


#: float64 input bytes of one oracle call above which a row-separable model runs in pieces of the
#: batch (:meth:`Oracle._plan`): kbv's memory stays near the problem's own size.
PIECE_BYTES = 64 << 20
#: the same on the host, at most: a piece's float64 inputs and outputs stay under the reference
#: worker's malloc threshold (:data:`kbv.processes.footprint.MALLOC_MMAP_THRESHOLD`), so each piece
#: reuses the previous one's memory instead of mapping and page-faulting its own (a 256 MiB ReLU's
#: oracle took 1.78 CPU-s in 64 MiB pieces, 0.70 in 16 MiB ones; its input-rounding pass 1.99 and 0.86).
HOST_PIECE_BYTES = 16 << 20
#: float64 input bytes above which a matrix product's rows are cut (:data:`SPLIT_FIRST`): the
#: bound's slack (4·B + 1 GiB, :mod:`kbv.processes.footprint`). Below it the whole float64 call fits
#: beside what the reference worker holds, and a cut costs each piece's output one more copy (a
#: 2048^2 matmul's oracle moved 60 x B more on cpu in 16 MiB pieces).
FIRST_SPLIT_BYTES = 1 << 30
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
        self._split_how = SPLIT_ALL  #: what a piece cuts (:mod:`kbv.reference.batch_pieces`), set with the plan

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

    def _separable(self, args: Sequence[Any], reference: Sequence[torch.Tensor], n: int, pieces: int,
                   mask: tuple[bool, ...]) -> bool:
        """The fp32 reference run on each piece of the batch alone (the ``mask``ed arguments cut,
        :func:`kbv.reference.batch_pieces.split_args`) gives the whole run's rows there: one fp32
        forward in pieces, once per oracle. Every piece, not a few: a prefix or suffix scan fails
        at one end only, and an output that depends on a row's position (``+ (arange(n) % 3 ==
        0)``) passed pieces at rows 0, 6 and 12 of 13 and was wrong at the others (red-team
        helper, 2026-12-06)."""
        step = -(-n // pieces)
        for s0 in range(0, n, step):
            part = cut_rows(args, mask, s0, step)
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

    def _pieces(self, model: torch.nn.Module, args: Sequence[Any], n: int, pieces: int,
                mask: tuple[bool, ...]) -> list[torch.Tensor]:
        step = -(-n // pieces)
        outs: list[torch.Tensor] | None = None
        # the arguments every piece takes whole, upcast once (``upcast`` then moves nothing)
        args = [a if m else upcast([a], self.device)[0] for a, m in zip(args, mask)]
        for s in range(0, n, step):
            part = self._run(model, cut_rows(args, mask, s, step))
            if outs is None:
                outs = [torch.empty((n, *p.shape[1:]), dtype=p.dtype, device=p.device) for p in part]
            for o, p in zip(outs, part):
                o[s:s + step] = p
            del part
        self.chunked = pieces
        return outs or []

    def _plan(self, args: Sequence[Any], reference: Sequence[torch.Tensor] | None) -> int:
        """Pieces of the batch each float64 call runs in: where one set's float64 inputs take more
        than :data:`PIECE_BYTES` (:data:`HOST_PIECE_BYTES` on the host) and the model is
        row-separable on it (checked once per oracle, on the first set with a reference), so the
        float64 inputs and intermediates of a large problem never exist whole; 0 for one call."""
        if self._pieces_planned is not None:
            return self._pieces_planned
        if reference is None:
            return 0
        f64 = sum(a.numel() * 8 for a in args if isinstance(a, torch.Tensor))
        pieces = 0
        limit = PIECE_BYTES if self.device.type != "cpu" else min(PIECE_BYTES, HOST_PIECE_BYTES)
        for how in (SPLIT_ALL, SPLIT_FIRST):  # a batch first, else a matrix product's rows
            n, mask = split_args(args, how)
            cut = sum(a.numel() * 8 for a, m in zip(args, mask) if m)  # the bytes pieces divide
            if n is None or n < 2 or f64 <= (limit if how == SPLIT_ALL else FIRST_SPLIT_BYTES) or cut < f64 // 2:
                continue
            want = min(n, -(-cut // max(limit - (f64 - cut), limit // 4)))
            if self._separable(args, reference, n, want, mask):
                pieces, self._split_how = want, how
                break
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
        n, mask = split_args(args, self._split_how)
        try:
            if planned and n is not None:
                return self._pieces(model, args, n, planned, mask)
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
        for how in (SPLIT_ALL, SPLIT_FIRST) if reference is not None else ():
            n, mask = split_args(args, how)
            for pieces in ORACLE_PIECES if n is not None and n > 1 else ():
                if pieces > n or not self._separable(args, reference, n, pieces, mask):
                    continue
                try:
                    return self._pieces(model, args, n, pieces, mask)
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

    def input_rounding(self, args: Sequence[Any], reference: Sequence[torch.Tensor] | None = None,
                       seed: int | None = None, check_finite: bool = True) -> list[torch.Tensor] | None:
        """Oracle outputs for ``args`` with every floating-point element moved by one fp32 rounding
        (:func:`kbv.reference.rounding_moves.rounded_up`): up, ``a + eps(float32) * |a|``, or with ``seed`` up or down at
        random (see :data:`INPUT_ROUNDING`); None when the oracle is unavailable or an output is
        not finite there (the entry is then left out, never infinite).

        :meth:`input_rounding_errors` takes the worse of both moves (:data:`ROUNDING_MOVES`). The
        same-sign move changes sums, prefix sums, means and pooling by ``eps * sum |a|``, the
        componentwise condition bound (Higham §1.6), whatever the data; random signs alone cancel
        across a few large elements and understate it (a triu-matmul prefix sum still failed 2 of
        2000 ``outliers`` sets with them, measured by kbv). The random-sign move sees what the
        same-sign one cannot: a function of differences (softmax, log-sum-exp, cross-entropy, a
        normalisation) ignores a common shift, and at a large common offset the same-sign move is
        nearly one (cross-entropy at 1000 + N(0, 1): 1.4e-8 against the honest log-sum-exp
        rewrite's 1.3e-6, where fp32 rounding of the inputs moves the loss by ~1e-6).
        """
        moved = [rounded_up(a, self.device, seed) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                 for a in args]
        try:
            outs = self(moved, reference)
        except OracleUnavailable:
            return None
        finally:
            del moved
        for o in outs if check_finite else ():
            if isinstance(o, torch.Tensor) and not all_finite(o, CHUNK_ELEMENTS):
                return None
        return outs

    def input_rounding_errors(self, args: Sequence[Any], oracle: Sequence[torch.Tensor],
                              reference: Sequence[torch.Tensor] | None = None) -> list[float | None] | None:
        """The worse, per output, of :func:`output_errors` of :meth:`input_rounding`'s outputs
        against ``oracle`` (the oracle on ``args``) for each of :data:`ROUNDING_MOVES`, without
        holding them whole where the oracle runs in pieces: each piece's moved inputs and
        outputs are judged against the oracle's rows and dropped. None where a move gives None."""
        pieces = self._plan(args, reference)
        n, mask = split_args(args, self._split_how)
        if not pieces or n is None:
            worst_whole: list[float | None] | None = None
            for seed in ROUNDING_MOVES:
                # finiteness read from the error pass (:func:`_finite_from_error`), not a pass of its own
                moved = self.input_rounding(args, reference, seed, check_finite=False)
                if moved is None:
                    return None
                errs = output_errors(moved, oracle)
                if not all(_finite_from_error(y, e) for y, e in zip(moved, errs)):
                    return None
                del moved
                worst_whole = errs if worst_whole is None else [
                    None if a is None or b is None else max(a, b) for a, b in zip(worst_whole, errs)]
            return worst_whole
        scales = []
        for o in oracle:
            rms = rms_of(o) if o.is_floating_point() else 0.0
            scales.append(rms if rms > 0 else 1.0)
        worst: list[float | None] = [0.0 if o.is_floating_point() else None for o in oracle]
        step = -(-n // pieces)
        model = self._build(0)
        for seed in ROUNDING_MOVES:
            # the arguments every piece takes whole, moved once per move (the same draws as a whole move)
            whole = [None if m or not isinstance(a, torch.Tensor) else rounded_up(a, self.device, seed)
                     if a.is_floating_point() else a.to(self.device) for a, m in zip(args, mask)]
            for s0 in range(0, n, step):
                part = []
                for a, m, w in zip(args, mask, whole):
                    if m:
                        a = (rounded_up(a[s0:s0 + step], self.device, seed, s0 * (a[0].numel() if a.dim() else 1))
                             if a.is_floating_point() else a[s0:s0 + step].to(self.device))
                    elif w is not None:
                        a = w
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
                    e = max_error(y, o[s0:s0 + step], scales[k])
                    if not _finite_from_error(y, e):
                        return None
                    worst[k] = max(worst[k], e)
                del outs
        return worst

    def release(self) -> None:
        """Drop the float64 copy; the next call builds it again, on the problem's device first."""
        self._model = None
        self.device = self._home
