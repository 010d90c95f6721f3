"""``kbv run``, ``kbv report`` and ``kbv baselines``: a batch into its store, its outputs, the
cached baseline timings."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from kbv.cli.common import (PROFILE_HELP, SANITIZE_HELP, SHAPES_HELP, POLICY_HELP, SEEDS_HELP, Device, Policy, Precision,
                            console, diagnostics_options, err_console, fail, make_config, resolve_device)


class LayoutOpt(str, Enum):
    auto = "auto"
    kernelbench = "kernelbench"
    plain = "plain"


class ReportBaseline(str, Enum):
    eager_tf32 = "eager-tf32"
    eager_fp32 = "eager-fp32"
    eager_fp32_cudnn_tf32 = "eager-fp32-cudnn-tf32"
    compile = "compile"


#: one syntax for every list filter: comma-separated, repeatable, ranges where the values are numbers.
LEVEL_HELP = "Only these levels, e.g. 1,2 or 1-3 (comma-separated or repeated)."


IDS_HELP = "Only these problem ids, e.g. 1,2,5-8 (comma-separated or repeated)."


RUNS_HELP = "Only these runs, e.g. a,b (comma-separated or repeated)."


class ExecutorOpt(str, Enum):
    local = "local"
    ray = "ray"



def open_store(store: Path):
    """The :class:`kbv.batch.store.Store` at ``store``; a file that is no SQLite store (or cannot be
    opened) ends the command with one line naming it (exit 2)."""
    import sqlite3

    from kbv.batch.store import Store

    try:
        return Store(store)
    except (sqlite3.Error, OSError) as exc:
        fail(f"--store {store}: cannot open it as a SQLite store ({exc})")


def _numbers(values: Optional[List[str]], option: str) -> frozenset[int] | None:
    from kbv.batch.runner import parse_ids

    if not values:
        return None
    try:
        return parse_ids(",".join(values))
    except ValueError as exc:
        fail(f"{option} {','.join(values)}: {str(exc).replace('problem id', 'value').replace('problem ids', 'values')}")


def _selection(level: Optional[List[str]], problem_ids: Optional[List[str]], runs: Optional[List[str]]):
    from kbv.batch.runner import Selection

    names = frozenset(n.strip() for r in (runs or []) for n in r.split(",") if n.strip()) or None
    return Selection(levels=_numbers(level, "--level"), problem_ids=_numbers(problem_ids, "--problem-ids"),
                     runs=names)


def run_cmd(
    problems: Path = typer.Argument(..., help="Problem files: a KernelBench checkout, a levelN folder or any folder of levelN/ID_Name.py."),
    candidates: List[Path] = typer.Argument(..., help="Candidate folders: one run or a folder of runs each (several allowed)."),
    store: Path = typer.Option(..., "--store", help="SQLite result store (created if missing; a rerun resumes it)."),
    device: Device = typer.Option(Device.auto, help="Where to run: cpu, cuda, or auto (cuda when available)."),
    precision: Precision = typer.Option(Precision.fp32, help="dtype of models and floating-point inputs."),
    level: Optional[List[str]] = typer.Option(None, "--level", metavar="1,2", help=LEVEL_HELP),
    problem_ids: Optional[List[str]] = typer.Option(None, "--problem-ids", metavar="1,2,5-8", help=IDS_HELP),
    runs: Optional[List[str]] = typer.Option(None, "--runs", metavar="a,b", help=RUNS_HELP),
    layout: LayoutOpt = typer.Option(LayoutOpt.auto, help="Candidate layout: kernelbench (KernelBench's run folders, one file per level, problem and sample), plain (run / level / id / sample .py) or auto."),
    hidden_tests: Optional[Path] = typer.Option(None, "--hidden-tests", help="KernelBench-Verified hidden_tests folder (default: looked for beside the problems); each <pid>_hidden.py adds its get_hidden_inputs() sets as HT1, HT2, ..."),
    retry_excluded: bool = typer.Option(False, "--retry-excluded", help="Run again the jobs of problems excluded as broken."),
    seeds: Optional[int] = typer.Option(None, min=1, metavar="N", help=SEEDS_HELP),
    trials: int = typer.Option(30, min=1, metavar="N", help="Timed calls per subject (a slow subject gets fewer: rounds after the first are cut to 2 s of calls each, never below 3)."),
    warmup: int = typer.Option(5, min=0, metavar="N", help="Untimed calls before each timing round."),
    timeout: Optional[float] = typer.Option(None, min=1.0, metavar="S", help="Seconds allowed per forward call (default 120)."),
    policy: Policy = typer.Option(Policy.kbv, help=POLICY_HELP),
    secret_shapes: Optional[int] = typer.Option(None, "--secret-shapes", min=0, max=8, metavar="N", help=SHAPES_HELP),
    sanitize: Optional[str] = typer.Option(None, "--sanitize", metavar="memcheck,racecheck", help=SANITIZE_HELP),
    profile: bool = typer.Option(False, "--profile", help=PROFILE_HELP),
    gpus: Optional[str] = typer.Option(None, "--gpus", metavar="all|0,1", help="One lane per GPU (implies --device cuda): each lane's candidates see only its GPU, one timing per GPU at a time."),
    lanes: int = typer.Option(1, "--lanes", "--workers", min=1, metavar="N", help="Lanes on --device cpu (jobs verified at once; they share the cores)."),
    builds: Optional[int] = typer.Option(None, "--builds", min=0, metavar="N", help="C++/CUDA builds at once in the sandboxed build pool ahead of the lanes (default: cores / 2; 0: no pool)."),
    executor: ExecutorOpt = typer.Option(ExecutorOpt.local, "--executor", help="local (lanes in this process) or ray (one Ray task per job; needs the ray extra: pip install kbv\\[ray])."),
    address: Optional[str] = typer.Option(None, "--address", help="--executor ray: the cluster's address (default: start a local Ray cluster)."),
    no_build_pause: bool = typer.Option(False, "--no-build-pause", help="Run the build pool at idle priority while a lane times, instead of stopping its processes (the default)."),
    no_prestart: bool = typer.Option(False, "--no-prestart", help="Start each candidate worker when its job starts, not while the job before it runs (the default)."),
    allow_mixed: bool = typer.Option(False, "--allow-mixed", help="Add to a store that another kbv source wrote, and go on if kbv's files change during the run (the store records every source)."),
    allow_without_hidden_tests: bool = typer.Option(False, "--allow-without-hidden-tests", help="Resume a store whose verdicts were made with hidden test files this run has none for (a file removed on purpose): those verdicts are replaced by ones made without them."),
) -> None:
    """Verify every (problem, candidate) pair into a resumable store: one verdict written per
    finished job; a rerun skips finished pairs and redoes interrupted ones."""
    from kbv.batch.provenance import SourceMismatch
    from kbv.batch.runner import ConfigMismatch, plan_batch, run_batch
    from kbv.intake.layout import Layout, LayoutError, unnamed_problem_files

    from kbv.batch.executors import builds as build_stage
    from kbv.batch.executors.lanes import cpu_lanes, gpu_lanes, parse_gpus

    selection = _selection(level, problem_ids, runs)
    if gpus is not None and device is Device.cpu:
        fail("--gpus needs --device cuda (or auto)")
    dev = resolve_device(Device.cuda, f"--gpus {gpus}") if gpus is not None else resolve_device(device)
    tools, ncu = diagnostics_options(dev, sanitize, profile)
    config = make_config(dev, precision.value, seeds, trials, warmup, timeout, policy.value, secret_shapes, tools, ncu)
    if lanes > 1 and dev != "cpu":
        fail("--lanes is for --device cpu; use --gpus on cuda")
    if executor is ExecutorOpt.ray and (gpus is not None or lanes > 1):
        fail("--executor ray places tasks itself: no --gpus or --lanes")
    if address is not None and executor is not ExecutorOpt.ray:
        fail("--address is for --executor ray")
    try:
        lane_specs = gpu_lanes(parse_gpus(gpus)) if gpus is not None else (cpu_lanes(lanes) if lanes > 1 else None)
    except ValueError as exc:
        fail(str(exc))
    n_builds = build_stage.pool_size() if builds is None else builds
    try:
        plan = plan_batch(problems, candidates, config, layout=Layout(layout.value), selection=selection,
                          hidden_tests_root=hidden_tests)
    except LayoutError as exc:
        fail(str(exc))
    console.print(f"{len(plan.problems)} problems, {len(plan.jobs)} jobs from runs {', '.join(plan.runs) or '(none)'}"
                  f" on {dev}; store {store}", highlight=False)
    for b in plan.broken_files:
        skipped = len(plan.candidates_of(b))
        console.print(f"[yellow]broken problem file[/] {b.path or b.key}: {b.fault}"
                      + (f"; its {skipped} candidate(s) skipped" if skipped else ""), highlight=False)
    unnamed = unnamed_problem_files(problems)
    if unnamed:
        shown = ", ".join(str(p) for p in unnamed[:3]) + (", ..." if len(unnamed) > 3 else "")
        console.print(f"[yellow]{len(unnamed)} .py file(s) in the problem folder are not named ID_Name.py[/] "
                      f"({shown}); ignored", highlight=False)
    if plan.orphans:
        console.print(f"[yellow]{len(plan.orphans)} candidate(s) have no problem file[/] (e.g. "
                      f"{plan.orphans[0].path}); skipped", highlight=False)
    if plan.ignored:
        shown = ", ".join(str(p) for p in plan.ignored[:3]) + (", ..." if len(plan.ignored) > 3 else "")
        console.print(f"[yellow]{len(plan.ignored)} .py file(s) in run folders fit no layout[/] ({shown}); ignored",
                      highlight=False)
    run = {(j.problem.level, j.problem.problem_id) for j in plan.jobs}  # problems no candidate targets: not run
    used = [k for k in plan.hidden_tests if k in run]
    if used:
        console.print(f"{len(used)} hidden test file(s) found: their input sets are checked "
                      "as HT1, HT2, ... beside D1-D4", highlight=False)
    without = [p for p in plan.problems if (p.level, p.problem_id) not in plan.hidden_tests
               and (p.level, p.problem_id) in run]
    if without and hidden_tests is not None:  # the folder the user named covers some problems only
        shown = ", ".join(f"level{p.level}/{p.problem_id}" for p in without[:5]) + (", ..." if len(without) > 5 else "")
        console.print(f"[yellow]{len(without)} selected problem(s) have no hidden test file[/] in {hidden_tests} "
                      f"({shown}): they run without hidden tests", highlight=False)
    if plan.stray_hidden_tests:
        stray = plan.stray_hidden_tests
        shown = ", ".join(str(p) for p in stray[:3]) + (", ..." if len(stray) > 3 else "")
        console.print(f"[yellow]{len(stray)} file(s) in {hidden_tests} match no problem[/] of {problems} ({shown}): "
                      "not used (named for no problem here, or not <pid>_hidden.py)", highlight=False)
    if not plan.jobs:
        if selection.runs is not None:
            from kbv.intake.layout import discover_candidates

            found = sorted({f.run for f in discover_candidates(candidates, Layout(layout.value)).files})
            missing = sorted(selection.runs - set(found))
            if missing:
                fail(f"--runs {','.join(missing)}: no such run in {', '.join(map(str, candidates))} "
                     f"(runs found: {', '.join(found) or 'none'})")
        if not plan.problems and not plan.broken_files:
            filtered = selection.levels is not None or selection.problem_ids is not None
            fail(f"{problems}: no problem file (<id>_<Name>.py) found"
                 + (" that --level/--problem-ids select" if filtered else ""))
        if plan.broken_candidates and not plan.orphans:
            fail("nothing to run: every candidate's problem file is broken (named above)")
        fail("nothing to run: no candidate matches a selected problem")
    ray_ex = None
    if executor is ExecutorOpt.ray:
        try:
            from kbv.batch.executors.ray_executor import RayExecutor

            ray_ex = RayExecutor(config, plan.hidden_tests, address=address)
        except ImportError:
            fail("--executor ray needs ray: pip install 'kbv[ray]'")
        except (RuntimeError, ConnectionError) as exc:
            fail(f"--executor ray: {exc}")
    with open_store(store) as st:
        try:
            outcome = run_batch(plan, st, console=console, retry_excluded=retry_excluded, lanes=lane_specs,
                                builds=n_builds, lane_factory=ray_ex.lanes if ray_ex else None,
                                prestart=not no_prestart, pause_builds=not no_build_pause, allow_mixed=allow_mixed,
                                allow_without_hidden_tests=allow_without_hidden_tests)
        except (ConfigMismatch, SourceMismatch) as exc:
            fail(str(exc))
        finally:
            if ray_ex is not None:
                ray_ex.close()
        if outcome.superseded:
            console.print(f"{outcome.superseded} stored job(s) superseded by changed files were replaced.",
                          highlight=False)
        done = sum(outcome.statuses.values())
        console.print(f"{outcome.finished} verdict(s) written now, {outcome.already_done} were done before; "
                      f"{done}/{outcome.total} jobs have a verdict.", highlight=False)
        if outcome.skipped_excluded:
            console.print(f"{outcome.skipped_excluded} job(s) of excluded problems have no verdict "
                          f"({', '.join(sorted(outcome.excluded)) or 'excluded earlier'}).", highlight=False)
        if outcome.builds:
            console.print(f"build pool: {outcome.builds} builds, {outcome.build_cpu_s:.1f} CPU-s, "
                          f"{outcome.build_s:.1f} s of builds; stopped {outcome.builds_stopped_s:.1f} s while "
                          "lanes timed", highlight=False)
        if outcome.lane_busy_s:
            console.print(f"lanes: {outcome.lanes}, busy {outcome.lane_busy_s:.1f} s", highlight=False)
        for path, error in outcome.internal_errors:
            err_console.print(f"kbv: internal error on {path}: {error.strip().splitlines()[0]}",
                              highlight=False, markup=False, soft_wrap=True)
        # a hidden test file that failed when it ran (a static fault stops the plan): those verdicts
        # stand without its sets; said here, with exit 2, as kbv eval does (newcomer helper). A fixed
        # file supersedes them on the next run (its bytes are part of the job keys).
        lacking = {}
        for pj in plan.jobs:
            if (pj.job.level, pj.job.problem_id) in plan.hidden_tests:
                v = st.verdict(pj.job)
                if v is not None and v.evidence.get("hidden_tests_error"):
                    lacking.setdefault(str(v.evidence["hidden_tests_error"]), []).append(pj.job)
        for error, jobs in lacking.items():
            err_console.print(f"kbv: hidden tests not checked on {len(jobs)} verdict(s): {error} (those verdicts "
                              "are without them; fix the file and rerun)", highlight=False, markup=False,
                              soft_wrap=True)
    if outcome.source_changed:
        err_console.print(f"kbv: stopped: {outcome.source_changed}; rerun from one kbv source, or --allow-mixed",
                          highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(3)
    if outcome.interrupted:
        err_console.print("kbv: interrupted; the job in flight was released, rerun to resume")
        raise typer.Exit(130)
    if outcome.internal_errors:
        raise typer.Exit(3)
    if lacking:
        raise typer.Exit(2)


def report_cmd(
    store: Path = typer.Option(..., "--store", help="Store written by kbv run."),
    out: Path = typer.Option(..., "--out", help="Folder for report.html, CSV, Markdown and eval_results JSON."),
    baseline: ReportBaseline = typer.Option(ReportBaseline.eager_tf32, help="Baseline the speedups are measured against."),
    title: str = typer.Option("kbv report", help="Title of the HTML and Markdown reports."),
    include_excluded: bool = typer.Option(False, "--include-excluded", help="Score excluded problems too."),
    audit: Optional[str] = typer.Option(None, "--audit", metavar="LABEL|review",
                                        help="List only samples kbv audit's judges labelled LABEL, or 'review' "
                                             "(judges disagree)."),
) -> None:
    """Write the leaderboard (self-contained HTML that opens offline), CSV, Markdown and
    KernelBench-style eval_results.json, from the store only."""
    from kbv.report.html import write_all

    if not store.is_file():
        fail(f"{store}: no such store")
    with open_store(store) as st:
        written = write_all(st, out, baseline=baseline.value, include_excluded=include_excluded, title=title,
                            audit=audit)
    if written["missing_baseline"]:
        err_console.print(f"kbv: warning: {written['missing_baseline']}", highlight=False, soft_wrap=True,
                          markup=False)
    console.print(f"report written to {written['html']}", highlight=False)
    console.print(f"also {written['leaderboard_csv'].name}, {written['policies_csv'].name}, {written['samples_csv'].name}, "
                  f"{written['markdown'].name} and {len(written['eval_results'])} eval_results JSON file(s) "
                  f"in {out}", highlight=False)


def baselines_cmd(
    problems: Path = typer.Argument(..., help="Problem files (as for kbv run)."),
    store: Path = typer.Option(..., "--store", help="Store to cache the baselines in (the one kbv run uses)."),
    device: Device = typer.Option(Device.auto, help="cpu, cuda, or auto (cuda when available)."),
    precision: Precision = typer.Option(Precision.fp32, help="dtype of models and floating-point inputs."),
    labels: str = typer.Option("eager-fp32,eager-tf32,compile", help="Baselines to measure (comma-separated)."),
    level: Optional[List[str]] = typer.Option(None, "--level", metavar="1,2", help=LEVEL_HELP),
    problem_ids: Optional[List[str]] = typer.Option(None, "--problem-ids", metavar="1,2,5-8", help=IDS_HELP),
    measure: bool = typer.Option(True, "--measure/--no-measure", help="Measure what the cache lacks (--no-measure: only import/export)."),
    force: bool = typer.Option(False, "--force", help="Measure again even when cached."),
    import_json: Optional[Path] = typer.Option(None, "--import-json", help="Import KernelBench baseline JSON (a file, a <hardware> folder or results/timing)."),
    export_json: Optional[Path] = typer.Option(None, "--export-json", help="Write KernelBench's baseline JSON files into this folder (one subfolder per hardware)."),
    trials: int = typer.Option(100, min=1, metavar="N", help="Timed calls per baseline (KernelBench uses 100)."),
    warmup: int = typer.Option(5, min=0, metavar="N", help="Untimed calls before each timing round."),
) -> None:
    """Measure and cache per-problem baselines (eager-fp32, eager-tf32, torch.compile with TF32 on),
    keyed by device name, driver, torch version and precision; import/export KernelBench's JSON."""
    from rich.table import Table

    from kbv.batch.baseline_cache import LABELS, baseline_key, export_kernelbench_json, import_kernelbench_json
    from kbv.intake.layout import LayoutError, vet_problems
    from kbv.batch.evaluator import EvaluationError, Evaluator
    from kbv.intake.problems import ProblemError

    wanted = tuple(x.strip() for x in labels.split(",") if x.strip())
    bad = [x for x in wanted if x not in LABELS]
    if bad or not wanted:
        fail(f"--labels: unknown {', '.join(bad) or '(none given)'}; known: {', '.join(LABELS)}")
    selection = _selection(level, problem_ids, None)
    try:
        scan = vet_problems(problems)
    except LayoutError as exc:
        fail(str(exc))
    refs = [p for p in scan.problems if selection.problem(p.level, p.problem_id)]
    for exc in scan.errors:
        err_console.print(f"kbv: skipping broken problem file: {exc}", highlight=False, markup=False, soft_wrap=True)
    if not refs:
        fail(f"{problems}: no problem selected")
    failed = False
    with open_store(store) as st:
        if import_json is not None:
            try:
                res = import_kernelbench_json(st, refs, import_json, precision=precision.value)
            except ValueError as exc:
                fail(str(exc))
            console.print(f"imported {res.imported} baseline summaries from {len(res.files)} file(s)"
                          + (f"; {len(res.unmatched)} entries match no problem file" if res.unmatched else ""),
                          highlight=False)
        if measure:
            dev = resolve_device(device)
            config = make_config(dev, precision.value, 1, trials, warmup, None)
            table = Table(title=f"Baselines on {dev} (median ms)", title_justify="left")
            for col in ("problem", *wanted, "note"):
                table.add_column(col)
            with Evaluator(dev) as ev, console.status("measuring baselines...") as status:
                try:
                    env = ev.environment()
                except EvaluationError as exc:
                    fail(f"internal error: {exc}", code=3)
                for p in refs:
                    keys = {lb: baseline_key(p.sha256, env, precision.value, lb) for lb in wanted}
                    todo = tuple(lb for lb in wanted if force or st.get_baseline(keys[lb]) is None)
                    note = "cached" if not todo else ""
                    if todo:
                        status.update(f"measuring {', '.join(todo)} for {p.path}...")
                        try:
                            run = ev.measure_baselines(p, config, todo)
                        except ProblemError as exc:
                            note, failed = f"broken problem: {exc.fault}", True
                            run = None
                        except EvaluationError as exc:
                            note, failed = f"internal error: {str(exc).splitlines()[0]}", True
                            run = None
                        if run is not None:
                            for lb, m in run.measurements.items():
                                st.put_baseline(baseline_key(p.sha256, run.environment, precision.value, lb), m)
                            note = "; ".join(f"{lb}: {e}" for lb, e in run.errors.items()) or "measured"
                            failed = failed or bool(run.errors)
                    cells = []
                    for lb in wanted:
                        m = st.get_baseline(keys[lb])
                        cells.append("-" if m is None else f"{m.median_ms:.4g}")
                    table.add_row(f"level{p.level}/{Path(p.path).name}", *cells, note)
            console.print(table)
            console.print(f"cache key: {env.device_name or env.device} / driver {env.driver or '-'} / "
                          f"torch {env.torch} / {precision.value}", highlight=False)
        if export_json is not None:
            files = export_kernelbench_json(st, refs, export_json, precision=precision.value)
            console.print(f"exported {len(files)} KernelBench baseline file(s) under {export_json}", highlight=False)
    if failed:
        raise typer.Exit(3)
