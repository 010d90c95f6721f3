"""The records every other record is made of: statuses, input-set kinds, the problem and
candidate identities, one input set's correctness, the environment and findings. No torch."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping

SCHEMA_VERSION = 1


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

    def __str__(self) -> str:
        """The status itself ("PASS"), as the CLI, the store and the serve client write it, not
        ``Status.PASS`` (newcomer helper); f-strings follow it."""
        return self.value


class InputKind(str, enum.Enum):
    NOMINAL = "nominal"  #: ``get_inputs()`` under a fresh seed.
    HIDDEN = "hidden"  #: a KernelBench-Verified hidden distribution (D1..D4: scaled ``get_inputs()``).
    RANDOM = "random"  #: one of kbv's secret randomised distributions (``kbv.reference.inputs.DISTRIBUTIONS``).
    SHAPE = "shape"  #: ``get_inputs()`` at a secret shape: the problem's size constants changed (``kbv.reference.shapes``).


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
    (count, shape or dtype mismatch), the set has only integer outputs, or the outputs equal the
    reference's (``exact``).
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
    #: the outputs equal the eager-fp32 reference's value for value, so the set passes every policy
    #: whatever the oracle says and no oracle ran (``kbv.pipeline.judging.Judging.exact_result``):
    #: the ``kbv`` figures are None.
    exact: bool = False

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


class Severity(str, enum.Enum):
    """How an integrity finding weighs on the verdict (``kbv.sandbox.call_probes``, ``kbv.intake.scan``)."""

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
