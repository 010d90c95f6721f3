"""Typed records: the data model every kbv module builds around (this module gathers them).

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

from kbv.model.base import (SCHEMA_VERSION, TAXONOMY, CandidateRef, Environment, Finding, InputKind,
                            InputSetResult, ProblemRef, Severity, Status)
from kbv.model.config import DEFAULT_DISTRIBUTIONS, POLICIES, SWEEP_KEYS, EvalConfig
from kbv.model.measurements import NOISY_IQR_FRACTION, Measurement, MemoryMeasurement
from kbv.model.verdicts import Verdict, to_dict, to_json, verdict_from_dict, verdict_from_json
from kbv.model.vetrecords import VetFinding, VetFlag, VetSetResult, VettingReport, vetting_from_dict

__all__ = [
    "SCHEMA_VERSION", "TAXONOMY", "CandidateRef", "Environment", "Finding", "InputKind", "InputSetResult",
    "ProblemRef", "Severity", "Status", "DEFAULT_DISTRIBUTIONS", "POLICIES", "SWEEP_KEYS", "EvalConfig",
    "NOISY_IQR_FRACTION", "Measurement", "MemoryMeasurement", "Verdict", "to_dict", "to_json",
    "verdict_from_dict", "verdict_from_json", "VetFinding", "VetFlag", "VetSetResult", "VettingReport",
    "vetting_from_dict",
]
