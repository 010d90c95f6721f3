"""``kbv report``: every output of a batch, read from its :class:`~kbv.batch.store.Store` only.

* :func:`write_html` — one self-contained HTML file (inline CSS, a few lines of inline JS for
  table sorting, figures as inline PNG data URIs, a Content-Security-Policy that forbids any
  network fetch). Rendered with Jinja2 with autoescaping on: candidate messages and evidence are
  hostile text and only ever reach the page escaped.
* :func:`write_csv`, :func:`write_markdown`, :func:`write_eval_results_json` — the plain exports
  (implemented in :mod:`kbv.report.export`); :func:`write_all` writes everything at once.

Metrics come from :func:`kbv.batch.metrics.compute_metrics` (see its module for the formulas).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import jinja2

from kbv.batch.metrics import (DECOMPOSITION_BASELINES, DECOMPOSITION_CORRECTNESS, DEFAULT_BASELINE,
    BatchMetrics, LevelMetrics, compute_metrics, speedup_interval, speedup_noisy)
from kbv.model.records import POLICIES, Status, Verdict, to_dict
from kbv.report.export import (fmt_pct, fmt_ratio, write_eval_results_json, write_leaderboard_csv,
    write_metrics_markdown, write_samples_csv)
from kbv.report import plots as report_plots
from kbv.batch.results import SPEEDUP_COLUMNS
from kbv.batch.store import Store
from kbv.batch.jobs import problem_key

TEMPLATES = Path(__file__).with_name("templates")
#: Longest message / evidence text shown per sample (characters); the rest is cut with a note.
MAX_TEXT_CHARS = 20_000
#: Largest candidate source shown on a sample's page (bytes); a bigger file is named, not shown.
MAX_SOURCE_BYTES = 256_000
#: fast_p thresholds shown in the HTML tables (every threshold is in the CSV).
SHOWN_P: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)
#: a problem × run cell shows the best status a run reached for the problem, in this order.
_CELL_ORDER = (Status.PASS, Status.SHORTCUT, Status.HACK, Status.INCORRECT, Status.RUNTIME_ERROR,
               Status.TIMEOUT, Status.CRASH, Status.COMPILE_ERROR, Status.EVAL_ERROR)


def load_metrics(store: Store, *, baseline: str = DEFAULT_BASELINE,
                 include_excluded: bool = False) -> BatchMetrics:
    """:func:`kbv.batch.metrics.compute_metrics` over every verdict and exclusion in ``store``.

    Every problem with a registered job counts in its level's denominator, with or without a
    verdict: a batch interrupted before a problem's jobs ran shows that problem as unsolved (and
    the report says the metrics are partial) instead of silently shrinking the level.

    Problems flagged by vetting during evaluation (``Verdict.problem_flags``: stochastic,
    degenerate, under-tolerance, reference failures; issue 3) are excluded like those ``kbv vet
    --store`` recorded, with the flags as reasons.
    """
    from kbv.batch.jobs import problem_key

    verdicts = list(store.verdicts())
    exclusions = {k: list(v) for k, v in store.exclusions().items()}
    for v in verdicts:
        for flag in v.problem_flags:
            reasons = exclusions.setdefault(problem_key(v.problem), [])
            if flag not in reasons:
                reasons.append(flag)
    return compute_metrics(verdicts, exclusions={k: tuple(r) for k, r in exclusions.items()},
                           baseline=baseline, include_excluded=include_excluded, problems=store.problems())


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["ratio"] = fmt_ratio
    env.filters["pct"] = fmt_pct
    env.filters["anchor"] = _anchor
    return env


def _anchor(key: str) -> str:
    return "p-" + re.sub(r"[^A-Za-z0-9_-]", "-", key)


def _clip(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return text[:MAX_TEXT_CHARS] + f"\n… [{len(text) - MAX_TEXT_CHARS} more characters cut]"


def _num(x: float | None) -> str:
    """Sort key for the leaderboard's ``data-v`` (empty when undefined)."""
    return "" if x is None else repr(float(x))


