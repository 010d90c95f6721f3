"""The first stages: the preflight (does the problem fit this machine), the static scan of the
candidate file, and the candidate's build in its worker (with the same-weights check)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import torch

from kbv.intake.scan import scan_source
from kbv.pipeline.context import Context
from kbv.pipeline.outcome import Outcome, Stop
from kbv.processes import footprint as fp
from kbv.processes.buildlock import BuildLockTimeout, build_lock
from kbv.processes.candidate import CandidateProcess
from kbv.reference import inputs as inp
from kbv.reference.build import first_line
from kbv.sandbox import protocol


def call_input_bytes(rp, precision: str) -> tuple[int, int] | None:
    """One call's input bytes of ``rp`` at ``precision`` and its largest input's, from a draw on the
    meta device (no memory); None for a ``get_inputs()`` that needs real tensors."""
    try:
        meta = inp.draw(rp.module.get_inputs, 0, "meta")
    except Exception:  # noqa: BLE001 - a get_inputs() that needs real tensors: no estimate
        return None
    tensors = [a for a in meta if isinstance(a, torch.Tensor)]
    scale = inp.PRECISION_DTYPES[precision].itemsize
    return (sum(a.numel() * (scale if a.is_floating_point() else a.element_size()) for a in tensors),
            max((a.numel() * scale for a in tensors), default=0))


class Load:
    """Preflight, scan and load."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def _preflight(self) -> None:
        """Say before anything runs when the problem cannot fit (:func:`kbv.processes.footprint.check_fits`):
        the inputs' bytes from a draw on the meta device, the outputs' from an earlier run of this
        reference (else the largest input, the size of an elementwise op's output)."""
        sized = call_input_bytes(self.ctx.rp, self.ctx.config.precision)
        if sized is None:
            return
        in_bytes, largest = sized
        self.ctx._input_bytes = in_bytes
        out_bytes = self.ctx.rp.output_bytes or largest
        try:
            fp.check_fits(in_bytes, out_bytes, self.ctx.rp.device)
        except fp.DoesNotFit as exc:
            raise Stop(Outcome.KBV_FAILED, f"{self.ctx.name}: the problem does not fit this machine: {exc}") from None

    def _scan(self) -> None:
        """The static scan of the candidate file (kbv.intake.scan): every finding goes on the verdict."""
        try:
            text = Path(self.ctx.candidate.path).read_text(encoding="utf-8", errors="replace")
            self.ctx.state.findings += [f.record() for f in scan_source(text, self.ctx.candidate.path)]
        except (OSError, SyntaxError, ValueError) as exc:
            self.ctx.state.evidence["scan_error"] = first_line(exc)

    # phases -------------------------------------------------------------------------------
    def _load(self, worker: CandidateProcess, ahead: "PendingLoad | None" = None) -> None:
        """``worker`` builds ``ModelNew`` with the problem's init inputs (``ahead``: that load, sent
        already); the same-weights check on its reply.

        Raises:
            Stop: as :meth:`_send_load`.
        """
        t0 = time.perf_counter()
        reply = ahead.finish() if ahead is not None else self._send_load(worker, self.ctx.rp.init_args)
        self.ctx.cand_model_bytes = reply.model_bytes
        self.ctx.state.evidence["load_seconds"] = reply.load_seconds
        self.ctx.state.evidence["sandbox"] = [str(n) for n in reply.sandbox]
        ref_state = dict(self.ctx.rp.model.named_parameters()) | dict(self.ctx.rp.model.named_buffers())
        for name, t in reply.state.items():
            r = ref_state.get(name)
            if type(t) is not torch.Tensor or r is None or tuple(r.shape) != tuple(t.shape):
                continue
            if r.dtype != t.dtype or not torch.equal(r.detach(), t.to(r.device)):
                self.ctx.state.weight_mismatches.append(name)
        unmatched = unmatched_weights(ref_state, reply.state)
        if unmatched:
            self.ctx.state.evidence["weights_unmatched"] = unmatched
        del reply
        self.ctx.state.phase_seconds["load"] = time.perf_counter() - t0
        self.ctx._phase_peak("load")

    def _send_load(self, worker: CandidateProcess, init_args: list) -> protocol.Loaded:
        """``worker`` imports the candidate and builds ``ModelNew(*init_args)``; its reply.

        Raises:
            Stop: the load raised (BUILD_RAISED), the worker failed, or the build lock timed out.
        """
        return self._load_ahead(worker, init_args).finish()

    def _load_ahead(self, worker: CandidateProcess, init_args: list) -> "PendingLoad":
        """The load of :meth:`_send_load` sent; its reply read by :meth:`PendingLoad.finish`, so
        the trusted side and another worker work meanwhile.

        Raises:
            Stop: the worker is gone, or the build lock timed out.
        """
        return PendingLoad(self.ctx, worker, init_args)


