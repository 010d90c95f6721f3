"""What ``kbv vet`` found about one problem (:class:`VettingReport`). No torch."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping

from kbv.model.base import SCHEMA_VERSION, Environment, InputKind, ProblemRef
from kbv.model.codec import _build, _decode_floats


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
