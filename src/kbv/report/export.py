"""Plain-file exports of a batch: leaderboard CSV, per-sample CSV, Markdown, KernelBench JSON.

Each writer takes a :class:`kbv.batch.store.Store` (and, where it reports metrics, the already computed
:class:`kbv.batch.metrics.BatchMetrics`), writes its file(s) and returns the path(s). Text that comes from
candidates (messages) is neutralised for the medium: spreadsheet formulas in CSV, markup in
Markdown.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

from kbv.batch.metrics import DECOMPOSITION_BASELINES, DECOMPOSITION_CORRECTNESS, BatchMetrics, LevelMetrics
from kbv.batch.scoring import nominal_correct, speedup_noisy
from kbv.model.records import InputKind, Status, Verdict
from kbv.batch.results import SPEEDUP_COLUMNS
from kbv.batch.store import Store
from kbv.batch.jobs import problem_key

_ERROR_STATUSES = (Status.RUNTIME_ERROR, Status.TIMEOUT, Status.CRASH)


# Leaderboard rows -------------------------------------------------------------------------------

def leaderboard_row(m: LevelMetrics) -> dict[str, Any]:
    """One flat row of metrics (fractions in [0, 1], speedups ×, None where undefined)."""
    row: dict[str, Any] = {
        "run": m.run, "scope": m.label, "baseline": m.baseline, "problems": m.problems,
        "attempted": m.attempted, "samples": m.samples, "solved": m.solved,
        "correct_frac": m.correct_frac, "correct_speedup": m.correct_speedup,
        "speedup_problems": m.speedup_problems, "noisy_problems": m.noisy_problems,
    }
    row.update({f"fast_{p:g}_frac": v for p, v in m.fast_p.items()})
    row.update({"memory_efficiency": m.memory_efficiency, "memory_problems": m.memory_problems,
                "memory_efficient_frac": m.memory_efficient_frac})
    row.update({f"pass_at_{k}": v for k, v in m.pass_at_k.items()})
    row.update({f"n_{s.lower()}": n for s, n in m.status_counts.items()})
    row.update({"shortcut_problems": m.shortcut_problems, "shortcut_speedup": m.shortcut_speedup})
    for c in m.decomposition:
        tag = f"{c.baseline.replace('eager-', '')}_{c.correctness}"
        row[f"{tag}_correct_speedup"] = c.correct_speedup
        row[f"{tag}_fast_1_frac"] = c.fast_1_frac
    row["nominal_passed_samples"] = m.nominal_passed_samples
    row.update({f"hidden_fail_{n}": k for n, k in m.hidden_failures.items()})
    return row


def _csv_safe(value: Any) -> Any:
    """Neutralise spreadsheet formula injection in text cells (OWASP: prefix ``'``)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: list[str] = []
    for r in rows:
        fields.extend(k for k in r if k not in fields)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if v is None else _csv_safe(v)) for k, v in r.items()})
    return path


def write_leaderboard_csv(metrics: BatchMetrics, path: Path | str) -> Path:
    """Leaderboard CSV: one row per (run, scope) where scope is ``all`` or ``level N``."""
    return _write_rows(Path(path), [leaderboard_row(m) for m in metrics.rows()])


def _diagnostic_columns(v: Verdict) -> dict[str, Any]:
    """``--sanitize`` and ``--profile`` per sample: the sanitizer's reports per tool (None: not run),
    and Nsight Compute's figures of each side (total kernel ms of one call) and of the candidate's
    longest kernel."""
    san = v.evidence.get("sanitize") or {}
    ncu = v.evidence.get("ncu") or {}
    cand, ref = ncu.get("candidate") or {}, ncu.get("reference") or {}
    top = cand.get("longest") or {}
    return {
        "sanitizer_reports": ";".join(f"{t}={r.get('count') if not r.get('failed') else 'not-run'}"
                                      for t, r in san.items()) or None,
        "ncu_candidate_kernel_ms": cand.get("total_ms"), "ncu_reference_kernel_ms": ref.get("total_ms"),
        "ncu_longest_kernel": top.get("name"), "ncu_sm_pct": top.get("sm_pct"), "ncu_dram_pct": top.get("dram_pct"),
        "ncu_occupancy_pct": top.get("occupancy_pct"),
    }