def _speed_cell(value: float | None, n: int, of: int, noisy: int) -> str:
    """A geomean with what it averages over (``n of N``) and how many of those are noisy."""
    if value is None:
        return f"– (0 of {of})"
    return f"{'~' if noisy else ''}{fmt_ratio(value)} ({n} of {of}{f', {noisy} noisy' if noisy else ''})"


def _statuses(m: LevelMetrics) -> str:
    return " · ".join(f"{s} {n}" for s, n in m.status_counts.items() if n and s != Status.EVAL_ERROR.value) or "–"


def _leaderboard(metrics: BatchMetrics) -> tuple[list[tuple[str, int]], list[str], list[list[tuple[str, str]]]]:
    """Column groups ``[(title, span)]``, column heads and rows of ``(text, sort key)`` cells."""
    k_cols = sorted({k for m in metrics.rows() for k in m.pass_at_k})
    groups = [("", 2), ("Correctness", 3), (f"Speed vs {metrics.baseline}", 2 + len(SHOWN_P)), ("Memory", 2),
              ("pass@k", len(k_cols)), ("Verdicts", 3)]
    head = ["Run", "Scope", "Problems", "Samples", "Correct", "Correct speedup", "All-problems speedup",
            *(f"fast_{p:g}" for p in SHOWN_P), "Mem. eff.", "Mem-efficient", *(f"pass@{k}" for k in k_cols),
            "Shortcut speedup", "Statuses", "EVAL_ERROR"]
    rows = []
    for m in metrics.rows():
        problems = str(m.problems) + (f" (+{len(m.eval_error_problems)} unjudged)" if m.eval_error_problems else "")
        rows.append([
            (m.run or "(unnamed)", m.run), (m.label, str(m.level if m.level is not None else -1)),
            (problems, str(m.problems)), (str(m.samples), str(m.samples)),
            (f"{fmt_pct(m.correct_frac)} ({m.solved})", _num(m.correct_frac)),
            (_speed_cell(m.correct_speedup, m.speedup_problems, m.problems, m.noisy_problems), _num(m.correct_speedup)),
            (fmt_ratio(m.all_problems_speedup), _num(m.all_problems_speedup)),
            *((fmt_pct(m.fast_p.get(p)), _num(m.fast_p.get(p))) for p in SHOWN_P),
            (fmt_ratio(m.memory_efficiency), _num(m.memory_efficiency)),
            (fmt_pct(m.memory_efficient_frac), _num(m.memory_efficient_frac)),
            *((fmt_pct(m.pass_at_k.get(k)), _num(m.pass_at_k.get(k))) for k in k_cols),
            (f"{fmt_ratio(m.shortcut_speedup)} ({m.shortcut_problems})", _num(m.shortcut_speedup)),
            (_statuses(m), str(m.status_counts.get("PASS", 0))),
            (str(m.eval_error_samples), str(m.eval_error_samples)),
        ])
    return [g for g in groups if g[1]], head, rows


def _ms(pair: tuple[float, float] | None, pct: bool = False) -> str:
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
        "timing": [(label, m.summary()) for label, m in v.timing.items()],
        "memory": list(v.memory.values()),
        "flag_changes": v.flag_changes,
        "weight_mismatches": v.weight_mismatches,
        "evidence": _clip(json.dumps(to_dict(v.evidence), indent=2, allow_nan=False)) if v.evidence else "",
    }


def _problems(verdicts: list[Verdict], exclusions: dict[str, tuple[str, ...]],
              audits: dict | None = None) -> list[dict[str, Any]]:
    groups: dict[str, list[Verdict]] = defaultdict(list)
    refs = {}
    for v in verdicts:
        k = problem_key(v.problem)
        groups[k].append(v)
        refs[k] = v.problem
    order = sorted(groups, key=lambda k: (refs[k].level or 0, refs[k].problem_id or 0, k))
    return [{"key": k, "anchor": _anchor(k), "path": refs[k].path, "excluded": exclusions.get(k, ()),
             "samples": [_sample_view(v, audits) for v in groups[k]]} for k in order]


def _matrix(metrics: BatchMetrics, verdicts: list[Verdict]) -> tuple[list[str], list[dict[str, Any]]]:
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
        rows.append({"key": k, "anchor": _anchor(k), "cells": cells})
    return [r or "(unnamed)" for r in runs], rows


