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
import secrets
import time
from pathlib import Path

from kbv.checks.input_rules import shape_specialised
from kbv.intake.candidates import backend_modules, build_dir
from kbv.intake.problems import ProblemError
from kbv.intake.sizes import size_constants, with_sizes
from kbv.model.records import InputKind, InputSetResult
from kbv.pipeline.correctness import Correctness
from kbv.pipeline.load import Load, call_input_bytes
from kbv.pipeline.outcome import Outcome, Stop
from kbv.processes import footprint as fp
from kbv.processes.candidate import CandidateProcess
from kbv.reference import inputs as inp
from kbv.reference import oracle as orc
from kbv.reference.build import ReferenceProblem, build_reference, first_line, run_reference
from kbv.reference.comparison import reference_is_finite
from kbv.reference.shapes import secret_sizes, size_patterns
from kbv.pipeline.context import Context


#: reference weights above which no secret-shape model is built beside the nominal one (kbv choice:
#: both are held while the shape is judged, within kbv's memory bound of 4·B + 1 GiB).
MAX_MODEL_BYTES = 256 << 20
#: judged sets at the shape beyond ``EvalConfig.secret_shapes``, at most (drawn per verification).
EXTRA_SETS_MAX = 1
#: secret draws of a pattern's sizes tried before the next pattern (the reference may refuse some).
DRAWS_PER_PATTERN = 3


