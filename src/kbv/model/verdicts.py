"""The outcome of one verification (:class:`Verdict`) and its JSON round trip. No torch."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from kbv.model.base import (SCHEMA_VERSION, CandidateRef, Environment, Finding, InputKind, InputSetResult, ProblemRef,
                             Severity, Status)
from kbv.model.codec import _build, _decode_floats, _encode
from kbv.model.config import POLICIES, SWEEP_KEYS, EvalConfig
from kbv.model.measurements import Measurement, MemoryMeasurement

#: checks whose finding makes a verdict INCORRECT with every input set passed: a memory access
#: compute-sanitizer memcheck saw outside what the kernel owns (kbv.pipeline.diagnostics); a tensor
#: of a dtype kbv does not judge, sent outside a judged set (kbv.checks.worker_calls.unjudged_dtype).
WRONG_WITHOUT_A_FAILED_SET = frozenset({"sanitize:memcheck", "probe:output-dtype"})


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying one candidate against one problem.

    Construction fails when the fields contradict the status: a PASS has every input set passed
    and a candidate timing; an INCORRECT has a failed input set (or a finding of
    :data:`WRONG_WITHOUT_A_FAILED_SET`); only a PASS or SHORTCUT carries
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
    #: integrity findings (static scan and runtime probes, ``kbv.sandbox.call_probes``), most severe first.
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
        if (s is Status.INCORRECT and not any(r.passed is False for r in judged)
                and not any(f.check in WRONG_WITHOUT_A_FAILED_SET for f in self.findings)):
            raise ValueError("INCORRECT needs a failed input set, a memory error compute-sanitizer saw or a tensor "
                             "of a dtype kbv does not judge")
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
    def wrong_whatever_its_outputs(self) -> bool:
        """A finding of :data:`WRONG_WITHOUT_A_FAILED_SET` (a memory access outside what the kernel
        owns, a tensor of a dtype kbv does not judge): wrong under the ``kbv`` policy whatever its
        sets' outputs were."""
        return any(f.check in WRONG_WITHOUT_A_FAILED_SET for f in self.findings)

    @property
    def policy_verdicts(self) -> dict[str, bool | None]:
        """Policy → the candidate's correctness under it, from the per-set verdicts.

        ``kbv`` covers every judged set; ``kbv-compat`` covers the nominal and D1–D4 sets (the
        KernelBench-Verified protocol). A failed set without that policy's verdict and with no
        outputs judged (the candidate raised there, as at a secret shape) fails it. None when the candidate produced no judged
        outputs, or when a set that did not fail lacks that policy's verdict and no set fails it.
        ``kbv`` is False where :attr:`wrong_whatever_its_outputs` (``kbv-compat``, the paper's
        protocol, runs no sanitizer nor timed re-check and keeps its sets' verdict).
        """
        judged = [r for r in self.input_sets if not r.dropped]
        out: dict[str, bool | None] = {}
        for policy in POLICIES:
            sets = judged if policy == "kbv" else [r for r in judged if r.kind not in (InputKind.RANDOM, InputKind.SHAPE)]
            if not self.status.ran or not sets:
                out[policy] = None
                continue
            # a failed set with no outputs judged (the candidate raised there) fails every policy
            seen = [r.policy_passed.get(policy, False if r.passed is False and r.max_abs_error is None else None)
                    for r in sets]
            out[policy] = False if False in seen else (None if None in seen else True)
        if out.get("kbv") is not None and self.wrong_whatever_its_outputs:
            out["kbv"] = False
        return out

    @property
    def tolerance_sweep(self) -> dict[str, bool | None]:
        """Sweep key → every judged nominal and D1–D4 set passes allclose at that tolerance."""
        sets = [r for r in self.input_sets if not r.dropped and r.kind not in (InputKind.RANDOM, InputKind.SHAPE)]
        out: dict[str, bool | None] = {}
        for key in SWEEP_KEYS:
            if not self.status.ran or not sets or any(key not in r.tolerance_sweep for r in sets):
                out[key] = None
            else:
                out[key] = all(r.tolerance_sweep[key] for r in sets)
        return out


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


def config_from_dict(data: Mapping[str, Any]) -> EvalConfig:
    """Rebuild an :class:`EvalConfig` from :func:`to_dict` output (lists back to tuples; a config
    written before randomised distributions existed ran none)."""
    cfg = _decode_floats(dict(data))
    cfg["hidden"] = tuple(cfg.get("hidden", ()))
    cfg["baselines"] = tuple(cfg.get("baselines", ()))
    cfg["distributions"] = tuple(cfg.get("distributions", ()))
    cfg["user_set"] = tuple(cfg.get("user_set", ()))
    cfg["sanitize"] = tuple(cfg.get("sanitize", ()))
    return _build(EvalConfig, cfg)


def verdict_from_dict(data: Mapping[str, Any]) -> Verdict:
    """Rebuild a :class:`Verdict` from :func:`to_dict` output.

    Raises:
        ValueError: the data contradicts the status (see :class:`Verdict`) or the schema differs.
    """
    d = _decode_floats(dict(data))
    if d.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise ValueError(f"unsupported verdict schema {d.get('schema_version')}")
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
        config=config_from_dict(d["config"]),
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