def _job_problem_key(job) -> str:
    stem = f"{job.problem_id}_{job.problem_name}" if job.problem_id is not None else job.problem_name
    return f"level{job.level}/{stem}" if job.level is not None else stem


def audit_filter(audits: dict, label: str | None) -> Any:
    """A predicate on verdicts for ``kbv report --audit LABEL``: samples whose judges agreed on
    ``LABEL``, or (``review``) whose judges disagree; None keeps every sample."""
    from kbv.generate.audit_store import verdict_key

    if not label:
        return None
    if label == "review":
        return lambda v: (r := audits.get(verdict_key(v))) is not None and r.needs_review
    return lambda v: (r := audits.get(verdict_key(v))) is not None and r.consensus == label


def render_html(store: Store, *, baseline: str = DEFAULT_BASELINE, include_excluded: bool = False,
                title: str = "kbv report", metrics: BatchMetrics | None = None, audit: str | None = None) -> str:
    """The HTML report as a string (see :func:`write_html`). Each sample shows its ``kbv audit``
    label (the judges' shared one, or ``review: a / b``); with ``audit`` the per-problem pages list
    only the samples :func:`audit_filter` keeps (the figures above them stay over every sample)."""
    from kbv.generate.audit_store import labels_by_verdict

    metrics = metrics or load_metrics(store, baseline=baseline, include_excluded=include_excluded)
    verdicts = list(store.verdicts())
    audits = labels_by_verdict(store.path)
    keep = audit_filter(audits, audit)
    exclusions = store.exclusions()
    groups, head, rows = _leaderboard(metrics)
    matrix_runs, matrix = _matrix(metrics, verdicts)
    from kbv.sandbox.flags import DESCRIPTIONS  # imports torch: only where the page is rendered

    labels = sorted({lb for v in verdicts for lb in (*v.speedup, *v.unverified_speedup)},
                    key=lambda lb: list(SPEEDUP_COLUMNS).index(lb) if lb in SPEEDUP_COLUMNS else 99)
    unfinished = store.unfinished_jobs()
    unfinished_excluded = len(unfinished) - unfinished_jobs(store, exclusions)
    combos = [(b, c) for b in DECOMPOSITION_BASELINES for c in DECOMPOSITION_CORRECTNESS]
    levels = sorted(metrics.problems)
    # verdicts decided before anything ran (static vetting) carry the orchestrator's minimal
    # environment, with no device name: they say nothing about the hardware
    envs = sorted({(v.environment.device_name or v.environment.device, v.environment.torch,
                    v.environment.driver or "–") for v in verdicts if v.evidence.get("ran") is not False})
    return _env().get_template("report.html.j2").render(
        title=title,
        generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        store_name=store.path.name, progress=store.progress(), metrics=metrics,
        unfinished=len(unfinished) - unfinished_excluded, unfinished_excluded=unfinished_excluded,
        groups=groups, head=head, rows=rows, combos=combos, shown_p=SHOWN_P, policies=POLICIES,
        matrix_runs=matrix_runs, matrix=matrix, ms=_ms,
        baseline_notes=[(lb, DESCRIPTIONS.get(lb, lb)) for lb in labels],
        hidden_names=sorted({n for r in metrics.runs for n in r.overall.hidden_failures}),
        envs=envs, speedup_labels=list(SPEEDUP_COLUMNS),
        plots={
            "decomposition": report_plots.decomposition_bars(metrics),
            "failures": report_plots.failure_bars(metrics),
            "cdf": report_plots.speedup_cdf(metrics),
            "scatter": [(lv, report_plots.memory_speedup_scatter(metrics, lv)) for lv in levels],
        },
        problems=_problems([v for v in verdicts if keep is None or keep(v)], exclusions, audits),
        audit_filter=audit,
    )


