"""The typed wire from the orchestrator to the reference worker: one frozen dataclass per job,
sent as strict JSON through the model codec (``{"kind": <name>, <fields>}``) and rebuilt on the
other side by :func:`decode_job`, which refuses an unknown kind, a missing field or one the job
does not have. During a :class:`VerifyJob` with ``ask_next`` the worker asks :class:`AskNext` and
gets :class:`NextCandidate` back. Replies are :class:`kbv.processes.reference.ReferenceReply`."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Union

from kbv.model.records import CandidateRef, EvalConfig, ProblemRef, to_dict
from kbv.model.verdicts import config_from_dict


class JobError(ValueError):
    """A message on the reference worker's wire that is not one of its jobs (one line)."""


@dataclass(frozen=True)
class VerifyJob:
    """Verify ``candidate`` against ``problem`` (the whole pipeline, :func:`kbv.pipeline.run.verify`)."""

    problem: ProblemRef
    candidate: CandidateRef
    config: EvalConfig
    hidden_tests: str | None = None  #: a KernelBench-Verified ``<pid>_hidden.py`` file, or None.
    ask_next: bool = False  #: ask for the lane's next candidate once this one is loaded (its worker starts early).
    quiet_dir: str | None = None  #: the build pool's timing-flag directory (:mod:`kbv.processes.quiet`).


@dataclass(frozen=True)
class VetJob:
    """Vet ``problem`` alone over ``vet_seeds`` draws of every distribution (``kbv vet``)."""

    problem: ProblemRef
    config: EvalConfig
    vet_seeds: int


@dataclass(frozen=True)
class BuildPair:
    problem: ProblemRef
    candidate: CandidateRef
    hidden_tests: str | None = None


@dataclass(frozen=True)
class BuildJob:
    """Load every pair's candidate at once, each in its own sandboxed worker (their builds run in
    parallel into the build cache); with ``verify_failures`` and one pair whose load failed, also
    the verdict of that pair (which stops at the same load)."""

    pairs: tuple[BuildPair, ...]
    config: EvalConfig
    verify_failures: bool = False


@dataclass(frozen=True)
class BaselinesJob:
    """Time the reference model alone under each baseline label (``kbv baselines``)."""

    problem: ProblemRef
    config: EvalConfig
    labels: tuple[str, ...]


@dataclass(frozen=True)
class EnvironmentJob:
    """The worker's environment (device, driver, torch): what a baseline cache key needs, nothing run."""


@dataclass(frozen=True)
class AskNext:
    """The worker's question during a :class:`VerifyJob` with ``ask_next``."""


@dataclass(frozen=True)
class NextCandidate:
    """The orchestrator's answer to :class:`AskNext`: the lane's next candidate, or None."""

    candidate: CandidateRef | None = None


Job = Union[VerifyJob, VetJob, BuildJob, BaselinesJob, EnvironmentJob]
#: every message's kind on the wire, and its class.
KINDS: dict[str, type] = {"verify": VerifyJob, "vet": VetJob, "build": BuildJob, "baselines": BaselinesJob,
                          "environment": EnvironmentJob, "ask-next": AskNext, "next": NextCandidate}
_KIND_OF = {cls: name for name, cls in KINDS.items()}


def encode_job(msg: Any) -> bytes:
    """The wire bytes of a job or sub-message (strict JSON, non-finite floats as strings)."""
    kind = _KIND_OF.get(type(msg))
    if kind is None:
        raise JobError(f"not a reference worker message: {type(msg).__name__}")
    return json.dumps({"kind": kind, **to_dict(msg)}, allow_nan=False).encode()


def _fields(cls: type, data: dict, kind: str) -> dict:
    names = {f.name for f in dataclasses.fields(cls)}
    required = {f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    extra, missing = set(data) - names, required - set(data)
    if extra or missing:
        raise JobError(f"{kind} message: {'unknown field ' + repr(sorted(extra)[0]) if extra else ''}"
                       f"{'missing field ' + repr(sorted(missing)[0]) if missing and not extra else ''}")
    return data


def _problem(d: Any) -> ProblemRef:
    return ProblemRef(**_fields(ProblemRef, dict(d), "problem"))


def _candidate(d: Any) -> CandidateRef:
    return CandidateRef(**_fields(CandidateRef, dict(d), "candidate"))


def decode_job(data: bytes) -> Any:
    """The message ``data`` holds: a job, :class:`AskNext` or :class:`NextCandidate`.

    Raises:
        JobError: not JSON, an unknown kind, or fields that are not the kind's.
    """
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise JobError(f"reference worker message is not JSON: {exc}") from None
    if not isinstance(obj, dict) or obj.get("kind") not in KINDS:
        raise JobError(f"unknown reference worker message kind {obj.get('kind') if isinstance(obj, dict) else obj!r}")
    kind = obj.pop("kind")
    cls = KINDS[kind]
    d = _fields(cls, obj, kind)
    try:
        if "problem" in d:
            d["problem"] = _problem(d["problem"])
        if "candidate" in d and d["candidate"] is not None:
            d["candidate"] = _candidate(d["candidate"])
        if "config" in d:
            d["config"] = config_from_dict(d["config"])
        if cls is BuildJob:
            d["pairs"] = tuple(BuildPair(_problem(p["problem"]), _candidate(p["candidate"]), p.get("hidden_tests"))
                               for p in d["pairs"])
        if cls is BaselinesJob:
            d["labels"] = tuple(str(x) for x in d["labels"])
        return cls(**d)
    except (TypeError, KeyError, ValueError) as exc:
        raise JobError(f"{kind} message: {exc}") from None
