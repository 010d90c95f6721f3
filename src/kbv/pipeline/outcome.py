"""How a verification's stages ended: the typed outcome each stage reports, which only
:mod:`kbv.pipeline.verdict` turns into a :class:`kbv.model.records.Status` (with the findings)."""

from __future__ import annotations

import enum
from typing import Any

from kbv.model.findings import NAMES_SHOWN, name_list


class Outcome(enum.Enum):
    """What ended the stages (or that they all ran). The status each gets is
    :data:`kbv.pipeline.verdict.STATUS_OF`'s."""

    CORRECT = "correct"  #: every stage ran and every judged input set passed.
    WRONG = "wrong"  #: every stage ran; some judged input set failed.
    BUILD_RAISED = "build-raised"  #: building ModelNew raised in the candidate worker.
    CALL_RAISED = "call-raised"  #: a forward (or another request) raised in the candidate worker.
    BAD_REPLY = "bad-reply"  #: the worker answered off the protocol (a reply, an output or layout that is not kbv's).
    TIMED_OUT = "timed-out"  #: the worker did not answer within the call's timeout.
    WORKER_DIED = "worker-died"  #: the worker exited before replying.
    KBV_FAILED = "kbv-failed"  #: kbv's own failure (its memory, the problem does not fit): never the candidate's.


class Stop(Exception):
    """Ends the pipeline early with an outcome, a message and evidence for the verdict."""

    def __init__(self, outcome: Outcome, message: str, **evidence: Any):
        self.outcome = outcome
        self.message = message
        self.evidence = evidence
        super().__init__(message)


def failed_sets_phrase(failed: list[str], judged: int) -> str:
    """``failed`` input-set names as a verdict message says them (:func:`kbv.model.findings.name_list`),
    with how many sets were judged. ``failed`` non-empty; ``judged`` >= ``len(failed)``."""
    if len(failed) == 1:
        return failed[0]
    more = "; evidence.failed_sets lists all" if len(failed) > NAMES_SHOWN else ""
    return f"{len(failed)} of {judged} input sets ({name_list(failed)}{more})"
