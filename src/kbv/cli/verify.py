"""``kbv eval``, ``kbv vet`` and ``kbv demo``: one verification, problem vetting, the built-in demo."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kbv.cli.common import (PROFILE_HELP, SANITIZE_HELP, SHAPES_HELP, POLICY_HELP, SEEDS_HELP, Device, Policy, Precision,
                            console, diagnostics_options, err_console, fail, make_config, resolve_device,
                            writable_output)
from kbv.demo import DEMO_TRIALS


def _problem_and_candidate(problem: Path, candidate: Path, json_out: Optional[Path]):
    """The problem and candidate files read, and ``--json`` checked writable; exits 2 naming the
    file and the fault otherwise."""
    from kbv.intake.candidates import CandidateError, load_candidate
    from kbv.intake.problems import ProblemError, load_problem

    try:
        pref = load_problem(problem)
    except ProblemError as exc:
        fail(f"problem {exc}")
    try:
        cref = load_candidate(candidate)
    except CandidateError as exc:
        fail(f"candidate {exc}")
    if json_out is not None:
        if json_out.resolve() in (Path(pref.path).resolve(), Path(cref.path).resolve()):
            fail(f"--json {json_out}: is the problem or candidate file itself; name another file")
        writable_output(json_out, "--json")
    return pref, cref


def _hidden_test_file(pref, given: Optional[Path]) -> Optional[str]:
    """The KernelBench-Verified hidden test file of problem ``pref``: ``given`` (a
    ``<pid>_hidden.py`` file, or a ``hidden_tests`` folder holding ``level<L>/<pid>_hidden.py``),
    else the one found as ``kbv run`` finds it (a ``hidden_tests`` folder in or beside the folder
    of the problem's ``levelN`` folder), else None. A ``given`` that holds none, and a folder with
    two files for one problem, exit 2."""
    from kbv.intake.layout import LayoutError

    try:
        return _find_hidden_test_file(pref, given)
    except LayoutError as exc:
        fail(f"--hidden-tests {exc}" if given is not None else f"hidden tests: {exc}")


def _find_hidden_test_file(pref, given: Optional[Path]) -> Optional[str]:
    from kbv.intake.layout import discover_hidden_tests, find_hidden_tests_root, hidden_test_identity

    key = (pref.level, pref.problem_id)
    if given is not None:
        if given.is_file():
            other = hidden_test_identity(given)
            # a KernelBench-Verified file names its problem: another problem's sets would fail the
            # reference, or pass with shapes the problem never takes
            if None not in key and any(m is not None and m != k for m, k in zip(other, key)):
                fail(f"--hidden-tests {given}: is the hidden test file of level{other[0] or '?'}/{other[1]}, not of "
                     f"{pref.path} (level{pref.level}/{pref.problem_id})")
            return str(given.resolve())
        if not given.is_dir():
            fail(f"--hidden-tests {given}: no such file or folder")
        if None in key:
            fail(f"--hidden-tests {given}: {pref.path} is not a levelN/<id>_Name.py problem, so no file of the "
                 "folder is its own: give its <id>_hidden.py file itself")
        found = discover_hidden_tests(given).get(key)
        if found is None:
            fail(f"--hidden-tests {given}: holds no level{pref.level}/{pref.problem_id}_hidden.py for {pref.path}")
        return str(found)
    if None in key:
        return None
    root = Path(pref.path).resolve().parent.parent
    where = find_hidden_tests_root(root, root.parent)
    found = discover_hidden_tests(where).get(key) if where else None
    return str(found) if found else None


def _evaluate(pref, cref, config, dev: str, status: str, hidden_tests: Optional[str] = None):
    """One verification in an evaluator of its own, under a console status line; a broken problem
    exits 2, kbv's own failure 3."""
    from kbv.batch.annotate import name_baselines, speedup_intervals
    from kbv.batch.evaluator import EvaluationError, Evaluator
    from kbv.intake.problems import ProblemError

    with console.status(status):
        try:
            with Evaluator(dev) as ev:
                verdict = ev.evaluate(pref, cref, config, hidden_tests=hidden_tests)
            # what a batch's stored record carries too: each speedup's 95 % interval, the baselines' flags
            return speedup_intervals(name_baselines(verdict))
        except ProblemError as exc:  # the problem's own code failed in the reference worker
            fail(f"problem {exc}")
        except EvaluationError as exc:
            fail(f"internal error: {exc}", code=3)


def eval_cmd(
    problem: Path = typer.Argument(..., help="KernelBench-format problem file (Model, get_inputs, get_init_inputs)."),
    candidate: Path = typer.Argument(..., help="Candidate file defining ModelNew."),
    device: Device = typer.Option(Device.auto, help="Where to run: cpu, cuda, or auto (cuda when available)."),
    precision: Precision = typer.Option(Precision.fp32, help="dtype of models and floating-point inputs."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the full verdict record here."),
    seeds: Optional[int] = typer.Option(None, min=1, metavar="N", help=SEEDS_HELP),
    trials: int = typer.Option(30, min=1, metavar="N", help="Timed calls per subject (a slow subject gets fewer: rounds after the first are cut to 2 s of calls each, never below 3)."),
    warmup: int = typer.Option(5, min=0, metavar="N", help="Untimed calls before each timing round."),
    timeout: Optional[float] = typer.Option(None, min=1.0, metavar="S", help="Seconds allowed per forward call (default 120)."),
    policy: Policy = typer.Option(Policy.kbv, help=POLICY_HELP),
    secret_shapes: Optional[int] = typer.Option(None, "--secret-shapes", min=0, max=8, metavar="N", help=SHAPES_HELP),
    sanitize: Optional[str] = typer.Option(None, "--sanitize", metavar="memcheck,racecheck", help=SANITIZE_HELP),
    profile: bool = typer.Option(False, "--profile", help=PROFILE_HELP),
    hidden_tests: Optional[Path] = typer.Option(None, "--hidden-tests", help="KernelBench-Verified hidden test "
                                                "file (<pid>_hidden.py) or hidden_tests folder; its "
                                                "get_hidden_inputs() sets are checked as HT1, HT2, ... (default: "
                                                "looked for beside the problems, as kbv run does)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show the whole build log and traceback of a "
                                 "COMPILE_ERROR or RUNTIME_ERROR (default: the compiler's first errors, or the "
                                 "exception and its last frames)."),
) -> None:
    """Verify one candidate against one problem: correctness (nominal, D1–D4 and kbv's secret
    randomised distributions, against a float64 oracle), speed vs eager-fp32 and eager-tf32, and
    peak memory. Warns when the problem is flagged by vetting."""
    from kbv.console import print_verdict

    pref, cref = _problem_and_candidate(problem, candidate, json_out)
    dev = resolve_device(device)
    tools, ncu = diagnostics_options(dev, sanitize, profile)
    config = make_config(dev, precision.value, seeds, trials, warmup, timeout, policy.value, secret_shapes, tools, ncu)
    ht = _hidden_test_file(pref, hidden_tests)
    if ht is not None:  # a broken file stops here, before anything runs, not under a verdict
        from kbv.intake.problems import ProblemError, vet_hidden_test

        try:
            vet_hidden_test(ht)
        except ProblemError as exc:
            fail(f"--hidden-tests {exc}")
        console.print(f"hidden test file: {ht} (its sets are checked as HT1, HT2, ...)", highlight=False,
                          markup=False, soft_wrap=True)
    verdict = _evaluate(pref, cref, config, dev, f"verifying {candidate.name} against {problem.name} on {dev}...", ht)
    _write_record(json_out, verdict)  # before any output: a reader that closes it early (| head) loses nothing
    print_verdict(verdict, console, verbose=verbose)
    _warn_if_flagged(pref, verdict)
    note = cuda_on_cpu_note(verdict.status.value, verdict.candidate.backend, dev)
    if note:
        err_console.print(f"kbv: note: {note}", highlight=False, soft_wrap=True, markup=False)
    if json_out is not None:
        console.print(f"verdict record written to {json_out}")
    if verdict.evidence.get("hidden_tests_error"):  # the verdict stands without them; the file given is bad
        fail(f"hidden tests not checked: {verdict.evidence['hidden_tests_error']} (the verdict above is "
             "without them)")


def profile_cmd(
    problem: Path = typer.Argument(..., help="KernelBench-format problem file (Model, get_inputs, get_init_inputs)."),
    candidate: Path = typer.Argument(..., help="Candidate file defining ModelNew."),
    device: Device = typer.Option(Device.auto, help="cuda, or auto (cuda when available); on cpu there is nothing to profile."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the full verdict record here."),
) -> None:
    """Nsight Compute figures of the candidate's kernels beside the reference's: duration, SM and
    DRAM throughput, achieved occupancy, registers, shared memory and the top stall reasons. Each
    side's forward runs twice under ncu in kbv's sandbox and the second call is profiled; the
    candidate's whole verification comes with them (as kbv eval --profile). On cpu there is
    nothing to profile: it says so on stderr, writes nothing and exits 0."""
    from kbv.console import print_diagnostics, print_status_line

    pref, cref = _problem_and_candidate(problem, candidate, json_out)
    dev = resolve_device(device)
    if dev == "cpu":
        err_console.print("kbv profile: not applicable on cpu (Nsight Compute profiles CUDA kernels); nothing run, "
                          "nothing written", highlight=False)
        raise typer.Exit(0)
    config = make_config(dev, "fp32", None, 30, 5, None, "kbv", None, (), True)
    verdict = _evaluate(pref, cref, config, dev, f"profiling {candidate.name} and {problem.name} under ncu...")
    _write_record(json_out, verdict)
    print_status_line(verdict, console)
    print_diagnostics(verdict, console)
    if json_out is not None:
        console.print(f"verdict record written to {json_out}")


def _write_record(json_out: Optional[Path], verdict) -> None:
    """``--json``'s verdict record, written as soon as the verdict exists."""
    from kbv.model.records import to_json

    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(to_json(verdict) + "\n")


def cuda_on_cpu_note(status: str, backend: str, device: str) -> str | None:
    """What to say under a CUDA candidate that failed to build on cpu (its error is the toolchain's,
    e.g. "CUDA_HOME environment variable is not set"), else None."""
    if status == "COMPILE_ERROR" and backend == "cuda" and device == "cpu":
        return "the candidate builds CUDA code and the device is cpu: verify it with --device cuda on a GPU host"
    return None


def _warn_if_flagged(pref, verdict) -> None:
    """Warn (stderr) about vetting findings: this evaluation's own and a cached ``kbv vet`` report's."""
    from kbv.reference.vetting import cached_report

    lines = list(verdict.problem_flags)
    cached = cached_report(pref, verdict.config.precision)
    if cached is not None:
        # a flag this evaluation raised itself is said once, in its own words
        own = {line.split(":", 1)[0].strip() for line in lines}
        lines += [f"{r} (kbv vet)" for r in cached.reasons if r.split(":", 1)[0].strip() not in own]
    if lines:
        err_console.print(f"kbv: warning: {pref.path} is flagged by vetting and is left out of aggregate "
                          "metrics by default:", highlight=False, soft_wrap=True, markup=False)
        for line in lines:
            err_console.print(f"  {line}", highlight=False, soft_wrap=True, markup=False)


def vet_cmd(
    target: Path = typer.Argument(..., help="A problem file, or a folder of them (levelN/ or a KernelBench checkout)."),
    device: Device = typer.Option(Device.auto, help="Where to run: cpu, cuda, or auto (cuda when available)."),
    precision: Precision = typer.Option(Precision.fp32, help="dtype of models and floating-point inputs."),
    rounds: int = typer.Option(2, "--rounds", min=1, metavar="N", help="Rounds of fresh secret seeds (each: nominal, D1-D4, "
                               "randomised)."),
    old_seeds: Optional[int] = typer.Option(None, "--seeds", min=1, metavar="N", hidden=True,
                                            help="Deprecated name of --rounds (--seeds means input sets elsewhere)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write every vetting report (a JSON list) here."),
    store: Optional[Path] = typer.Option(None, help="Record flagged problems as exclusions in this batch store."),
    timeout: Optional[float] = typer.Option(None, min=1.0, metavar="S", help="Seconds allowed per forward call (default 120)."),
) -> None:
    """Vet problems: flag stochastic references (dropout in training mode), outputs constant across
    all distributions and seeds, outputs inside the tolerance (all-zeros would pass), and references
    that fail; list per distribution where the reference raises or is non-finite. Flagged problems
    are excluded from aggregate metrics by default (--store records the reasons)."""
    import json as _json

    from kbv.console import print_vetting
    from kbv.batch.evaluator import EvaluationError, Evaluator
    from kbv.intake.layout import LayoutError, vet_problems
    from kbv.intake.problems import ProblemError
    from kbv.model.records import to_dict
    from kbv.reference.vetting import save_report

    if old_seeds is not None:
        err_console.print("kbv: warning: vet --seeds is deprecated, use --rounds (--seeds counts input sets "
                          "in eval and run)", highlight=False, markup=False, soft_wrap=True)
        rounds = old_seeds
    try:  # a broken file is named and counted, the rest vetted, as kbv run does
        scan = vet_problems(target)
    except LayoutError as exc:
        fail(str(exc))
    problems, broken = list(scan.problems), [str(e) for e in scan.errors]
    for b in broken:
        err_console.print(f"kbv: error: {b}", highlight=False, soft_wrap=True, markup=False)
    if not problems:
        if broken:
            raise typer.Exit(2)
        fail(f"{target}: no problem files (<id>_<Name>.py) found")
    dev = resolve_device(device)
    config = make_config(dev, precision.value, 1, 1, 0, timeout)
    reports = []
    with Evaluator(dev) as ev:
        for p in problems:
            with console.status(f"vetting {p.path} on {dev}..."):
                try:
                    rep = ev.vet(p, config, seeds=rounds)
                except ProblemError as exc:
                    broken.append(str(exc))
                    err_console.print(f"kbv: error: {exc}", highlight=False, soft_wrap=True, markup=False)
                    continue
                except EvaluationError as exc:
                    fail(f"internal error: {exc}", code=3)
            save_report(rep)
            reports.append(rep)
            print_vetting(rep, console)
    flagged = [r for r in reports if r.flagged]
    console.print(f"{len(reports)} problem(s) vetted: {len(flagged)} flagged, {len(broken)} broken")
    if store is not None:
        from kbv.batch.store import open_store

        with open_store(store) as st:
            for r in flagged:
                for reason in r.reasons:
                    st.exclude_problem(r.problem, f"kbv vet: {reason}")
        console.print(f"exclusions recorded in {store}")
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(_json.dumps([to_dict(r) for r in reports], indent=2, allow_nan=False) + "\n")
        console.print(f"vetting reports written to {json_out}")
    if broken:
        raise typer.Exit(2)  # each broken file was named above, with its fault
    if flagged:
        raise typer.Exit(1)  # a script can stop on a flagged problem (README: exit codes)


def demo_cmd(
    device: Device = typer.Option(Device.auto, help="cpu, cuda, or auto (cuda when available)."),
    json_dir: Optional[Path] = typer.Option(None, help="Also write each verdict record to this folder."),
    trials: int = typer.Option(DEMO_TRIALS, min=1, metavar="N", help="Timed calls per subject (a slow subject gets fewer: rounds after the first are cut to 2 s of calls each, never below 3)."),
    precision: Precision = typer.Option(Precision.fp32, help="dtype of models and floating-point inputs."),
    policy: Policy = typer.Option(Policy.kbv, help=POLICY_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Print every case's full verdict."),
) -> None:
    """Evaluate the built-in problems and example candidates (honest and hacked) and show the
    protocol's effect: nominal (FP32 baseline, nominal inputs) vs verified (TF32 baseline, D1–D4 and
    randomised inputs, the fp64-oracle policy, the integrity checks)."""
    from kbv.demo import run_demo

    dev = resolve_device(device)
    code = run_demo(dev, console, json_dir=json_dir, trials=trials, precision=precision.value,
                    policy=policy.value, verbose=verbose)
    raise typer.Exit(code)
