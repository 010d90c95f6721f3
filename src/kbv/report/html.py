"""``kbv report``: every output of a batch, read from its :class:`~kbv.batch.store.Store` only.

* :func:`write_html` — one self-contained HTML file (inline CSS, a few lines of inline JS for
  table sorting, figures as inline PNG data URIs, a Content-Security-Policy that forbids any
  network fetch). Rendered with Jinja2 with autoescaping on: candidate messages and evidence are
  hostile text and only ever reach the page escaped.
* :func:`write_csv`, :func:`write_markdown`, :func:`write_eval_results_json` — the plain exports
  (implemented in :mod:`kbv.report.export`); :func:`write_all` writes everything at once.

What the page's tables and sample sections hold is built in :mod:`kbv.report.views`.

Metrics come from :func:`kbv.batch.metrics.compute_metrics` (see its module for the formulas).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
from pathlib import Path
from typing import Any

import jinja2

from kbv.batch.metrics import (DECOMPOSITION_BASELINES, DECOMPOSITION_CORRECTNESS, DEFAULT_BASELINE,
    BatchMetrics, compute_metrics)
from kbv.model.records import POLICIES
from kbv.report.export import (fmt_pct, fmt_ratio, missing_baseline, write_eval_results_json, write_leaderboard_csv,
    write_metrics_markdown, write_samples_csv)
from kbv.report import plots as report_plots
from kbv.batch.paired import paired_comparisons
from kbv.report.export import CLIPPED_HEAD, clipped_cell
from kbv.report.views import (SHOWN_P, anchor, comparison_rows, lacking_hidden_tests, leaderboard, mean_std,
    problem_views, status_matrix)
from kbv.batch.results import SPEEDUP_COLUMNS
from kbv.batch.store import Store

TEMPLATES = Path(__file__).with_name("templates")


def load_metrics(store: Store, *, baseline: str = DEFAULT_BASELINE,
                 include_excluded: bool = False) -> BatchMetrics:
    """:func:`kbv.batch.metrics.compute_metrics` over every verdict and exclusion in ``store``.

    Every problem with a registered job counts in its level's denominator, with or without a
    verdict: a batch interrupted before a problem's jobs ran shows that problem as unsolved (and
    the report says the metrics are partial) instead of silently shrinking the level.

    Problems flagged by vetting during evaluation (``Verdict.problem_flags``: stochastic,
    degenerate, under-tolerance, reference failures) are excluded like those ``kbv vet
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
    env.filters["anchor"] = anchor
    return env



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
    groups, head, rows = leaderboard(metrics)
    matrix_runs, matrix = status_matrix(metrics, verdicts)
    from kbv.sandbox.numeric_flags import DESCRIPTIONS  # imports torch: only where the page is rendered

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
        matrix_runs=matrix_runs, matrix=matrix, ms=mean_std, clipped_head=CLIPPED_HEAD, clipped=clipped_cell,
        comparisons=comparison_rows(paired_comparisons(metrics)),
        baseline_notes=[(lb, DESCRIPTIONS.get(lb, lb)) for lb in labels],
        hidden_names=sorted({n for r in metrics.runs for n in r.overall.hidden_failures}),
        envs=envs, speedup_labels=list(SPEEDUP_COLUMNS),
        plots={
            "decomposition": report_plots.decomposition_bars(metrics),
            "failures": report_plots.failure_bars(metrics),
            "cdf": report_plots.speedup_cdf(metrics),
            "scatter": [(lv, report_plots.memory_speedup_scatter(metrics, lv)) for lv in levels],
        },
        problems=problem_views([v for v in verdicts if keep is None or keep(v)], exclusions, audits),
        audit_filter=audit, missing_baseline=missing_baseline(metrics), lacking_hidden=lacking_hidden_tests(verdicts),
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
    """Markdown summary: leaderboard, decomposition, problem × run matrix, run vs run, failures per
    distribution, audit labels, exclusions (:func:`kbv.report.export.write_metrics_markdown`)."""
    metrics = load_metrics(store, baseline=baseline, include_excluded=include_excluded)
    return write_metrics_markdown(metrics, path, title=title, unfinished=unfinished_jobs(store),
                                  **_markdown_extras(store, metrics))


def _markdown_extras(store: Store, metrics: BatchMetrics) -> dict[str, Any]:
    """What report.md shows beside the metrics: the problem × run matrix and the audit labels."""
    from kbv.generate.audit_store import audit_rows

    verdicts = list(store.verdicts())
    return {"matrix": status_matrix(metrics, verdicts), "audits": audit_rows(store.path),
            "lacking_hidden": lacking_hidden_tests(verdicts)}


def policy_rows(metrics: BatchMetrics) -> list[dict[str, Any]]:
    """One flat row per (run, scope, policy): :class:`kbv.batch.policies.PolicyMetrics` with the per-sample
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
              audit: str | None = None) -> dict[str, Any]:
    """Every output under ``out_dir``: ``report.html``, ``leaderboard.csv``, ``policies.csv``, ``samples.csv``,
    ``report.md`` and ``eval_results/<run>/level<L>/eval_results{,_hidden}.json`` (their paths by key),
    and ``missing_baseline``, the warning both reports carry (:func:`kbv.report.export.missing_baseline`,
    "" for none). ``audit``: see :func:`render_html`."""
    out = Path(out_dir)
    metrics = load_metrics(store, baseline=baseline, include_excluded=include_excluded)
    return {
        "html": write_html(store, out / "report.html", metrics=metrics, title=title, audit=audit),
        "leaderboard_csv": write_leaderboard_csv(metrics, out / "leaderboard.csv"),
        "policies_csv": write_policy_csv(metrics, out / "policies.csv"),
        "samples_csv": write_samples_csv(store, out / "samples.csv"),
        "markdown": write_metrics_markdown(metrics, out / "report.md", title=title,
                                           unfinished=unfinished_jobs(store), **_markdown_extras(store, metrics)),
        "eval_results": write_eval_results_json(store, out / "eval_results"),
        "missing_baseline": missing_baseline(metrics),
    }


__all__ = ["load_metrics", "render_html", "policy_rows", "write_policy_csv", "write_html", "write_csv", "write_samples_csv",
           "write_markdown", "write_eval_results_json", "write_all"]