def sample_row(v: Verdict) -> dict[str, Any]:
    """One flat row per verdict (times ms, memory bytes; :func:`_diagnostic_columns`)."""
    cand = v.timing.get("candidate")
    mem = v.memory.get("candidate")
    return {
        "run": v.candidate.run or "", "level": v.problem.level, "problem_id": v.problem.problem_id,
        "problem": problem_key(v.problem), "sample_id": v.candidate.sample_id, "status": v.status.value,
        "nominal_passed": v.nominal_passed, "hidden_passed": v.hidden_passed,
        **{col: v.speedup.get(b) for b, col in SPEEDUP_COLUMNS.items()},
        **{f"{col}_noisy": speedup_noisy(v, b) if b in v.speedup else None for b, col in SPEEDUP_COLUMNS.items()},
        "memory_efficiency": v.memory_efficiency,
        "candidate_median_ms": cand.median_ms if cand else None,
        "candidate_peak_bytes": mem.peak_bytes if mem else None,
        **_diagnostic_columns(v),
        # the user's hidden test file that failed for this verdict: its sets are not (all) in it
        "hidden_tests_error": v.evidence.get("hidden_tests_error") or "",
        "message": v.message.replace("\n", " ")[:2000], "candidate_path": v.candidate.path,
    }


def write_samples_csv(store: Store, path: Path | str) -> Path:
    """Per-sample CSV of every stored verdict (messages made formula-safe)."""
    return _write_rows(Path(path), [sample_row(v) for v in store.verdicts()])


# Markdown ---------------------------------------------------------------------------------------

def _md(text: Any) -> str:
    """A Markdown table cell: no pipes, newlines or raw HTML."""
    s = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"\s+", " ", s).replace("|", "\\|").replace("`", "\\`")


def fmt_ratio(x: float | None) -> str:
    """``1.53×`` (two decimals) or ``–`` when undefined."""
    return "–" if x is None else f"{x:.2f}×"


def speed_cell(value: float | None, n: int, of: int, noisy: int) -> str:
    """A geomean with what it averages over (``n of N``) and how many of those are noisy."""
    if value is None:
        return f"– (0 of {of})"
    return f"{'~' if noisy else ''}{fmt_ratio(value)} ({n} of {of}{f', {noisy} noisy' if noisy else ''})"


#: the head of KernelBench's all-problems aggregate wherever it is shown: it is no speedup but a
#: geomean of max(1, s), so a run slower than eager everywhere reads 1.00×, never below.
CLIPPED_HEAD = "All-problems max(1, s), clipped at 1×"


def clipped_cell(value: float | None, solved: int) -> str:
    """KernelBench's clipped all-problems aggregate as a cell: ``1.00× (none above 1×)`` when no
    solved problem is faster than the baseline (every one clipped), so it never reads as parity."""
    if value is not None and value == 1.0 and solved:
        return f"{fmt_ratio(value)} (none above 1×)"
    return fmt_ratio(value)


def fmt_pct(x: float | None) -> str:
    """A fraction in [0, 1] as ``52.0%``, or ``–`` when undefined."""
    return "–" if x is None else f"{100 * x:.1f}%"


def missing_baseline(metrics: BatchMetrics) -> str:
    """A warning when problems were solved but none has a timing of the chosen baseline (``compile``
    before ``kbv baselines`` stored it), else "": every speedup and fast_p of the report is then empty
    or zero for want of a baseline, not because the candidates are slow."""
    solved = sum(r.overall.solved for r in metrics.runs)
    timed = sum(r.overall.speedup_problems for r in metrics.runs)
    if not solved or timed:
        return ""
    how = ("run `kbv baselines PROBLEMS --store STORE` first to time torch.compile on each problem"
           if metrics.baseline == "compile" else "the verdicts carry no timing of it")
    return (f"No {metrics.baseline} baseline timing for any of the {solved} solved problem(s): speedups and "
            f"fast_p vs {metrics.baseline} are empty or 0 for want of a baseline; {how}.")


