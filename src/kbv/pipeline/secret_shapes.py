"""The secret-shape stage (issue 23): before the candidate's own worker loads it, the candidate is
judged on ``EvalConfig.secret_shapes`` input sets at a shape the problem does not name, derived
from its size constants and vetted on the reference (:mod:`kbv.reference.shapes`). A kernel right
at the problem's own sizes and wrong, or raising, at the secret one is INCORRECT with the finding
``inputs:shape-specialised`` (taxonomy 21); one whose sizes cannot change gets no such set.

The shape is judged in a worker of its own, where ``ModelNew`` is built once, with the shape's
init inputs, and called only at the shape: as a user's process at those sizes would. A candidate
that counted its constructions in one worker (Load, then a second build for the shape) took a
general path in the second only: PASS for a kernel wrong off its nominal shape (red-team helper,
2026-12-05, row ``t21-build-count``). Its sets are judged exactly as the others (the shape's own
reference model and float64 oracle, the per-call probes). The shape follows from the problem, so
it is the same for every sample of a problem; the values are drawn under fresh secret seeds.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from kbv.checks.input_rules import shape_specialised
from kbv.intake.candidates import build_dir
from kbv.intake.problems import ProblemError
from kbv.intake.sizes import size_constants, with_sizes
from kbv.model.records import InputKind, InputSetResult
from kbv.pipeline.correctness import Correctness
from kbv.pipeline.load import Load
from kbv.pipeline.outcome import Outcome, Stop
from kbv.processes.candidate import CandidateProcess
from kbv.reference import inputs as inp
from kbv.reference import oracle as orc
from kbv.reference.build import ReferenceProblem, build_reference, first_line, run_reference
from kbv.reference.comparison import reference_is_finite
from kbv.reference.shapes import derived_shapes


#: reference weights above which no secret-shape model is built beside the nominal one (kbv choice:
#: both are held while the shape is judged, within kbv's memory bound of 4·B + 1 GiB).
MAX_MODEL_BYTES = 256 << 20


class SecretShapes(Load, Correctness):
    """The candidate at a secret shape."""

    def _shape_reference(self) -> tuple[ReferenceProblem | None, dict, dict]:
        """The first derived shape the reference accepts: (its reference problem or None, the sizes
        changed, the evidence of the search). The search runs once per problem in this reference
        worker; later jobs build the accepted shape's reference again (it is not kept: a second
        model held between jobs would count against the memory bound)."""
        if self.rp.shape_search is not None:
            sizes, note = self.rp.shape_search
            if not sizes:
                return None, {}, note
            try:
                source = Path(self.rp.ref.path).read_text(encoding="utf-8")
                return build_reference(self.rp.ref, self.config, with_sizes(source, sizes)), sizes, note
            except (OSError, SyntaxError, KeyError, ProblemError) as exc:
                return None, {}, {**note, "error": first_line(exc)}
        vrp, sizes, note = self._search_shape()
        self.rp.shape_search = (sizes, note)
        return vrp, sizes, note

    def _search_shape(self) -> tuple[ReferenceProblem | None, dict, dict]:
        note: dict = {}
        params = sum(t.numel() * t.element_size() for t in (*self.rp.model.parameters(), *self.rp.model.buffers()))
        if params > MAX_MODEL_BYTES:
            note["error"] = f"the reference holds {params >> 20} MiB of weights: a second model is not built"
            return None, {}, note
        try:
            source = Path(self.rp.ref.path).read_text(encoding="utf-8")
            constants = size_constants(source)
        except (OSError, SyntaxError, ValueError) as exc:
            note["error"] = f"size constants not read: {first_line(exc)}"
            return None, {}, note
        note["constants"] = constants
        refused = []
        nominal_bytes = self._input_bytes or 0
        for sizes in derived_shapes(constants):
            try:
                vrp = build_reference(self.rp.ref, self.config, with_sizes(source, sizes))
                meta = inp.draw(vrp.module.get_inputs, 0, "meta")
                in_bytes = sum(a.numel() * a.element_size() for a in meta if hasattr(a, "numel"))
                if nominal_bytes and in_bytes > nominal_bytes:
                    refused.append({"sizes": sizes, "why": "larger inputs than the problem's own"})
                    continue
                args = inp.to_device(inp.draw(vrp.module.get_inputs, inp.secret_seed(), vrp.device), vrp.device,
                                     self.config.precision)
                if not reference_is_finite(run_reference(vrp, args, self.fp32_flags)):
                    refused.append({"sizes": sizes, "why": "reference output has NaN/Inf"})
                    continue
            except (ProblemError, Exception) as exc:  # noqa: BLE001 - the reference refuses the shape
                refused.append({"sizes": sizes, "why": first_line(exc)})
                continue
            note.update(sizes=sizes, refused=refused)
            return vrp, sizes, note
        note["refused"] = refused
        return None, {}, note

    @contextlib.contextmanager
    def _at_shape(self, vrp: ReferenceProblem):
        """The judging state (reference problem, oracle) of ``vrp`` inside the block."""
        saved = self.rp, self.oracle
        self.rp, self.oracle = vrp, orc.Oracle(vrp.model, vrp.device)
        try:
            yield
        finally:
            self.oracle.release()
            self.rp, self.oracle = saved

    def _secret_shapes(self) -> None:
        """Judge ``secret_shapes`` sets at the first accepted derived shape (module doc), in a
        worker of their own, before the candidate's own worker loads it."""
        n = self.config.secret_shapes
        self._shape_load_error: str | None = None
        if n < 1:
            return
        t0 = time.perf_counter()
        vrp, sizes, note = self._shape_reference()
        self.state.evidence["secret_shape"] = note
        if vrp is None:
            self.state.phase_seconds["secret-shape"] = time.perf_counter() - t0
            return
        where = "sizes " + ", ".join(f"{k}={v}" for k, v in sizes.items())
        self._shape_where = where
        results: list[InputSetResult] = []
        try:
            with CandidateProcess(device=self.config.device, build_dir=build_dir(self.candidate, self.config.device)) \
                    as worker, self._at_shape(vrp):
                try:
                    self._send_load(worker, vrp.init_args)  # ModelNew built once, at the shape, as a user would
                except Stop as stop:
                    if stop.outcome is not Outcome.BUILD_RAISED:
                        raise
                    # the shape's or the candidate's own failure: told apart by the nominal load (run.py)
                    self._shape_load_error = first_line(stop.message)
                    return
                try:
                    for j in range(n):
                        seed = inp.secret_seed()
                        s = inp.InputSet(f"shape-{j + 1}", InputKind.SHAPE, where, seed,
                                         maker=lambda seed=seed: (inp.draw(vrp.module.get_inputs, seed, vrp.device), None))
                        results.append(self._check_set(worker, s))
                        if results[-1].passed is False:
                            break
                except Stop as stop:
                    if stop.outcome is not Outcome.CALL_RAISED:
                        raise
                    # raising at another shape is being wrong there, as a wrong output is
                    results.append(InputSetResult(f"shape-{len(results) + 1}", InputKind.SHAPE, where, 0,
                                                  passed=False, fault=first_line(stop.message)))
        finally:
            self._shape_results = results  # listed after the problem's own sets (_shape_finding)
            self.state.phase_seconds["secret-shape"] = time.perf_counter() - t0

    def _shape_built_nominally(self) -> None:
        """After the candidate's own load succeeded: a ``ModelNew`` that could not be built at the
        secret shape is wrong there (the same file built at the problem's sizes)."""
        if getattr(self, "_shape_load_error", None):
            self._shape_results = [InputSetResult("shape-1", InputKind.SHAPE, self._shape_where, 0,
                                                  passed=False, fault=self._shape_load_error)]

    def _shape_finding(self) -> None:
        """The shape's sets listed after the problem's own (once), and the finding they make."""
        results, self._shape_results = getattr(self, "_shape_results", []), []
        self.state.input_sets += results
        self._add(shape_specialised([r for r in self.state.input_sets if not r.dropped]))


__all__ = ["SecretShapes"]
