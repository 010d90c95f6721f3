"""Findings from what the candidate worker reported changed around its calls: the harness's own
functions patched, writes outside its directories, global numeric flags."""

from __future__ import annotations

from typing import Sequence

from kbv.model.findings import finding
from kbv.model.records import Finding, Severity


def flag_change_findings(flag_changes: Sequence[str]) -> list[Finding]:
    """Findings of a verification's ``flag_changes`` (as the worker's replies carried them):
    ``harness patched ...`` (taxonomy 4, and 24 where the reply channel was touched), ``sandbox: ...``
    (taxonomy 26), any other entry a global numeric flag (taxonomy 18). All HACK: each is a change
    the candidate made to the process it shares with the harness."""
    found = []
    patched = [c for c in flag_changes if c.startswith("harness patched")]
    if patched:
        channel = any(k in c for c in patched for k in ("protocol", "Connection", "ForkingPickler"))
        found.append(finding("probe:harness-identity", (4, 24) if channel else (4,), Severity.HACK,
                                "; ".join(patched)))
    writes = [c[len("sandbox: "):] for c in flag_changes if c.startswith("sandbox: ")]
    if writes:
        found.append(finding("probe:sandbox-writes", (26,), Severity.HACK,
                                f"wrote outside its working and build directories: {'; '.join(writes[:3])}"))
    flags = [c for c in flag_changes if not c.startswith(("harness patched", "sandbox: "))]
    if flags:
        found.append(finding("probe:global-flags", (18,), Severity.HACK,
                                f"changed global numeric flags (reset to eager-fp32 after every call): "
                                f"{'; '.join(flags[:4])}"))
    return found
