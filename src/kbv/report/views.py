"""What the HTML report shows, as plain values for its Jinja2 template (:mod:`kbv.report.html`
renders them): the leaderboard's cells, the problem × run matrix, and each sample's view (status,
speedups with intervals, findings, the candidate's source with the scan's marks, clipped message
and evidence). Text that comes from a candidate is passed on as is; the template escapes it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from kbv.batch.jobs import problem_key
from kbv.batch.metrics import BatchMetrics, LevelMetrics
from kbv.batch.results import SPEEDUP_COLUMNS
from kbv.batch.scoring import speedup_interval, speedup_noisy
from kbv.model.records import Status, Verdict, to_dict
from kbv.report.export import CLIPPED_HEAD, clipped_cell, fmt_pct, fmt_ratio, speed_cell

#: Longest message / evidence text shown per sample (characters); the rest is cut with a note.
MAX_TEXT_CHARS = 20_000
#: Largest candidate source shown on a sample's page (bytes); a bigger file is named, not shown.
MAX_SOURCE_BYTES = 256_000
#: fast_p thresholds shown in the HTML tables (every threshold is in the CSV).
SHOWN_P: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)
#: a problem × run cell shows the best status a run reached for the problem, in this order.
_CELL_ORDER = (Status.PASS, Status.SHORTCUT, Status.HACK, Status.INCORRECT, Status.RUNTIME_ERROR,
               Status.TIMEOUT, Status.CRASH, Status.COMPILE_ERROR, Status.EVAL_ERROR)


def anchor(key: str) -> str:
    """The HTML id of a problem's section: ``p-`` and the key with every other character as ``-``."""
    return "p-" + re.sub(r"[^A-Za-z0-9_-]", "-", key)


