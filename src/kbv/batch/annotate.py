"""What a batch adds to each stored verdict: the 95 % interval of every speedup and the flags of
every baseline it is against."""

from __future__ import annotations

import dataclasses

from kbv.model.records import Verdict


def speedup_intervals(verdict: Verdict) -> Verdict:
    """Record in a timed verdict's evidence (``speedup_interval_95``: ``{baseline: [lo, hi]}``, ×)
    the 95 % percentile-bootstrap interval of each speedup measured side by side with the
    candidate (:func:`kbv.batch.metrics.speedup_interval`, the interval the report shows), so each stored
    record carries the interval of the figure it quotes."""
    from kbv.batch.metrics import speedup_interval

    if not verdict.speedup or "speedup_interval_95" in verdict.evidence:
        return verdict
    ci = {}
    for label in verdict.speedup:
        iv = speedup_interval(verdict, label)
        if iv is not None:
            ci[label] = [round(iv[0], 4), round(iv[1], 4)]
    if not ci:
        return verdict
    return dataclasses.replace(verdict, evidence={**verdict.evidence, "speedup_interval_95": ci})


def name_baselines(verdict: Verdict) -> Verdict:
    """Record in a timed verdict's evidence (``baselines``) the flags and the description of every
    baseline its speedups are against (:func:`kbv.sandbox.numeric_flags.baseline_flags`), so each record says
    which fp32 baseline it used (kbv's strict eager-fp32 or the papers' eager-fp32-cudnn-tf32)."""
    from kbv.sandbox.numeric_flags import baseline_flags

    if not verdict.timing or "baselines" in verdict.evidence:
        return verdict
    labels = [lb for lb in verdict.timing if lb != "candidate"]
    labels += [lb for lb in (*verdict.speedup, *verdict.unverified_speedup) if lb not in labels]
    return dataclasses.replace(verdict, evidence={**verdict.evidence, "baselines": baseline_flags(labels)})