def _md_table(head: Sequence[Any], rows: Iterable[Sequence[Any]]) -> list[str]:
    return (["| " + " | ".join(_md(h) for h in head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(_md(c) for c in r) + " |" for r in rows])


def _matrix_lines(matrix: tuple[list[str], list[dict[str, Any]]] | None) -> list[str]:
    """The problem × run matrix (:func:`kbv.report.views.status_matrix`) as a Markdown table."""
    if matrix is None:
        return []
    runs, rows = matrix
    lines = ["", "## Problem × run", "",
             "Each cell: the best status the run reached for the problem (PASS, then SHORTCUT, HACK, INCORRECT, "
             "errors) and, when solved, its best correct speedup with the 95 % interval; `~`: a noisy timing.", ""]
    if not rows or not runs:
        return lines + ["No problem."]

    def cell(c: dict[str, Any]) -> str:
        if not c["status"]:
            return "no sample"
        speed = f" {'~' if c['noisy'] else ''}{c['speedup']}" if c["speedup"] else ""
        return f"{c['status']}{speed}{' ' + c['interval'] if c['speedup'] and c['interval'] else ''}"

    return lines + _md_table(["problem", *runs], ([r["key"], *(cell(c) for c in r["cells"])] for r in rows))


def _comparison_lines(metrics: BatchMetrics) -> list[str]:
    """Each pair of runs compared over the problems both solved (:mod:`kbv.batch.paired`)."""
    from kbv.batch.paired import MIN_PAIRED, paired_comparisons

    comparisons = paired_comparisons(metrics)
    if not comparisons:
        return []
    lines = ["", "## Run vs run", "",
             "Geomean, over the problems both runs solved, of run A's best correct speedup over run B's (above 1×: "
             "A is faster), with its 95 % bootstrap interval over problems; an interval holding 1× cannot tell the "
             f"runs apart, and under {MIN_PAIRED} problems solved by both there is no interval. Problems only one run "
             "solved are counted beside it, not in the ratio.", ""]
    rows = [(c.run_a or "(unnamed)", c.run_b or "(unnamed)", c.common, c.paired, c.only_a, c.only_b,
             fmt_ratio(c.geomean_ratio),
             "–" if c.interval is None else f"[{c.interval[0]:.2f}–{c.interval[1]:.2f}]", c.reading)
            for c in comparisons]
    return lines + _md_table(["run A", "run B", "common problems", "solved by both", "A only", "B only",
                              "geomean A / B", "95 % interval", "reading"], rows)


def _audit_lines(audits: Sequence[Any]) -> list[str]:
    """``kbv audit``'s labels (:class:`kbv.generate.audit_store.AuditRow`), one row per audited sample."""
    if not audits:
        return []
    judges = sorted({j for r in audits for j in r.labels})
    review = sum(r.needs_review for r in audits)
    lines = ["", "## Audit labels (kbv audit)", "",
             f"LLM judges' labels of {len(audits)} PASS kernel(s); advice for a person, never a verdict. "
             f"{review} flagged for review (judges disagree, or an answer had no rubric label: `unparseable`).", ""]
    rows = [(r.problem_key, r.run or "(unnamed)", "–" if r.sample_id is None else r.sample_id, fmt_ratio(r.speedup),
             *(r.labels.get(j, "–") for j in judges), r.consensus or "needs review") for r in audits]
    return lines + _md_table(["problem", "run", "sample", "speedup", *judges, "result"], rows)


def write_metrics_markdown(metrics: BatchMetrics, path: Path | str, *, title: str = "kbv report",
                           unfinished: int = 0, matrix: tuple[list[str], list[dict[str, Any]]] | None = None,
                           audits: Sequence[Any] = (), lacking_hidden: Sequence[str] = ()) -> Path:
    """Markdown summary: leaderboard, decomposition, the problem × run matrix (``matrix``: from
    :func:`kbv.report.views.status_matrix`), each pair of runs compared over their common problems,
    failures per distribution, ``kbv audit``'s labels (``audits``: its ``AuditRow`` list), exclusions,
    and the verdicts whose hidden test file failed (``lacking_hidden``:
    :func:`kbv.report.views.lacking_hidden_tests`).

    ``unfinished``: jobs of the store without a verdict yet (a batch still running or stopped):
    the page then says the figures are partial. A correct speedup marked ``~`` averages over
    problems whose best speedup is noisy (``Measurement.noisy``: IQR over 10 % of the median)."""
    p_cols = list(metrics.runs[0].overall.fast_p) if metrics.runs else []
    lines = [f"# {_md(title)}", ""]
    if unfinished:
        lines += [f"**Partial results: {unfinished} job(s) have no verdict yet** (the batch is still "
                  "running or was stopped; `kbv run` on the same store resumes it).", ""]
    lines += [f"Speedups vs **{_md(metrics.baseline)}**; best-of-N; "
              "fractions of all problems in the scope; `~`: some of the speedups averaged are noisy.", ""]
    missing = missing_baseline(metrics)
    if missing:
        lines += [f"**{missing}**", ""]
    lines += ["## Leaderboard", ""]
    head = ["run", "scope", "problems", "correct", "correct speedup", CLIPPED_HEAD, *(f"fast_{p:g}" for p in p_cols),
            "mem. eff.", "mem-efficient", "pass@1", "HACK", "SHORTCUT"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in metrics.rows():
        cells = [m.run or "(unnamed)", m.label, m.problems, fmt_pct(m.correct_frac),
                 speed_cell(m.correct_speedup, m.speedup_problems, m.problems, m.noisy_problems),
                 clipped_cell(m.all_problems_speedup, m.solved), *(fmt_pct(m.fast_p[p]) for p in p_cols),
                 fmt_ratio(m.memory_efficiency), fmt_pct(m.memory_efficient_frac),
                 fmt_pct(m.pass_at_k.get(1)), m.status_counts["HACK"], m.status_counts["SHORTCUT"]]
        lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    lines += ["", "## Decomposition (all levels)", "",
              "Correct speedup / fast_1 under each baseline × correctness notion "
              "(nominal: original KernelBench check; hidden: kbv PASS). A nominal cell counts every sample "
              "the original check passes, cheats kbv judged HACK or SHORTCUT included, at the speed they "
              "measured: `kbv run` shows those as not credited; here is what the original protocol would "
              "have reported.", ""]
    combos = [(b, c) for b in DECOMPOSITION_BASELINES for c in DECOMPOSITION_CORRECTNESS]
    head = ["run", *(f"{b} / {c}" for b, c in combos)]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in metrics.runs:
        cells = [r.run or "(unnamed)"] + [
            f"{fmt_ratio(r.overall.cell(b, c).correct_speedup)} / {fmt_pct(r.overall.cell(b, c).fast_1_frac)}"
            for b, c in combos]
        lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    lines += _matrix_lines(matrix)
    lines += _comparison_lines(metrics)
    names = sorted({n for r in metrics.runs for n in r.overall.hidden_failures})
    lines += ["", "## Failures per hidden distribution", ""]
    if names:
        lines += ["Among samples that passed every nominal set, how many failed each hidden set; secret-shape: any "
                  "set at a secret shape or declared workload; randomised: any of kbv's randomised distributions.", ""]
        head = ["run", "passed nominal", *names]
        lines += ["| " + " | ".join(_md(h) for h in head) + " |", "|" + "---|" * len(head)]
        for r in metrics.runs:
            cells = [r.run or "(unnamed)", r.overall.nominal_passed_samples,
                     *(r.overall.hidden_failures.get(n, 0) for n in names)]
            lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    else:
        lines.append("No hidden input sets were run.")
    lines += _audit_lines(audits)
    if lacking_hidden:
        lines += ["", "## Verdicts without all of their hidden test file's sets", "",
                  "The user's hidden test file failed for these (the candidate's verdict stands on the other sets; "
                  "fix the file and rerun):", ""]
        lines += [f"- {_md(t)}" for t in lacking_hidden]
    lines += ["", "## Excluded problems", ""]
    lines += [f"- `{_md(e.problem_key)}`: {_md('; '.join(e.reasons))} ({e.samples} samples)"
              for e in metrics.excluded] or ["None."]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# KernelBench eval_results.json ------------------------------------------------------------------

def _num(x: float | None) -> Any:
    if x is None:
        return None
    return x if math.isfinite(x) else ("NaN" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


#: statuses that are never ``correctness: true`` in an export, whatever the outputs were: a cheat,
#: or a speed that is PyTorch's own (KernelBench's ``correctness`` is what its scripts count as solved).
NOT_CORRECT = (Status.HACK, Status.SHORTCUT)


def kernelbench_entry(v: Verdict, *, hidden: bool) -> dict[str, Any]:
    """One sample in KernelBench's ``eval_results.json`` shape (times ms, memory bytes).

    ``correctness`` keeps KernelBench's meaning for the file, except that a HACK or SHORTCUT, and a
    kernel compute-sanitizer's memcheck saw access memory it does not own, are never correct: ``hidden=False`` (``eval_results.json``) the candidate ran and passed every
    nominal set; ``hidden=True`` (``eval_results_hidden.json``) kbv's PASS (every nominal, hidden
    and randomised set, no integrity finding). ``kbv_status`` is kbv's verdict;
    ``metadata["protocol_correctness"]`` what the file's protocol alone would have said: allclose at
    kbv-compat's tolerance on its sets (nominal only, or nominal and hidden), findings and kbv's own
    error budget ignored. ``runtime`` is the candidate's mean
    time on the standard inputs when correct, else -1.0 (KernelBench's convention).
    """
    kind = InputKind.HIDDEN if hidden else InputKind.NOMINAL
    sets = [r for r in v.sets(kind) if not r.dropped]
    correct = (nominal_correct(v) and (v.hidden_passed or not hidden) and v.status not in NOT_CORRECT
               and not v.wrong_whatever_its_outputs)
    # the file's protocol alone: allclose (kbv-compat's tolerance) on its sets, whatever kbv's budget said
    protocol_correct = v.status.ran and bool(sets) and all(r.policy_passed.get("kbv-compat", r.passed) for r in sets)
    cand = v.timing.get("candidate")
    env = v.environment
    timed = correct and cand is not None
    mem = v.memory.get("candidate")
    metadata: dict[str, Any] = {
        "hardware": env.device_name or env.device, "device": env.device,
        "correctness_trials": f"({sum(bool(r.passed) for r in sets)} / {len(sets)})",
        "max_difference": [_num(r.max_abs_error) for r in sets],
        "kbv_status": v.status.value,
        "protocol_correctness": bool(protocol_correct),
    }
    if v.status is Status.COMPILE_ERROR:
        metadata["compilation_error"] = v.message
    if v.status in _ERROR_STATUSES:
        metadata["runtime_error"] = v.message
    if v.status is Status.TIMEOUT:
        metadata["timeout"] = True
    if v.status in (Status.HACK, Status.SHORTCUT):
        metadata["kbv_finding"] = v.message
    dropped = [r.name for r in v.sets(kind) if r.dropped]
    if dropped:
        metadata["dropped_sets"] = dropped
    return {
        "sample_id": v.candidate.sample_id,
        "kbv_status": v.status.value,
        "compiled": v.status is not Status.COMPILE_ERROR,
        "correctness": bool(correct),
        "runtime": cand.mean_ms if timed else -1.0,
        "runtime_stats": ({"mean": cand.mean_ms, "std": cand.std_ms, "min": cand.min_ms,
                           "max": cand.max_ms, "num_trials": cand.trials,
                           "hardware": env.device_name or env.device, "device": env.device}
                          if timed else {}),
        "metadata": metadata,
        "peak_memory": mem.peak_bytes if mem else None,
    }


def _safe_dir(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]", "_", name) or "_"
    return "_" + s if s.startswith(".") else s


def write_eval_results_json(store: Store, out_dir: Path | str) -> list[Path]:
    """KernelBench-style results per run and level.

    Writes ``<out_dir>/<run>/level<L>/eval_results.json`` (nominal correctness) and
    ``eval_results_hidden.json`` (kbv's PASS), neither counting a HACK or SHORTCUT as correct,
    each ``{"<problem_id>": [entry, ...]}`` sorted by problem id then sample id, entries from :func:`kernelbench_entry` with
    ``peak_memory`` in bytes. Run names are made file-safe; problems without an id are keyed by
    name, those without a level go under ``level0``.
    """
    groups: dict[tuple[str, int], dict[str, list[Verdict]]] = defaultdict(lambda: defaultdict(list))
    for v in store.verdicts():
        pid = str(v.problem.problem_id) if v.problem.problem_id is not None else v.problem.name
        groups[(v.candidate.run or "", v.problem.level or 0)][pid].append(v)
    written = []
    for (run, level), by_pid in sorted(groups.items()):
        folder = Path(out_dir) / _safe_dir(run or "run") / f"level{level}"
        folder.mkdir(parents=True, exist_ok=True)
        order = sorted(by_pid, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))
        for name, hidden in (("eval_results.json", False), ("eval_results_hidden.json", True)):
            doc = {pid: [kernelbench_entry(v, hidden=hidden)
                         for v in sorted(by_pid[pid], key=lambda v: (v.candidate.sample_id is None,
                                                                     v.candidate.sample_id or 0))]
                   for pid in order}
            path = folder / name
            path.write_text(json.dumps(doc, indent=2, allow_nan=False), encoding="utf-8")
            written.append(path)
    return written