def write_html(store: Store, path: Path | str, **kwargs: Any) -> Path:
    """Write the self-contained HTML report (opens offline; keyword arguments as :func:`render_html`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(store, **kwargs), encoding="utf-8")
    return path


def unfinished_jobs(store: Store, exclusions: Any = None) -> int:
    """Jobs of ``store`` without a verdict yet, less those of problems excluded as broken (they never
    get one: not "partial", just excluded). ``exclusions``: problem keys (default: the store's)."""
    if exclusions is None:
        exclusions = store.exclusions()
    return sum(1 for j in store.unfinished_jobs() if _job_problem_key(j) not in exclusions)


def write_csv(store: Store, path: Path | str, *, baseline: str = DEFAULT_BASELINE,
              include_excluded: bool = False) -> Path:
    """Leaderboard CSV, one row per (run, scope); fractions in [0, 1], speedups as ratios."""
    return write_leaderboard_csv(load_metrics(store, baseline=baseline, include_excluded=include_excluded),
                                 path)


def write_markdown(store: Store, path: Path | str, *, baseline: str = DEFAULT_BASELINE,
                   include_excluded: bool = False, title: str = "kbv report") -> Path:
    """Markdown summary: leaderboard, decomposition, failures per distribution, exclusions."""
    return write_metrics_markdown(load_metrics(store, baseline=baseline, include_excluded=include_excluded),
                                  path, title=title, unfinished=unfinished_jobs(store))


def policy_rows(metrics: BatchMetrics) -> list[dict[str, Any]]:
    """One flat row per (run, scope, policy): :class:`kbv.batch.metrics.PolicyMetrics` with the per-sample
    ``(mean, std)`` pairs as ``<name>_mean`` / ``<name>_std`` (fractions in [0, 1], ratios ×)."""
    rows = []
    for m in metrics.rows():
        for policy, pm in m.policies.items():
            row: dict[str, Any] = {"run": m.run, "scope": m.label, "baseline": m.baseline, "policy": policy}
            for f in dataclasses.fields(pm):
                value = getattr(pm, f.name)
                if f.name == "fast_p":
                    row.update({f"fast_{p:g}_frac": v for p, v in value.items()})
                elif f.name not in ("policy", "per_sample"):
                    row[f.name] = value
            ps = pm.per_sample
            if ps is not None:
                row["per_sample_indices"] = ps.indices
                for name in ("compiled_rate", "correctness_rate", "correct_speedup", "all_problems_speedup",
                             "memory_ratio", "memory_efficient_frac"):
                    pair = getattr(ps, name)
                    row[f"per_sample_{name}_mean"], row[f"per_sample_{name}_std"] = pair or (None, None)
                for p, (mean, std) in ps.fast_p.items():
                    row[f"per_sample_fast_{p:g}_mean"], row[f"per_sample_fast_{p:g}_std"] = mean, std
            rows.append(row)
    return rows


def write_policy_csv(metrics: BatchMetrics, path: Path | str) -> Path:
    """``policies.csv``: :func:`policy_rows`, the paper's aggregates under both policies."""
    rows = policy_rows(metrics)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(k for r in rows for k in r)) or ["run", "scope", "baseline", "policy"]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if v is None else v for k, v in r.items()})
    return path


def write_all(store: Store, out_dir: Path | str, *, baseline: str = DEFAULT_BASELINE,
              include_excluded: bool = False, title: str = "kbv report",
              audit: str | None = None) -> dict[str, Path | list[Path]]:
    """Every output under ``out_dir``: ``report.html``, ``leaderboard.csv``, ``policies.csv``, ``samples.csv``,
    ``report.md`` and ``eval_results/<run>/level<L>/eval_results{,_hidden}.json``. ``audit``: see
    :func:`render_html`."""
    out = Path(out_dir)
    metrics = load_metrics(store, baseline=baseline, include_excluded=include_excluded)
    return {
        "html": write_html(store, out / "report.html", metrics=metrics, title=title, audit=audit),
        "leaderboard_csv": write_leaderboard_csv(metrics, out / "leaderboard.csv"),
        "policies_csv": write_policy_csv(metrics, out / "policies.csv"),
        "samples_csv": write_samples_csv(store, out / "samples.csv"),
        "markdown": write_metrics_markdown(metrics, out / "report.md", title=title,
                                           unfinished=unfinished_jobs(store)),
        "eval_results": write_eval_results_json(store, out / "eval_results"),
    }


__all__ = ["load_metrics", "render_html", "policy_rows", "write_policy_csv", "write_html", "write_csv", "write_samples_csv",
           "write_markdown", "write_eval_results_json", "write_all"]