def _clip(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return text[:MAX_TEXT_CHARS] + f"\n… [{len(text) - MAX_TEXT_CHARS} more characters cut]"


def _num(x: float | None) -> str:
    """Sort key for the leaderboard's ``data-v`` (empty when undefined)."""
    return "" if x is None else repr(float(x))


def comparison_rows(comparisons) -> list[dict[str, Any]]:
    """The paired comparisons of runs (:func:`kbv.batch.paired.paired_comparisons`) as table rows."""
    return [{"a": c.run_a or "(unnamed)", "b": c.run_b or "(unnamed)", "common": c.common, "paired": c.paired,
             "only_a": c.only_a, "only_b": c.only_b, "ratio": fmt_ratio(c.geomean_ratio),
             "interval": _interval(c.interval), "reading": c.reading} for c in comparisons]


def _statuses(m: LevelMetrics) -> str:
    return " · ".join(f"{s} {n}" for s, n in m.status_counts.items() if n and s != Status.EVAL_ERROR.value) or "–"


def leaderboard(metrics: BatchMetrics) -> tuple[list[tuple[str, int]], list[str], list[list[tuple[str, str]]]]:
    """Column groups ``[(title, span)]``, column heads and rows of ``(text, sort key)`` cells."""
    k_cols = sorted({k for m in metrics.rows() for k in m.pass_at_k})
    groups = [("", 2), ("Correctness", 3), (f"Speed vs {metrics.baseline}", 2 + len(SHOWN_P)), ("Memory", 2),
              ("pass@k", len(k_cols)), ("Verdicts", 3)]
    head = ["Run", "Scope", "Problems", "Samples", "Correct", "Correct speedup", CLIPPED_HEAD,
            *(f"fast_{p:g}" for p in SHOWN_P), "Mem. eff.", "Mem-efficient", *(f"pass@{k}" for k in k_cols),
            "Shortcut speedup", "Statuses", "EVAL_ERROR"]
    rows = []
    for m in metrics.rows():
        problems = str(m.problems) + (f" (+{len(m.eval_error_problems)} unjudged)" if m.eval_error_problems else "")
        rows.append([
            (m.run or "(unnamed)", m.run), (m.label, str(m.level if m.level is not None else -1)),
            (problems, str(m.problems)), (str(m.samples), str(m.samples)),
            (f"{fmt_pct(m.correct_frac)} ({m.solved})", _num(m.correct_frac)),
            (speed_cell(m.correct_speedup, m.speedup_problems, m.problems, m.noisy_problems), _num(m.correct_speedup)),
            (clipped_cell(m.all_problems_speedup, m.solved), _num(m.all_problems_speedup)),
            *((fmt_pct(m.fast_p.get(p)), _num(m.fast_p.get(p))) for p in SHOWN_P),
            (fmt_ratio(m.memory_efficiency), _num(m.memory_efficiency)),
            (fmt_pct(m.memory_efficient_frac), _num(m.memory_efficient_frac)),
            *((fmt_pct(m.pass_at_k.get(k)), _num(m.pass_at_k.get(k))) for k in k_cols),
            (f"{fmt_ratio(m.shortcut_speedup)} ({m.shortcut_problems})", _num(m.shortcut_speedup)),
            (_statuses(m), str(m.status_counts.get("PASS", 0))),
            (str(m.eval_error_samples), str(m.eval_error_samples)),
        ])
    return [g for g in groups if g[1]], head, rows


def mean_std(pair: tuple[float, float] | None, pct: bool = False) -> str:
    """``mean ± std`` of a per-sample aggregate."""
    if pair is None:
        return "–"
    mean, std = pair
    return f"{100 * mean:.1f}% ± {100 * std:.1f}" if pct else f"{mean:.2f}× ± {std:.2f}"


def _interval(iv: tuple[float, float] | None) -> str:
    return "" if iv is None else f"[{iv[0]:.2f}–{iv[1]:.2f}]"


def _speedup_view(v: Verdict, label: str) -> dict[str, Any]:
    """One speedup of a sample with its interval and noise mark (unverified ones in parentheses)."""
    value = v.speedup.get(label)
    unverified = value is None and label in v.unverified_speedup
    value = value if value is not None else v.unverified_speedup.get(label)
    if value is None:
        return {"text": "–", "interval": "", "noisy": False, "unverified": False}
    return {"text": fmt_ratio(value), "interval": _interval(speedup_interval(v, label)),
            "noisy": speedup_noisy(v, label), "unverified": unverified}


def _source(v: Verdict) -> dict[str, Any]:
    """The candidate's source, as lines with the static-scan findings that name them; only when the
    file on disk is still the one verified (same SHA-256). Read as text, never imported."""
    marks: dict[int, list[str]] = defaultdict(list)
    for f in v.findings:
        if f.line is not None:
            marks[f.line].append(f"{f.severity.value} {f.check}: {f.detail}")
    out: dict[str, Any] = {"lines": [], "note": "", "marked": sorted(marks)}
    path = Path(v.candidate.path)
    try:
        data = path.read_bytes() if path.is_file() and path.stat().st_size <= MAX_SOURCE_BYTES else None
    except OSError:
        data = None
    if data is None:
        out["note"] = (f"source not shown: {path} is missing, unreadable or over {MAX_SOURCE_BYTES:,} bytes")
        return out
    if hashlib.sha256(data).hexdigest() != v.candidate.sha256:
        out["note"] = f"source not shown: {path} changed since it was verified (SHA-256 differs)"
        return out
    text = data.decode("utf-8", errors="replace")
    out["lines"] = [(i, line, marks.get(i, [])) for i, line in enumerate(text.splitlines(), 1)]
    return out


def workload_rows(v: Verdict) -> list[dict[str, Any]]:
    """A verdict's declared workloads (:mod:`kbv.reference.workloads`), one row each: name, sizes,
    status and speedup per :data:`SPEEDUP_COLUMNS` (``–`` where not credited); empty for a problem
    verified at its own sizes only."""
    rows = []
    for w in v.evidence.get("workloads") or ():
        if not isinstance(w, dict):
            continue
        speed = w.get("speedup") or {}
        rows.append({"name": str(w.get("name")), "status": str(w.get("status")),
                     "sizes": ", ".join(f"{k}={val}" for k, val in (w.get("sizes") or {}).items()),
                     "speedups": [fmt_ratio(speed[b]) if isinstance(speed.get(b), (int, float)) else "–"
                                  for b in SPEEDUP_COLUMNS]})
    return rows


def _sample_view(v: Verdict, audits: dict | None = None) -> dict[str, Any]:
    from kbv.generate.audit_store import verdict_key

    row = (audits or {}).get(verdict_key(v))
    return {
        "audit": row.display if row is not None else "",
        "audit_review": bool(row is not None and row.needs_review),
        "run": v.candidate.run or "(unnamed)",
        "sample_id": "–" if v.candidate.sample_id is None else v.candidate.sample_id,
        "status": v.status.value,
        "speedups": [_speedup_view(v, b) for b in SPEEDUP_COLUMNS],
        "findings": [f.describe() + (f" (line {f.line})" if f.line is not None else "") for f in v.findings],
        "source": _source(v),
        "unverified": ", ".join(f"{b} {fmt_ratio(s)}" for b, s in v.unverified_speedup.items()),
        "memory_efficiency": fmt_ratio(v.memory_efficiency),
        "message": _clip(v.message),
        "candidate_path": v.candidate.path,
        "backend": v.candidate.backend,
        "input_sets": v.input_sets,
        "workloads": workload_rows(v),
        "timing": [(label, m.summary()) for label, m in v.timing.items()],
        "memory": list(v.memory.values()),
        "flag_changes": v.flag_changes,
        "weight_mismatches": v.weight_mismatches,
        "evidence": _clip(json.dumps(to_dict(v.evidence), indent=2, allow_nan=False)) if v.evidence else "",
    }


def problem_views(verdicts: list[Verdict], exclusions: dict[str, tuple[str, ...]],
                  audits: dict | None = None) -> list[dict[str, Any]]:
    """One section per problem (by level, id, key): its exclusion reasons and its samples' views."""
    groups: dict[str, list[Verdict]] = defaultdict(list)
    refs = {}
    for v in verdicts:
        k = problem_key(v.problem)
        groups[k].append(v)
        refs[k] = v.problem
    order = sorted(groups, key=lambda k: (refs[k].level or 0, refs[k].problem_id or 0, k))
    return [{"key": k, "anchor": anchor(k), "path": refs[k].path, "excluded": exclusions.get(k, ()),
             "samples": [_sample_view(v, audits) for v in groups[k]]} for k in order]


def status_matrix(metrics: BatchMetrics, verdicts: list[Verdict]) -> tuple[list[str], list[dict[str, Any]]]:
    """Problem × run matrix: per cell the best status the run reached and, when solved, the best
    correct speedup with its interval and noise mark."""
    runs = [r.run for r in metrics.runs]
    by: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
    for v in verdicts:
        by[(problem_key(v.problem), v.candidate.run or "")].append(v)
    outcomes = {(o.problem_key, r.run): o for r in metrics.runs for o in r.overall.outcomes}
    keys = [k for lv in sorted(metrics.problems) for k in metrics.problems[lv]]
    rows = []
    for k in keys:
        cells = []
        for run in runs:
            vs = by.get((k, run), [])
            statuses = {v.status for v in vs}
            best = next((s for s in _CELL_ORDER if s in statuses), None)
            o = outcomes.get((k, run))
            speed = o.best_speedup if o is not None else None
            cells.append({"status": best.value if best else "", "n": len(vs),
                          "speedup": fmt_ratio(speed) if speed is not None else "",
                          "interval": _interval(o.best_speedup_interval) if o is not None else "",
                          "noisy": bool(o and o.best_noisy), "sort": _num(speed)})
        rows.append({"key": k, "anchor": anchor(k), "cells": cells})
    return [r or "(unnamed)" for r in runs], rows


def lacking_hidden_tests(verdicts: Iterable[Verdict]) -> list[str]:
    """One line per verdict whose hidden test file failed (``evidence["hidden_tests_error"]``): the
    run, problem and sample, and what failed."""
    return [f"{v.candidate.run or '(unnamed)'} {problem_key(v.problem)} sample {v.candidate.sample_id}: "
            f"{v.evidence['hidden_tests_error']}" for v in verdicts if v.evidence.get("hidden_tests_error")]
