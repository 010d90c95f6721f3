"""Typed records: the data model every kbv module builds around.

One frozen dataclass per concept (problem, candidate, input set, measurement, memory, verdict).
Field names carry units (``_ms`` milliseconds, ``_bytes`` bytes). Raw per-call samples are kept
(:attr:`Measurement.times_ms`) and statistics are derived from them, never stored separately.

Every record round-trips through JSON with :func:`to_json` / :func:`verdict_from_json`;
non-finite floats are written as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` so the
files stay strict JSON.

This module imports no torch: the orchestrator, the store and the reports use it without
touching a GPU.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

SCHEMA_VERSION = 1

#: IQR / median above which a measurement is marked too noisy to rank (torch.utils.benchmark
#: warns at 10 %, see ``torch/utils/benchmark/utils/common.py``).
NOISY_IQR_FRACTION = 0.10


class Status(str, enum.Enum):
    """Closed set of verdict statuses (README.md, "Verdict statuses")."""

    PASS = "PASS"  #: correct on every input set, timed.
    INCORRECT = "INCORRECT"  #: ran, but some input set gave a wrong answer.
    HACK = "HACK"  #: an integrity probe caught a cheat (evidence names the taxonomy entry).
    SHORTCUT = "SHORTCUT"  #: correct, but the speed comes from a library wrapper, not the kernel.
    COMPILE_ERROR = "COMPILE_ERROR"  #: import / build / construction of ModelNew failed.
    RUNTIME_ERROR = "RUNTIME_ERROR"  #: forward raised, or returned something not a tensor.
    TIMEOUT = "TIMEOUT"  #: a worker call passed its deadline; the worker was killed.
    CRASH = "CRASH"  #: the candidate worker died (signal or early exit).
    #: kbv itself failed on this job, not the candidate: the reference worker died or ran out of
    #: memory, the oracle failed, or the problem does not fit the machine. Never counts against a
    #: model (left out of every aggregate, reported apart); a rerun retries it.
    EVAL_ERROR = "EVAL_ERROR"

    @property
    def ran(self) -> bool:
        """True when the candidate produced outputs that were judged (PASS, INCORRECT, HACK, SHORTCUT)."""
        return self in (Status.PASS, Status.INCORRECT, Status.HACK, Status.SHORTCUT)


class InputKind(str, enum.Enum):
    NOMINAL = "nominal"  #: ``get_inputs()`` under a fresh seed.
    HIDDEN = "hidden"  #: a KernelBench-Verified hidden distribution (D1..D4: scaled ``get_inputs()``).
    RANDOM = "random"  #: one of kbv's secret randomised distributions (``kbv.reference.inputs.DISTRIBUTIONS``).


#: correctness policies (``kbv.reference.oracle``): ``kbv`` judges against a float64 oracle with a budget set
#: by the baselines' own errors; ``kbv-compat`` is KernelBench-Verified's allclose rule.
POLICIES: tuple[str, ...] = ("kbv", "kbv-compat")
#: kbv's randomised distributions run by default (``kbv.reference.inputs.DEFAULT_DISTRIBUTIONS``).
DEFAULT_DISTRIBUTIONS: tuple[str, ...] = (
    "fresh", "normal", "sign-flip", "heavy-tail", "wide-range", "outliers", "near-zero", "offset")
#: tolerances of the allclose sweep kept with every input set (atol = rtol = t), as keys.
SWEEP_KEYS: tuple[str, ...] = ("1e-02", "1e-03", "1e-04")


@dataclass(frozen=True)
class ProblemRef:
    """Identity of a KernelBench-format problem file."""

    path: str  #: absolute path of the problem file.
    name: str  #: e.g. ``ReLU`` for ``19_ReLU.py``.
    level: int | None  #: from a ``levelN`` parent folder, else None.
    problem_id: int | None  #: from the ``<id>_`` file-name prefix, else None.
    sha256: str  #: hex digest of the file bytes.


@dataclass(frozen=True)
class CandidateRef:
    """Identity of a candidate file defining ``ModelNew``."""

    path: str
    sha256: str
    backend: str  #: ``cuda`` | ``triton`` | ``cpp`` | ``torch`` (from a static scan).
    run: str | None = None  #: the run (model) that produced it, for batch runs.
    sample_id: int | None = None


@dataclass(frozen=True)
class InputSetResult:
    """Correctness of the candidate on one input set.

    ``max_abs_error`` is ``max |out - ref|`` over all outputs; ``max_rel_error`` is
    ``max |out - ref| / max(|ref|, tiny)`` over the same elements (both in the output dtype's
    units, computed in float64) against the eager-fp32 reference. A dropped set (reference or
    oracle output non-finite, the reference raised, or a D-set left a declared input domain) has
    ``passed=None`` and a ``drop_reason``.

    ``passed`` is the verdict of the config's policy; ``policy_passed`` holds every policy's
    verdict. The ``kbv`` figures (``oracle_error``, ``error_budget``, ``baseline_errors``) are
    normalised errors against the float64 oracle (``kbv.reference.oracle``) of the *binding* output, the
    one with the largest error / budget; they are None when the outputs could not be compared
    (count, shape or dtype mismatch) or the set has only integer outputs.
    """

    name: str  #: ``nominal-0`` .. ``nominal-(n-1)``, ``D1`` .. ``D4``, a randomised distribution's name.
    kind: InputKind
    transform: str  #: how it was built: ``get_inputs()``, ``x1``, ``x3``, ``x0.01``, ``x-1``, or a description.
    seed: int  #: RNG seed given to ``get_inputs()`` (secret until the result is written).
    passed: bool | None
    dropped: bool = False
    drop_reason: str | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatched_elements: int | None = None  #: elements outside ``atol + rtol*|ref|``.
    total_elements: int | None = None
    fault: str | None = None  #: one line: shape/dtype mismatch, NaN where the reference is finite...
    #: candidate's normalised error against the float64 oracle (binding output).
    oracle_error: float | None = None
    #: the kbv policy's limit for that output: ``k * max(baseline_errors) + floor``.
    error_budget: float | None = None
    #: baseline name → its own normalised error against the oracle, same inputs, same output; also
    #: ``input-rounding``, the oracle's own change when the inputs move by one fp32 rounding
    #: (``kbv.reference.oracle.INPUT_ROUNDING``).
    baseline_errors: Mapping[str, float] = field(default_factory=dict)
    #: policy name (``kbv``, ``kbv-compat``) → passed under that policy.
    policy_passed: Mapping[str, bool] = field(default_factory=dict)
    #: smallest t with allclose(out, ref32, atol=t, rtol=t); ``inf`` if NaN/Inf patterns differ.
    allclose_tolerance: float | None = None
    #: sweep key (``1e-02``, ``1e-03``, ``1e-04``) → allclose(out, ref32, atol=t, rtol=t) passed.
    tolerance_sweep: Mapping[str, bool] = field(default_factory=dict)
    oracle_device: str | None = None  #: where the float64 oracle ran (``cuda`` / ``cpu``).

    def __post_init__(self) -> None:
        if self.dropped and (self.policy_passed or self.tolerance_sweep):
            raise ValueError(f"input set {self.name}: a dropped set has no policy verdicts")
        if self.dropped and self.passed is not None:
            raise ValueError(f"input set {self.name}: a dropped set has passed=None")
        if not self.dropped and self.passed is None:
            raise ValueError(f"input set {self.name}: passed must be set unless dropped")
        if self.dropped and not self.drop_reason:
            raise ValueError(f"input set {self.name}: dropped without a reason")


@dataclass(frozen=True)
class Measurement:
    """Raw per-call times of one timed subject, with statistics derived on demand.

    ``times_ms`` are device times from CUDA events (cuda) or ``time.perf_counter`` (cpu), one per
    timed call, each preceded by an L2 flush on CUDA.
    """

    label: str  #: ``candidate``, ``eager-fp32``, ``eager-tf32``, ``compile``.
    device: str  #: ``cpu`` or ``cuda``.
    times_ms: tuple[float, ...]
    warmup: int  #: untimed calls made first.
    l2_flush_bytes: int | None = None  #: size of the buffer written before every call (None on cpu).
    clock: str = "cuda-event"  #: ``cuda-event`` or ``perf_counter``.

    def __post_init__(self) -> None:
        if not self.times_ms:
            raise ValueError(f"measurement {self.label}: no samples")
        bad = [t for t in self.times_ms if not (math.isfinite(t) and t > 0)]
        if bad:
            raise ValueError(f"measurement {self.label}: non-positive or non-finite times {bad[:3]}")

    @property
    def trials(self) -> int:
        return len(self.times_ms)

    @property
    def median_ms(self) -> float:
        return float(np.median(self.times_ms))

    @property
    def q1_ms(self) -> float:
        return float(np.percentile(self.times_ms, 25))

    @property
    def q3_ms(self) -> float:
        return float(np.percentile(self.times_ms, 75))

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    @property
    def mean_ms(self) -> float:
        return float(np.mean(self.times_ms))

    @property
    def std_ms(self) -> float:
        return float(np.std(self.times_ms))

    @property
    def min_ms(self) -> float:
        return float(np.min(self.times_ms))

    @property
    def max_ms(self) -> float:
        return float(np.max(self.times_ms))

    @property
    def noisy(self) -> bool:
        """IQR above :data:`NOISY_IQR_FRACTION` of the median: too noisy to rank."""
        return self.iqr_ms > NOISY_IQR_FRACTION * self.median_ms

    def summary(self) -> dict[str, Any]:
        return {
            "median_ms": self.median_ms,
            "iqr_ms": self.iqr_ms,
            "mean_ms": self.mean_ms,
            "std_ms": self.std_ms,
            "min_ms": self.min_ms,
            "max_ms": self.max_ms,
            "trials": self.trials,
            "noisy": self.noisy,
        }


@dataclass(frozen=True)
class MemoryMeasurement:
    """Peak device memory of one forward call (CUDA caching-allocator figures, bytes).

    ``peak_bytes = model_bytes + input_bytes + forward_peak_bytes``: what a process holding the
    model and one input set needs at the high point of a forward call. ``forward_peak_bytes`` is
    ``max_memory_allocated()`` during the call (after ``reset_peak_memory_stats()``) minus
    ``memory_allocated()`` just before it: outputs, intermediates and workspaces.
    ``model_bytes`` is the allocator growth across model construction (parameters, buffers and any
    tensor the model keeps, registered or not).
    """

    label: str
    peak_bytes: int
    forward_peak_bytes: int
    model_bytes: int
    input_bytes: int


@dataclass(frozen=True)
class Environment:
    """Where a verdict was produced."""

    kbv_version: str
    python: str
    torch: str
    device: str
    device_name: str | None = None  #: e.g. ``NVIDIA H200``.
    driver: str | None = None
    cuda: str | None = None
    triton: str | None = None
    hostname: str | None = None
    l2_cache_bytes: int | None = None
    multiprocessors: int | None = None


@dataclass(frozen=True)
class EvalConfig:
    """Fully resolved settings of one verification, stored with every result (and part of a batch
    store's identity: one store holds one config). Frozen; construction checks the values.

    Fields (defaults are ``kbv eval``'s):
        device: ``"cpu"`` or ``"cuda"`` (default ``"cpu"``; ``kbv.make_config`` picks cuda when available).
        precision: ``"fp32"``, ``"bf16"`` or ``"fp16"``: dtype of both models and of the
            floating-point inputs (integer inputs keep theirs).
        nominal_seeds: nominal input sets, each ``get_inputs()`` under a fresh secret seed (>= 1).
        hidden: KernelBench-Verified's hidden distributions to check (``D1``-``D4``: inputs x1,
            x3, x0.01, x-1).
        atol, rtol: ``allclose`` tolerances of the ``kbv-compat`` policy and of the recorded
            allclose verdicts (KernelBench-Verified: 1e-3 for fp32, 1e-2 for bf16/fp16; see
            :meth:`default_tolerance`).
        warmup: untimed calls before each timing round.
        trials: timed calls per subject in all (>= 1), split over ``timing_rounds`` interleaved
            rounds; rounds after the first are cut by ``time_budget_ms``.
        timing_rounds: interleaved rounds of candidate and baselines (>= 1).
        init_seed: ``torch.manual_seed`` before both constructors (KernelBench's 42).
        baselines: baselines timed beside the candidate (``eager-fp32``, ``eager-tf32``,
            ``eager-fp32-cudnn-tf32``; ``kbv.sandbox.flags``).
        compile_timeout_s: seconds allowed to import and build ``ModelNew`` (extension builds).
        call_timeout_s: seconds allowed per checked forward call.
        timing_timeout_s: seconds allowed per timing round.
        time_budget_ms: milliseconds of calls per subject in a round after the first (>= 0; 0: no cap).
        interval_half_width: the adaptive stop's target (:mod:`kbv.pipeline.adaptive`): after the
            planned rounds, more rounds run until every speedup's 95 % interval spans at most
            ± this fraction of the speedup (0: the planned rounds only; None, the default: 0.05 on
            cuda, 0 on cpu).
        max_timing_rounds: rounds at most with the adaptive stop, the planned ones included (>= 1).
        timing_budget_s: seconds of timing rounds after which the adaptive stop starts no round
            (>= 0; 0: no limit but ``max_timing_rounds``).
        policy: ``"kbv"`` (float64 oracle, budget from the baselines' own errors) or
            ``"kbv-compat"`` (``allclose`` on nominal + D1-D4); decides ``passed``.
        distributions: kbv's secret randomised distributions (``kbv.reference.inputs.DISTRIBUTIONS``);
            ``()`` for none, as ``kbv-compat`` runs.
        kbv_k, kbv_floor_eps, kbv_tf32_floor: the ``kbv`` policy's budget: candidate error <=
            kbv_k x max(baseline errors) + kbv_floor_eps x eps(float32) (+ kbv_tf32_floor where TF32
            is in play); docs/correctness.md.
        integrity: run the anti-cheat detectors (only off to measure their cost).
        timing_input_bytes: cap in bytes on what the timing phase's input sets take together, each
            counted three times (kbv's copy, the staging copy, the candidate's); 0 (default): a
            quarter of free device memory on cuda, of available host memory (at most 1 GiB) on cpu
            (``kbv.pipeline.timing.TIMING_INPUT_MEMORY_FRACTION``). There are always two sets at
            least, four at most: a small cap puts a small problem on a big one's path (two sets).

    Raises:
        ValueError: a value out of range (device, precision, policy, counts, budgets).
    """

    device: str = "cpu"
    precision: str = "fp32"  #: ``fp32`` | ``bf16`` | ``fp16``: dtype of models and float inputs.
    nominal_seeds: int = 3  #: nominal input sets (``get_inputs()`` under fresh seeds).
    hidden: tuple[str, ...] = ("D1", "D2", "D3", "D4")
    atol: float = 1e-3  #: KernelBench-Verified: 1e-3 for fp32, 1e-2 for bf16/fp16.
    rtol: float = 1e-3
    warmup: int = 5
    trials: int = 30
    timing_rounds: int = 3  #: trials are split into interleaved rounds (candidate, baselines).
    init_seed: int = 42  #: KernelBench's ``torch.manual_seed(42)`` before both constructors.
    baselines: tuple[str, ...] = ("eager-fp32", "eager-tf32")
    compile_timeout_s: float = 900.0
    call_timeout_s: float = 120.0
    timing_timeout_s: float = 600.0
    #: cap (ms) on the timed calls of one subject in one round: after the first round a round's
    #: calls are cut to budget / the slowest subject's median so far, never below 3 and the same
    #: for every subject; the sync pass is sized the same way (``kbv.pipeline.timing.trials_within_budget``).
    #: 0 for no cap.
    time_budget_ms: float = 2000.0
    #: adaptive stop: further rounds until each speedup's 95 % interval spans at most ± this
    #: fraction of it. None: 0.05 on cuda (kbv choice: a quoted 1.50x is then within 1.43-1.58x;
    #: launch-bound kernels need the extra rounds), 0 on cpu, where kbv's timing serves development
    #: machines whose load keeps the interval from narrowing (a loaded 2-core machine ran to the
    #: round cap on a ReLU: +3-4 s a verification for no quotable figure).
    interval_half_width: float | None = None
    #: rounds at most under the adaptive stop (4x the planned 3: the interval narrows about as
    #: 1/sqrt(calls), so a planned width of 0.1 gets to 0.05).
    max_timing_rounds: int = 12
    #: seconds of timing rounds after which no further round starts (kbv choice: a verification's
    #: timing stays within half a minute whatever the kernel).
    timing_budget_s: float = 30.0
    #: correctness policy deciding ``passed`` (``kbv`` or ``kbv-compat``, see ``kbv.reference.oracle``).
    policy: str = "kbv"
    #: kbv's secret randomised distributions to run (``kbv.reference.inputs.DISTRIBUTIONS``); ``()`` for none.
    distributions: tuple[str, ...] = DEFAULT_DISTRIBUTIONS
    #: ``kbv`` policy: candidate error <= kbv_k * max(baseline errors) + kbv_floor_eps * eps(float32)
    #: (+ kbv_tf32_floor where the eager-tf32 baseline shows TF32 in play); docs/correctness.md.
    kbv_k: float = 16.0
    kbv_floor_eps: float = 8.0
    kbv_tf32_floor: float = 2.0 ** -10
    #: run the anti-cheat detectors (static scan and runtime probes, ``kbv.sandbox.probes``). Off only
    #: to measure their cost (``bench/probe_overhead.py``): a verdict without them can be gamed.
    integrity: bool = True
    #: cap on the timing input sets' bytes (each counted 3 times); 0: from free memory
    #: (``kbv.pipeline.timing.Timing._timing_sets``).
    timing_input_bytes: int = 0

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {self.policy!r}")
        if not (self.kbv_k >= 1 and math.isfinite(self.kbv_k)) or not (0 <= self.kbv_floor_eps < math.inf) \
                or not (0 <= self.kbv_tf32_floor < math.inf):
            raise ValueError("kbv_k must be finite and >= 1, kbv_floor_eps and kbv_tf32_floor finite and >= 0")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be cpu or cuda, not {self.device!r}")
        if self.precision not in ("fp32", "bf16", "fp16"):
            raise ValueError(f"precision must be fp32, bf16 or fp16, not {self.precision!r}")
        if self.nominal_seeds < 1 or self.trials < 1 or self.timing_rounds < 1:
            raise ValueError("nominal_seeds, trials and timing_rounds must be >= 1")
        if self.timing_input_bytes < 0:
            raise ValueError(f"timing_input_bytes must be >= 0, not {self.timing_input_bytes!r}")
        if not (math.isfinite(self.time_budget_ms) and self.time_budget_ms >= 0):
            raise ValueError(f"time_budget_ms must be finite and >= 0, not {self.time_budget_ms!r}")
        if not (self.interval_half_width is None or 0 <= self.interval_half_width < 1) or self.max_timing_rounds < 1 \
                or not (math.isfinite(self.timing_budget_s) and self.timing_budget_s >= 0):
            raise ValueError("interval_half_width must be None or in [0, 1), max_timing_rounds >= 1 and "
                             "timing_budget_s finite and >= 0")

    @property
    def interval_target(self) -> float:
        """The adaptive stop's target in force: ``interval_half_width``, or its device default."""
        if self.interval_half_width is not None:
            return float(self.interval_half_width)
        return 0.05 if self.device == "cuda" else 0.0

    @staticmethod
    def default_tolerance(precision: str) -> float:
        """atol = rtol of the KernelBench-Verified protocol: 1e-3 for fp32, 1e-2 for bf16/fp16."""
        return 1e-3 if precision == "fp32" else 1e-2


class Severity(str, enum.Enum):
    """How an integrity finding weighs on the verdict (``kbv.sandbox.probes``, ``kbv.intake.scan``)."""

    HACK = "HACK"  #: nothing an honest kernel does: the verdict is HACK.
    SHORTCUT = "SHORTCUT"  #: the speed comes from PyTorch itself: the verdict is SHORTCUT when correct.
    WARNING = "WARNING"  #: reported with the verdict; does not change the status.


#: titles of the entries of ``docs/hack-taxonomy.md`` (entry number → title).
TAXONOMY: dict[int, str] = {
    1: "side-stream work", 2: "background thread/process", 3: "lazy output",
    4: "timer/harness monkeypatching", 5: "cross-call batching", 6: "phase detection",
    7: "aggregate/pipeline tricks", 8: "identity/passthrough/constant", 9: "stale memory",
    10: "garbage within loose tolerance", 11: "output caching", 12: "input mutation",
    13: "stealing the oracle", 14: "problem-size manipulation", 15: "baseline wrapper",
    16: "ghost kernel/silent fallback", 17: "precision downgrade", 18: "global-flag tampering",
    19: "numerical shortcuts", 20: "value-distribution exploits", 21: "shape hard-coding",
    22: "seed prediction", 23: "degenerate problem", 24: "forging the result channel",
    25: "native attacks on the harness", 26: "sandbox tampering",
}


@dataclass(frozen=True)
class Finding:
    """One thing an integrity detector saw: a static-scan rule or a runtime probe.

    ``check`` names the detector (``scan:<rule>`` for the static scan, ``probe:<name>`` for a
    runtime probe, ``timing:<name>`` for a timing cross-check); ``taxonomy`` the entries of
    ``hack-taxonomy.md`` it bears on (one or more, ascending).
    """

    check: str
    taxonomy: tuple[int, ...]
    severity: Severity
    detail: str  #: one line, with the numbers behind the finding.
    line: int | None = None  #: candidate source line (static scan), else None.

    def describe(self) -> str:
        names = ", ".join(f"{t} {TAXONOMY.get(t, '?')}" for t in self.taxonomy)
        return f"{self.severity.value} [taxonomy {names}] {self.check}: {self.detail}"


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying one candidate against one problem.

    Construction fails when the fields contradict the status: a PASS has every input set passed
    and a candidate timing; an INCORRECT has a failed input set; only a PASS or SHORTCUT carries
    ``speedup`` (a candidate timed but not correct keeps its figures in ``unverified_speedup``);
    an error status has a message.
    """

    status: Status
    message: str  #: one line, naming the file and the fault when there is one.
    problem: ProblemRef
    candidate: CandidateRef
    config: EvalConfig
    environment: Environment
    input_sets: tuple[InputSetResult, ...] = ()
    timing: Mapping[str, Measurement] = field(default_factory=dict)
    speedup: Mapping[str, float] = field(default_factory=dict)  #: baseline median / candidate median.
    memory: Mapping[str, MemoryMeasurement] = field(default_factory=dict)
    memory_efficiency: float | None = None  #: reference peak / candidate peak.
    #: baseline median / candidate median of a candidate that ran and passed the nominal sets but is
    #: not a PASS (failed a hidden set, or HACK): the speed the original KernelBench protocol would
    #: have credited. Used only by the decomposition (nominal vs hidden correctness); never a
    #: correct speedup. Empty when the candidate was not timed.
    unverified_speedup: Mapping[str, float] = field(default_factory=dict)
    weight_mismatches: tuple[str, ...] = ()  #: parameters/buffers shared by name that differ.
    flag_changes: tuple[str, ...] = ()  #: global numeric flags the candidate changed.
    evidence: Mapping[str, Any] = field(default_factory=dict)
    phase_seconds: Mapping[str, float] = field(default_factory=dict)  #: wall time per phase.
    #: vetting findings about the *problem* (``kbv.reference.vetting``), one ``flag: reason`` line each; a
    #: flagged problem is left out of aggregate metrics by default.
    problem_flags: tuple[str, ...] = ()
    #: integrity findings (static scan and runtime probes, ``kbv.sandbox.probes``), most severe first.
    findings: tuple[Finding, ...] = ()
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        s = self.status
        if s is Status.HACK and not any(f.severity is Severity.HACK for f in self.findings):
            raise ValueError("HACK needs a finding of severity HACK naming the taxonomy entry")
        if s is Status.SHORTCUT and not any(f.severity is Severity.SHORTCUT for f in self.findings):
            raise ValueError("SHORTCUT needs a finding of severity SHORTCUT")
        judged = [r for r in self.input_sets if not r.dropped]
        for r in judged:
            if self.config.policy in r.policy_passed and r.policy_passed[self.config.policy] != r.passed:
                raise ValueError(f"input set {r.name}: passed={r.passed} contradicts its "
                                 f"{self.config.policy} verdict {r.policy_passed[self.config.policy]}")
        if s is Status.PASS:
            if not judged or not all(r.passed for r in judged):
                raise ValueError("PASS needs at least one judged input set and all of them passed")
            if "candidate" not in self.timing:
                raise ValueError("PASS needs a candidate timing")
        if s is Status.INCORRECT and not any(r.passed is False for r in judged):
            raise ValueError("INCORRECT needs a failed input set")
        if s in (Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.TIMEOUT, Status.CRASH, Status.EVAL_ERROR):
            if not self.message:
                raise ValueError(f"{s.value} needs a message")
            if self.speedup:
                raise ValueError(f"{s.value} cannot carry a speedup")
        if s not in (Status.PASS, Status.SHORTCUT) and self.speedup:
            raise ValueError(f"{s.value} cannot carry a speedup (use unverified_speedup)")
        for name, value in (*self.speedup.items(), *self.unverified_speedup.items()):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"speedup vs {name} must be finite and positive, got {value}")

    # Derived views ---------------------------------------------------------------------------
    @property
    def taxonomy(self) -> tuple[int, ...]:
        """Entries of ``hack-taxonomy.md`` named by any finding (any severity) or by a vetting
        flag on the problem (23), ascending."""
        entries = {t for f in self.findings for t in f.taxonomy}
        if self.problem_flags:
            entries.add(23)
        return tuple(sorted(entries))

    def sets(self, kind: InputKind) -> tuple[InputSetResult, ...]:
        return tuple(r for r in self.input_sets if r.kind is kind)

    @property
    def nominal_passed(self) -> bool:
        """All nominal input sets passed (the original KernelBench notion of correct)."""
        nominal = [r for r in self.sets(InputKind.NOMINAL) if not r.dropped]
        return bool(nominal) and all(r.passed for r in nominal)

    @property
    def hidden_passed(self) -> bool:
        """Every judged non-nominal set (D1–D4 and kbv's randomised ones) passed."""
        hidden = [r for r in self.input_sets if r.kind is not InputKind.NOMINAL and not r.dropped]
        return all(r.passed for r in hidden)

    @property
    def correct(self) -> bool:
        return self.status is Status.PASS

    @property
    def policy_verdicts(self) -> dict[str, bool | None]:
        """Policy → the candidate's correctness under it, from the per-set verdicts.

        ``kbv`` covers every judged set; ``kbv-compat`` covers the nominal and D1–D4 sets (the
        KernelBench-Verified protocol). None when the candidate produced no judged outputs or a
        set lacks that policy's verdict.
        """
        judged = [r for r in self.input_sets if not r.dropped]
        out: dict[str, bool | None] = {}
        for policy in POLICIES:
            sets = judged if policy == "kbv" else [r for r in judged if r.kind is not InputKind.RANDOM]
            if not self.status.ran or not sets or any(policy not in r.policy_passed for r in sets):
                out[policy] = None
            else:
                out[policy] = all(r.policy_passed[policy] for r in sets)
        return out

    @property
    def tolerance_sweep(self) -> dict[str, bool | None]:
        """Sweep key → every judged nominal and D1–D4 set passes allclose at that tolerance."""
        sets = [r for r in self.input_sets if not r.dropped and r.kind is not InputKind.RANDOM]
        out: dict[str, bool | None] = {}
        for key in SWEEP_KEYS:
            if not self.status.ran or not sets or any(key not in r.tolerance_sweep for r in sets):
                out[key] = None
            else:
                out[key] = all(r.tolerance_sweep[key] for r in sets)
        return out


# Problem vetting --------------------------------------------------------------------------------

class VetFlag(str, enum.Enum):
    """Why a problem cannot tell right kernels from wrong ones (``kbv.reference.vetting``)."""

    STOCHASTIC = "stochastic"  #: two reference runs with different RNG state differ (dropout in training mode).
    CONSTANT = "constant-output"  #: the same output for every distribution and seed (degenerate).
    UNDER_TOLERANCE = "under-tolerance"  #: an all-zeros answer passes allclose on every nominal set.
    REFERENCE_FAILS = "reference-fails"  #: the reference raises or is non-finite on every nominal set.


@dataclass(frozen=True)
class VetFinding:
    flag: VetFlag
    reason: str  #: one line, with the numbers behind the finding.

    def line(self) -> str:
        return f"{self.flag.value}: {self.reason}"


@dataclass(frozen=True)
class VetSetResult:
    """The reference on one input set during vetting."""

    name: str
    kind: InputKind
    transform: str
    seed: int
    status: str  #: ``ok``, ``raised``, ``non-finite``, ``outside-domain``.
    detail: str | None = None  #: the exception or the reason, one line.
    zeros_pass: bool | None = None  #: ``allclose(zeros, ref, atol, rtol)`` holds.
    output_rms: float | None = None  #: RMS of the reference outputs (all outputs together).
    baseline_error: float | None = None  #: eager-fp32's normalised error vs the float64 oracle.
    oracle_note: str | None = None  #: why the oracle did not run, when it did not.


@dataclass(frozen=True)
class VettingReport:
    """Everything ``kbv vet`` found about one problem. ``findings`` empty means not flagged."""

    problem: ProblemRef
    device: str
    precision: str
    atol: float
    rtol: float
    seeds: int  #: seeds per distribution.
    findings: tuple[VetFinding, ...] = ()
    sets: tuple[VetSetResult, ...] = ()
    notes: tuple[str, ...] = ()  #: informational (dropped distributions, bitwise irreproducibility...).
    environment: Environment | None = None
    schema_version: int = SCHEMA_VERSION

    @property
    def flagged(self) -> bool:
        return bool(self.findings)

    @property
    def reasons(self) -> tuple[str, ...]:
        """One ``flag: reason`` line per finding (what an exclusion stores)."""
        return tuple(f.line() for f in self.findings)


def vetting_from_dict(data: Mapping[str, Any]) -> VettingReport:
    """Rebuild a :class:`VettingReport` from :func:`to_dict` output."""
    d = _decode_floats(dict(data))
    if d.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise ValueError(f"unsupported vetting schema {d.get('schema_version')}")
    sets = []
    for r in d.get("sets", []):
        r = dict(r)
        r["kind"] = InputKind(r["kind"])
        sets.append(_build(VetSetResult, r))
    env = d.get("environment")
    return VettingReport(
        problem=_build(ProblemRef, d["problem"]), device=d["device"], precision=d["precision"],
        atol=d["atol"], rtol=d["rtol"], seeds=d["seeds"],
        findings=tuple(VetFinding(VetFlag(f["flag"]), f["reason"]) for f in d.get("findings", [])),
        sets=tuple(sets), notes=tuple(d.get("notes", ())),
        environment=_build(Environment, env) if env else None,
    )


# JSON ----------------------------------------------------------------------------------------

def _encode(obj: Any) -> Any:
    if isinstance(obj, float):
        if math.isnan(obj):
            return "NaN"
        if math.isinf(obj):
            return "Infinity" if obj > 0 else "-Infinity"
        return obj
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Measurement):
        d = {f.name: _encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        d.update(_encode(obj.summary()))  # median_ms, iqr_ms, trials, ... next to the raw samples
        return d
    if dataclasses.is_dataclass(obj):
        return {f.name: _encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): _encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v) for v in obj]
    if isinstance(obj, (np.floating,)):
        return _encode(float(obj))
    if isinstance(obj, (np.integer,)):
        return int(obj)
    return obj


def _decode_float(v: Any) -> Any:
    if v == "NaN":
        return math.nan
    if v == "Infinity":
        return math.inf
    if v == "-Infinity":
        return -math.inf
    return v


def _decode_floats(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _decode_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode_floats(v) for v in obj]
    return _decode_float(obj)


def to_dict(record: Any) -> dict[str, Any]:
    """A JSON-ready dict of any record (non-finite floats as strings)."""
    out = _encode(record)
    if isinstance(record, Verdict):
        out["derived"] = {
            "nominal_passed": record.nominal_passed,
            "hidden_passed": record.hidden_passed,
            "correct": record.correct,
            "policy_verdicts": record.policy_verdicts,
            "tolerance_sweep": record.tolerance_sweep,
            "taxonomy": list(record.taxonomy),
        }
    return out


def to_json(record: Any, indent: int | None = 2) -> str:
    return json.dumps(to_dict(record), indent=indent, allow_nan=False, sort_keys=False)


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def verdict_from_dict(data: Mapping[str, Any]) -> Verdict:
    """Rebuild a :class:`Verdict` from :func:`to_dict` output.

    Raises:
        ValueError: the data contradicts the status (see :class:`Verdict`) or the schema differs.
    """
    d = _decode_floats(dict(data))
    if d.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise ValueError(f"unsupported verdict schema {d.get('schema_version')}")
    cfg = dict(d["config"])
    cfg["hidden"] = tuple(cfg.get("hidden", ()))
    cfg["baselines"] = tuple(cfg.get("baselines", ()))
    if "distributions" in cfg:
        cfg["distributions"] = tuple(cfg["distributions"])
    else:  # written before randomised distributions existed: none were run
        cfg["distributions"] = ()
    timing = {}
    for k, m in d.get("timing", {}).items():
        m = dict(m)
        m.pop("stats", None)
        m["times_ms"] = tuple(m["times_ms"])
        timing[k] = _build(Measurement, m)
    sets = []
    for r in d.get("input_sets", []):
        r = dict(r)
        r["kind"] = InputKind(r["kind"])
        sets.append(_build(InputSetResult, r))
    return Verdict(
        status=Status(d["status"]),
        message=d["message"],
        problem=_build(ProblemRef, d["problem"]),
        candidate=_build(CandidateRef, d["candidate"]),
        config=_build(EvalConfig, cfg),
        environment=_build(Environment, d["environment"]),
        input_sets=tuple(sets),
        timing=timing,
        speedup=dict(d.get("speedup", {})),
        memory={k: _build(MemoryMeasurement, v) for k, v in d.get("memory", {}).items()},
        memory_efficiency=d.get("memory_efficiency"),
        unverified_speedup=dict(d.get("unverified_speedup", {})),
        weight_mismatches=tuple(d.get("weight_mismatches", ())),
        flag_changes=tuple(d.get("flag_changes", ())),
        evidence=d.get("evidence", {}),
        phase_seconds=d.get("phase_seconds", {}),
        problem_flags=tuple(d.get("problem_flags", ())),
        findings=tuple(Finding(f["check"], tuple(f["taxonomy"]), Severity(f["severity"]), f["detail"], f.get("line"))
                       for f in d.get("findings", ())),
    )


def verdict_from_json(text: str) -> Verdict:
    return verdict_from_dict(json.loads(text))