class PendingLoad:
    """A ``Load`` sent to a worker, its reply not yet read. kbv's lock on the build directory is
    held from the send to :meth:`finish` or :meth:`close` (the directory is this process's alone
    while the load builds; stale torch locks removed, :mod:`kbv.processes.buildlock`)."""

    def __init__(self, ctx: Context, worker: CandidateProcess, init_args: list) -> None:
        self.ctx, self.worker = ctx, worker
        module_name = f"kbv_candidate_{ctx.candidate.sha256[:16]}"
        request = protocol.Load(ctx.candidate.path, module_name, tuple(init_args), ctx.config.init_seed,
                                ctx.config.device, ctx.config.precision, ctx.fp32_flags)
        self._stack = contextlib.ExitStack()
        try:
            self._hold = self._stack.enter_context(build_lock(
                Path(worker.setup.build_dir), timeout_s=ctx.config.compile_timeout_s,
                what=Path(ctx.candidate.path).name))
        except BuildLockTimeout as exc:
            raise Stop(Outcome.KBV_FAILED, f"{ctx.name}: load: {exc}; an evaluation failure, not the "
                                          "candidate's") from None
        try:
            ctx._send(worker, request, "load")
        except BaseException:
            self._stack.close()
            raise

    def finish(self) -> protocol.Loaded:
        """The worker's reply (the lock released).

        Raises:
            Stop: the load raised (BUILD_RAISED), the worker failed, or its reply is not a ``Loaded``.
        """
        try:
            reply = self.ctx._received(self.worker, "load", self.ctx.config.compile_timeout_s)
        finally:
            self._hold.answered = self.worker.proc.is_alive()  # it answered: the build ended, done or failed
            self._stack.close()
        if not isinstance(reply, protocol.Loaded):
            raise Stop(Outcome.BAD_REPLY, f"{self.ctx.name}: load: unexpected reply {type(reply).__name__}")
        return reply

    def close(self) -> None:
        """Release the lock without the reply (the worker is closed by its owner; the build counts
        as cut off, so the next holder rebuilds what it left)."""
        self._stack.close()


#: ModelNew tensors with a parameter's sample compared with it in full, at most (kbv choice: equal
#: samples of unequal tensors are rare in a model; the candidate must not choose the trusted side's work).
MATCH_TRIES = 8


def unmatched_weights(reference: dict, candidate: dict) -> list[str]:
    """Model's parameters and buffers (``name -> tensor``) that no tensor of ModelNew's state
    (``name -> object``, as the worker sent it) matches, neither by name and shape nor by equal
    values (as they are, or transposed for a 2-D one): ``"name (d0xd1...)"`` each, in Model's order.
    ModelNew gets Model's weights only by building them from the same seed in the same order, so
    these are a likely cause of an INCORRECT whose weights were never compared (a ModelNew naming
    its parameters differently). Each candidate tensor is looked up by a strided sample of its
    values; at most :data:`MATCH_TRIES` tensors with the same sample are compared in full."""
    tensors = {n: t for n, t in candidate.items() if type(t) is torch.Tensor}
    by_sample: dict[tuple, list] = {}
    for t in tensors.values():
        by_sample.setdefault(_sample_key(t), []).append(t)
        if t.dim() == 2:
            by_sample.setdefault(_sample_key(t.t()), []).append(t.t())
    out = []
    for name, r in reference.items():
        shape = tuple(r.shape)
        same_name = tensors.get(name)
        if same_name is not None and tuple(same_name.shape) == shape:
            continue
        # a few tensors with the same sample compared at most: the candidate chooses how many it has
        if any(torch.equal(r.detach(), t.to(r.device)) for t in by_sample.get(_sample_key(r), [])[:MATCH_TRIES]):
            continue
        out.append(f"{name} ({'x'.join(map(str, shape)) or 'scalar'})")
    return out


#: elements of a tensor :func:`_sample_key` reads (evenly strided).
SAMPLE_ELEMENTS = 64


def _sample_key(t: torch.Tensor) -> tuple:
    """Shape, dtype and the bytes of :data:`SAMPLE_ELEMENTS` evenly strided values of ``t``."""
    flat = t.detach().reshape(-1)
    sample = flat[::max(1, flat.numel() // SAMPLE_ELEMENTS)][:SAMPLE_ELEMENTS].to("cpu").contiguous()
    return tuple(t.shape), t.dtype, sample.view(torch.uint8).numpy().tobytes() if sample.numel() else b""