class SecretShapes:
    """The candidate at a secret shape."""

    def __init__(self, ctx: Context, loader: Load, correctness: Correctness,
                 worker: CandidateProcess | None = None) -> None:
        """``worker``: a candidate worker started ahead for the shape (:class:`kbv.pipeline.prestart.Prestarted`),
        idle and ready; else the stage spawns one."""
        self.ctx, self.loader, self.correctness = ctx, loader, correctness
        self._ahead = worker

    def release(self) -> None:
        """Close the worker started ahead if the stage did not use it, and one sent its load by
        :meth:`_begin_shape` whose sets were not judged."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.close()
        begun, self._begun = getattr(self, "_begun", None), None
        if begun is not None:  # the worker stopped first, then the lock (nothing builds once it is free)
            begun[0].close()
            begun[1].close()

    def _poll_load(self) -> None:
        """Where the shape's load was sent ahead and its reply has come (or the worker is gone):
        read it now, so kbv's lock on the build directory is held while the load builds, not
        while the candidate's own sets are judged (another lane with the same file waits on it).
        What it ends in is kept for :meth:`_judge_shape`, which acts on it as on a reply read there."""
        begun = getattr(self, "_begun", None)
        if begun is None or self._load_end is not None:
            return
        worker = begun[0]
        if worker.conn.poll(0) or not worker.proc.is_alive():
            self._load_end = self._finish_load(begun[1])

    def _finish_load(self, pending) -> tuple:
        """``("ok",)``, ``("build", message)`` (ModelNew raised at the shape) or ``("stop", Stop)``."""
        try:
            pending.finish()
            return ("ok",)
        except Stop as stop:
            if stop.outcome is Outcome.BUILD_RAISED:
                return ("build", first_line(stop.message))
            return ("stop", stop)
        finally:
            pending.close()

    def _shape_reference(self, rng: secrets.SystemRandom) -> tuple[ReferenceProblem | None, dict, dict]:
        """A secret shape the reference accepts: (its reference problem or None, the sizes, the
        evidence of the search). Which constants can change is found once per problem in this
        reference worker; the sizes are drawn for every verification."""
        note: dict = {}
        params = sum(t.numel() * t.element_size() for t in (*self.ctx.rp.model.parameters(), *self.ctx.rp.model.buffers()))
        if params > MAX_MODEL_BYTES:
            note["error"] = f"the reference holds {params >> 20} MiB of weights: a second model is not built"
            return None, {}, note
        try:
            source = self.ctx.rp.source_text or Path(self.ctx.rp.ref.path).read_text(encoding="utf-8")
            constants = size_constants(source)
        except (OSError, SyntaxError, ValueError) as exc:
            note["error"] = f"size constants not read: {first_line(exc)}"
            return None, {}, note
        note["constants"] = constants
        known = self.ctx.rp.shape_search  # (the pattern that worked, or () when none did) once searched
        patterns = [known] if known else ([] if known == () else size_patterns(constants))
        refused = []
        nominal_bytes = self.ctx._input_bytes or 0
        for names in patterns:
            for _ in range(DRAWS_PER_PATTERN):
                sizes = secret_sizes(constants, names, rng, self.ctx.rp.shape_floors)
                why = None
                try:
                    vrp = build_reference(self.ctx.rp.ref, self.ctx.config, with_sizes(source, sizes))
                    meta = inp.draw(vrp.module.get_inputs, 0, "meta")
                    in_bytes = sum(a.numel() * a.element_size() for a in meta if hasattr(a, "numel"))
                    if nominal_bytes and in_bytes > nominal_bytes:
                        why = "larger inputs than the problem's own"
                    else:
                        args = inp.to_device(inp.draw(vrp.module.get_inputs, inp.secret_seed(), vrp.device),
                                             vrp.device, self.ctx.config.precision)
                        if not reference_is_finite(run_reference(vrp, args, self.ctx.fp32_flags)):
                            why = "reference output has NaN/Inf"
                except (ProblemError, Exception) as exc:  # noqa: BLE001 - the reference refuses the shape
                    why = first_line(exc)
                if why is None:
                    self.ctx.rp.shape_search = names
                    note.update(changed=list(names), refused=refused)
                    return vrp, sizes, note
                refused.append({"changed": list(names), "why": why})
        self.ctx.rp.shape_search = ()
        note["refused"] = refused
        return None, {}, note

    @contextlib.contextmanager
    def _at_shape(self, vrp: ReferenceProblem):
        """The judging state (reference problem, oracle, one call's input bytes) of ``vrp`` inside
        the block: a device out-of-memory failure there is weighed against the shape's own B, not
        the larger nominal one (:meth:`Context._device_capacity`; red-team helper)."""
        saved = self.ctx.rp, self.ctx.oracle, self.ctx._input_bytes
        sized = call_input_bytes(vrp, self.ctx.config.precision)
        self.ctx.rp, self.ctx.oracle = vrp, orc.Oracle(vrp.model, vrp.device)
        if sized is not None:
            self.ctx._input_bytes = sized[0]
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - re-raised; read here, at the shape's state
            if fp.is_memory_error(exc):  # the reference worker's own failure: weighed against the shape's B
                self.ctx._oom_fit = (exc, self.ctx._trusted_oom_fit(exc))
            raise
        finally:
            self.ctx.oracle.release()
            self.ctx.rp, self.ctx.oracle, self.ctx._input_bytes = saved

    def _shape_first(self) -> bool:
        """Whether the shape is judged before the candidate's own worker loads it, else after its
        correctness sets: a secret coin per verification, so neither its place nor what an earlier
        worker left in the build directory tells the shape's worker apart (a red-team helper's
        kernel took a general path only in the first worker of a run, by a marker file)."""
        self._shape_before = self.ctx.config.secret_shapes > 0 and secrets.randbelow(2) == 0
        return self._shape_before

    def _secret_shapes(self, after_load=None) -> None:
        """Judge the candidate at a secret shape (module doc), in a worker of its own: ``ModelNew``
        built once at the shape, then ``secret_shapes`` to ``secret_shapes + EXTRA_SETS_MAX`` sets
        on fresh draws, each judged as every set is. ``after_load()``: called once the shape's
        worker has answered its load, before its sets (the candidate's own load is then sent, so
        it builds while the shape's sets are judged; the loads keep their order)."""
        self._begin_shape()
        self._judge_shape(after_load)

    def _begin_shape(self) -> None:
        """The first half of :meth:`_secret_shapes`: the shape drawn and its reference built, its
        worker taken and sent its load (the reply read by :meth:`_judge_shape`, so the candidate's
        own worker is judged meanwhile where the shape comes after its sets). Nothing is sent where
        the stage judges nothing (no sets asked for, or no shape the reference accepts)."""
        n = self.ctx.config.secret_shapes
        self._shape_load_error: str | None = None
        self._begun = None
        self._load_end: tuple | None = None  # the load's end once read (_poll_load)
        if n < 1:
            return
        t0 = time.perf_counter()
        rng = secrets.SystemRandom()
        vrp, sizes, note = self._shape_reference(rng)
        self.ctx.state.evidence["secret_shape"] = note
        if vrp is not None:
            self._shape_where = "sizes " + ", ".join(f"{k}={v}" for k, v in sizes.items())
            self._shape_vrp = vrp
            note.update(judged_sets=n + rng.randrange(EXTRA_SETS_MAX + 1), before_load=self._shape_before)
            ahead, self._ahead = self._ahead, None
            note["worker_started_early"] = ahead is not None
            worker = ahead or CandidateProcess(device=self.ctx.config.device,
                                               build_dir=build_dir(self.ctx.candidate, self.ctx.config.device),
                                               preload=backend_modules(self.ctx.candidate.backend))
            try:  # ModelNew built once, at the shape, as a user would
                self._begun = (worker, self.loader._load_ahead(worker, vrp.init_args), vrp, note)
            except BaseException:
                worker.close()
                raise
        self.ctx.state.phase_seconds["secret-shape"] = time.perf_counter() - t0

    def _judge_shape(self, after_load=None) -> None:
        """The second half of :meth:`_secret_shapes`: the load's reply, then the shape's sets; the
        worker closed at the end."""
        begun, self._begun = getattr(self, "_begun", None), None
        if begun is None:
            return
        t0 = time.perf_counter()
        worker, pending, vrp, note = begun
        results: list[InputSetResult] = []
        where = self._shape_where
        try:
            with worker:
                end, self._load_end = self._load_end or self._finish_load(pending), None
                if end[0] == "stop":
                    raise end[1]
                if end[0] == "build":  # the shape's or the candidate's own failure: told apart by the nominal load
                    self._shape_load_error = end[1]
                if after_load is not None and not self._shape_load_error:
                    after_load()  # at the problem's own state (not the shape's: _at_shape below)
                sets = 0 if self._shape_load_error else note["judged_sets"]
                try:
                    with self._at_shape(vrp):
                        for j in range(sets):
                            seed = inp.secret_seed()
                            s = inp.InputSet(f"shape-{j + 1}", InputKind.SHAPE, where, seed, maker=lambda seed=seed: (
                                inp.draw(vrp.module.get_inputs, seed, vrp.device), None))
                            results.append(self.correctness._check_set(worker, s))
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
            self.ctx.state.phase_seconds["secret-shape"] = (self.ctx.state.phase_seconds.get("secret-shape", 0.0)
                                                            + time.perf_counter() - t0)
        if self._shape_load_error and not self._shape_before:  # the candidate's own load succeeded before
            self._shape_built_nominally()

    def _shape_built_nominally(self) -> None:
        """Once the candidate's own load succeeded: a ``ModelNew`` that could not be built at the
        secret shape is wrong there (the same file built at the problem's sizes)."""
        if getattr(self, "_shape_load_error", None):
            self._shape_results = [InputSetResult("shape-1", InputKind.SHAPE, self._shape_where, 0,
                                                  passed=False, fault=self._shape_load_error)]

    def _late_shape(self, worker: CandidateProcess) -> None:
        """One more set at this verification's secret shape, in the candidate's own worker after its
        timed calls, where its ``ModelNew`` takes the shape's inputs as it is (the shape changes no
        init input): a kernel right for its first calls only, or only in a worker where the shape
        came first, is wrong here after hundreds of calls at the nominal shape."""
        vrp = getattr(self, "_shape_vrp", None)
        self._shape_vrp = None
        if vrp is None or list(vrp.init_args) != list(self.ctx.rp.init_args) or any(
                r.passed is False for r in self.ctx.state.input_sets):  # wrong already: not needed
            return
        seed = inp.secret_seed()
        s = inp.InputSet("shape-late", InputKind.SHAPE, f"{self._shape_where}, after the timed calls", seed,
                         maker=lambda: (inp.draw(vrp.module.get_inputs, seed, vrp.device), None))
        with self._at_shape(vrp):
            try:
                r = self.correctness._check_set(worker, s)
            except Stop as stop:
                if stop.outcome is not Outcome.CALL_RAISED:
                    raise
                r = InputSetResult("shape-late", InputKind.SHAPE, s.transform, seed, passed=False,
                                   fault=first_line(stop.message))
        self.ctx.state.input_sets.append(r)
        if r.passed is False:
            self.ctx._add(shape_specialised([x for x in self.ctx.state.input_sets if not x.dropped]))

    def _shape_finding(self) -> None:
        """The shape's sets listed after the problem's own (once), and the finding they make."""
        results, self._shape_results = getattr(self, "_shape_results", []), []
        self.ctx.state.input_sets += results
        self.ctx._add(shape_specialised([r for r in self.ctx.state.input_sets if not r.dropped]))


__all__ = ["SecretShapes"]
