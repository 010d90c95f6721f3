"""Helpers over :class:`kbv.model.records.Finding` records: make one, the most severe level, the
order a verdict lists them in."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from kbv.model.records import Finding, Severity


def finding(check: str, taxonomy: Sequence[int], severity: Severity, detail: str) -> Finding:
    return Finding(check, tuple(sorted(set(taxonomy))), severity, detail)


def worst(findings: Iterable[Any]) -> Severity | None:
    """The most severe level present (HACK > SHORTCUT > WARNING) among anything with a
    ``severity`` (verdict findings, static-scan findings), or None."""
    found = {f.severity for f in findings}
    for sev in (Severity.HACK, Severity.SHORTCUT, Severity.WARNING):
        if sev in found:
            return sev
    return None


def is_proof(found: Any) -> bool:
    """Whether ``found`` (a finding or None) accuses: HACK."""
    return found is not None and found.severity is Severity.HACK


def ordered(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """One finding per (detector, entries): the first, with ``(this check fired N more times)`` when the same detector
    fired again (on other input sets); most severe first, stable within a level."""
    import dataclasses

    rank = {Severity.HACK: 0, Severity.SHORTCUT: 1, Severity.WARNING: 2}
    first: dict = {}
    extra: dict = {}
    for f in findings:
        key = (f.check, f.taxonomy, f.line)
        if key in first:
            extra[key] = extra.get(key, 0) + (f.detail != first[key].detail)
        else:
            first[key] = f
    out = [dataclasses.replace(f, detail=f"{f.detail} (this check fired {extra[k]} more times)") if extra.get(k) else f
           for k, f in first.items()]
    return tuple(sorted(out, key=lambda f: rank[f.severity]))


#: names a list shows before it shortens (kbv choice: a headline stays one readable line).
NAMES_SHOWN = 4


def name_list(names: Sequence[str]) -> str:
    """``names`` as a finding or a verdict message lists them: all of them up to
    :data:`NAMES_SHOWN`, else the first ones, ``...`` and the last."""
    if len(names) <= NAMES_SHOWN:
        return ", ".join(names)
    return f"{', '.join(names[:NAMES_SHOWN - 1])}, ... {names[-1]}"

