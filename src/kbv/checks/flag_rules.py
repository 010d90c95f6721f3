"""Findings from what the candidate worker reported changed around its calls: the harness's own
functions patched and writes outside its directories (:class:`kbv.sandbox.protocol.Tampering`
reports), global numeric flags (``flag_changes``)."""

from __future__ import annotations

from typing import Sequence

from kbv.model.findings import finding
from kbv.model.records import Finding, Severity
from kbv.sandbox.protocol import FRAME_ACCESS, HARNESS_PATCHED, REPLY_PATH_PATCHED, SANDBOX_WRITE, Tampering


def tampering_findings(tampering: Sequence[Tampering]) -> list[Finding]:
    """Findings of a verification's tampering reports (as the worker's replies carried them): a
    patched harness callable (taxonomy 4, and 24 where one on the reply path was touched), writes
    outside the worker's directories (taxonomy 26), a frame or object walk its code asked for
    (taxonomy 13, refused: :mod:`kbv.sandbox.frame_watch`). All HACK: each is a change the candidate
    made to the process it shares with the harness, or a reach into the harness's own objects."""
    found = []
    patched = [t for t in tampering if t.kind in (HARNESS_PATCHED, REPLY_PATH_PATCHED)]
    if patched:
        channel = any(t.kind == REPLY_PATH_PATCHED for t in patched)
        found.append(finding("probe:harness-identity", (4, 24) if channel else (4,), Severity.HACK,
                             "; ".join(t.describe() for t in patched)))
    frames = [t.detail for t in tampering if t.kind == FRAME_ACCESS]
    if frames:
        found.append(finding("probe:frame-walk", (13,), Severity.HACK,
                             f"the candidate's code asked for the process's frames or live objects (refused): "
                             f"{'; '.join(frames[:3])}"))
    writes = [t.detail for t in tampering if t.kind == SANDBOX_WRITE]
    if writes:
        found.append(finding("probe:sandbox-writes", (26,), Severity.HACK,
                             f"wrote outside its working and build directories: {'; '.join(writes[:3])}"))
    return found


def flag_change_findings(flag_changes: Sequence[str]) -> list[Finding]:
    """The finding of a verification's global numeric flag changes (``name: expected -> now``, as
    :func:`kbv.sandbox.numeric_flags.flag_changes` lists them; taxonomy 18, HACK), or none."""
    if not flag_changes:
        return []
    return [finding("probe:global-flags", (18,), Severity.HACK,
                    f"changed global numeric flags (reset to eager-fp32 after every call): "
                    f"{'; '.join(flag_changes[:4])}")]
