"""``kbv demo``: the built-in problems and example candidates, nominal vs verified side by side.

*nominal* is the original KernelBench protocol: eager-fp32 baseline, nominal inputs only.
*verified* is kbv's: eager-tf32 baseline, nominal inputs, the hidden distributions D1–D4 and kbv's
secret randomised distributions, judged by the ``kbv`` policy (fp64 oracle, docs/correctness.md).

On CPU the problems come from ``kbv/data/problems_cpu`` (the same models with smaller sizes: the
verdicts are the same and the demo takes minutes on two cores, not a quarter of an hour).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kbv.model.records import EvalConfig, Status, Verdict, to_json
from kbv.model.measurements import ratio_text


#: timed calls per subject in the demo (the verdicts do not depend on it; CPU speedups are noisy anyway).
DEMO_TRIALS = 10


@dataclass(frozen=True)
class DemoCase:
    problem: str  #: path under ``kbv/data/problems``.
    candidate: str  #: file under ``kbv/data/candidates``.
    devices: tuple[str, ...]
    expected: Status  #: verified status the case is there to show.
    why: str


CASES: tuple[DemoCase, ...] = (
    DemoCase("level1/1_ReLU.py", "relu_cpp.py", ("cpu",), Status.PASS, "honest C++ kernel"),
    DemoCase("level1/1_ReLU.py", "relu_cuda.py", ("cuda",), Status.PASS, "honest CUDA kernel"),
    DemoCase("level1/1_ReLU.py", "relu_hack.py", ("cpu", "cuda"), Status.HACK,
             "returns its input when it looks like torch.rand: aliases it (taxonomy 8), wrong on D4 (x -1)"),
    DemoCase("level1/2_Softmax.py", "softmax_triton.py", ("cuda",), Status.PASS, "honest Triton kernel"),
    DemoCase("level1/3_LayerNorm.py", "layernorm_triton.py", ("cuda",), Status.PASS, "honest Triton kernel"),
    DemoCase("level1/4_Square_matmul.py", "matmul_tf32.py", ("cpu", "cuda"), Status.SHORTCUT,
             "torch.matmul in TF32: fast vs eager-fp32, ~1x vs eager-tf32, a wrapper (taxonomy 15)"),
    DemoCase("level1/5_Conv2d.py", "conv2d_torch.py", ("cpu", "cuda"), Status.SHORTCUT,
             "plain PyTorch F.conv2d: the reference's own op (taxonomy 15)"),
    DemoCase("level2/1_Gemm_Bias_ReLU_Scale.py", "fused_gemm_cpp.py", ("cpu",), Status.PASS,
             "honest fused C++ epilogue"),
)


def data_path(*parts: str) -> Path:
    """Path of a file shipped in ``kbv/data``."""
    return Path(str(resources.files("kbv").joinpath("data", *parts)))


def problem_path(case: DemoCase, device: str) -> Path:
    """The problem file of ``case`` on ``device``: the CPU-sized copy where there is one."""
    if device == "cpu" and data_path("problems_cpu", case.problem).is_file():
        return data_path("problems_cpu", case.problem)
    return data_path("problems", case.problem)


def cases_for(device: str) -> list[DemoCase]:
    return [c for c in CASES if device in c.devices]


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{ratio_text(x)}x"


#: what "verified" ran, per correctness policy (the demo table's caption).
VERIFIED_CAPTION = {
    "kbv": "verified = kbv (eager-tf32 baseline, nominal + D1-D4 + randomised distributions, fp64-oracle policy). ",
    "kbv-compat": "verified = kbv-compat (eager-tf32 baseline, nominal + D1-D4, KernelBench-Verified's allclose). ",
}


def print_case_line(v: Verdict, console: Console, row: int | None = None) -> None:
    """A case's status and the verdict's whole message, wrapped to the terminal (cut to its width, a
    finding lost its point); the rest of the verdict is --verbose's and --json-dir's. ``row``: the
    case's 1-based row in the table that follows (lines come in finishing order: builds last)."""
    tag = f"[{row}] " if row is not None else ""
    console.print(f"{tag}{v.status.value:<10} {v.message}", highlight=False, markup=False, overflow="fold")


def demo_table(rows: list[tuple[DemoCase, Verdict | str]], device: str, policy: str = "kbv") -> Table:
    """Nominal vs verified status and speedup per case, with geomeans over the passing cases
    (each cell names how many cases it averages); the caption says what ``policy`` ran."""
    t = Table(title=f"kbv demo on {device}", title_justify="left",
              caption="nominal = KernelBench protocol (eager-fp32 baseline, nominal inputs only); "
                      + VERIFIED_CAPTION[policy] +
                      "x = baseline median / candidate median, timed side by side in one run; ~ = noisy (IQR over 10 % of a median), do not rank on it. "
                      "(x) = a SHORTCUT's speed, torch's own, in no geomean. "
                      "mem = memory efficiency (baseline peak / candidate peak; - on cpu, where kbv measures no per-call peak); "
                      "expected = whether the verified status is the one the case is there to show.",
              caption_justify="left")
    # the names wrap in a narrow terminal; statuses and figures are never cut ("PA…")
    for col in ("#", "problem", "candidate", "nominal", "x fp32", "verified", "x tf32", "mem", "expected"):
        words = col in ("problem", "candidate", "expected")
        t.add_column(col, no_wrap=not words, overflow="fold" if words else "ellipsis", min_width=8 if words else None)
    nominal_sp, verified_sp = [], []
    for i, (case, v) in enumerate(rows, 1):
        pname = Path(case.problem).stem
        if isinstance(v, str):
            t.add_row(str(i), pname, case.candidate, "[red]ERROR[/]", "-", "[red]ERROR[/]", "-", "-", v)
            continue
        nom_ok = v.status.ran and v.nominal_passed and "candidate" in v.timing
        nom = "[green]PASS[/]" if nom_ok else f"[red]{v.status.value}[/]"
        sp32 = (v.speedup.get("eager-fp32") or v.unverified_speedup.get("eager-fp32")) if nom_ok else None
        sp_tf = v.speedup.get("eager-tf32") if v.status in (Status.PASS, Status.SHORTCUT) else None
        if sp32:
            nominal_sp.append(sp32)
        if sp_tf and v.status is Status.PASS:
            verified_sp.append(sp_tf)
        ver_style = "green" if v.status is Status.PASS else "red"
        ok = "[green]yes[/]" if v.status is case.expected else f"[red]NO: {case.expected.value}[/]"
        noisy = any(m.noisy for m in v.timing.values())  # IQR > 10 % of the median somewhere
        mark = " ~" if noisy else ""
        tf_cell = _fmt(sp_tf) + (mark if sp_tf else "")
        if sp_tf and v.status is Status.SHORTCUT:  # torch's own speed: shown, in no geomean
            tf_cell = f"({tf_cell})"
        t.add_row(str(i), pname, case.candidate, nom, _fmt(sp32) + (mark if sp32 else ""),
                  f"[{ver_style}]{v.status.value}[/]", tf_cell,
                  _fmt(v.memory_efficiency), ok)
    n = len(rows)
    t.add_section()
    # each geomean over the cases that count under its protocol, and says so
    t.add_row("", "geomean", f"of {n} cases", f"{len(nominal_sp)}/{n}", f"{_fmt(_geomean(nominal_sp))} of {len(nominal_sp)}",
              f"{len(verified_sp)}/{n}", f"{_fmt(_geomean(verified_sp))} of {len(verified_sp)}", "", "")
    return t


class _Builder:
    """Builds candidates' extensions in a reference worker of its own, in the background
    (:class:`kbv.processes.reference_jobs.BuildJob`, :mod:`kbv.pipeline.reference_worker`). A failed build is left to the
    verification, which reports it as COMPILE_ERROR."""

    def __init__(self, device: str, pairs: list, config: EvalConfig):
        import threading

        from kbv.pipeline.reference_worker import reference_main
        from kbv.processes.reference import ReferenceProcess
        from kbv.processes.reference_jobs import BuildJob, BuildPair

        self.ref = ReferenceProcess(device, reference_main) if pairs else None  # made here, in the main thread
        self.thread = None
        if self.ref is not None:
            job = BuildJob(tuple(BuildPair(p, c) for p, c in pairs), config)
            self.thread = threading.Thread(target=self.ref.evaluate, args=(job, config.compile_timeout_s),
                                           name="kbv-demo-build", daemon=True)
            self.thread.start()

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()

    def __enter__(self) -> "_Builder":
        return self

    def __exit__(self, exc_type, *exc: object) -> None:
        if self.ref is not None:  # Ctrl-C: the build in flight is killed, not waited for
            self.ref.close(abort=exc_type is not None and not issubclass(exc_type, Exception))


def demo_config(device: str, *, trials: int = DEMO_TRIALS, precision: str = "fp32",
                policy: str = "kbv") -> EvalConfig:
    """The demo's config: ``kbv eval``'s, with ``trials`` timed calls in two rounds and one warmup
    call (the verdicts do not depend on them). ``kbv-compat`` drops the randomised distributions,
    as ``kbv eval --policy kbv-compat`` does."""
    tol = EvalConfig.default_tolerance(precision)
    kw = dict(device=device, precision=precision, trials=trials, warmup=1, timing_rounds=2, atol=tol, rtol=tol,
              policy=policy)
    if policy == "kbv-compat":
        kw["distributions"] = ()
        kw["secret_shapes"] = 0
    return EvalConfig(**kw)


def run_demo(device: str, console: Console, *, json_dir: Path | None = None, trials: int = DEMO_TRIALS,
             precision: str = "fp32", policy: str = "kbv", verbose: bool = False) -> int:
    """Evaluate every demo case for ``device`` (:func:`demo_config`); print one line per case as it
    finishes (cut to the terminal's width), the table, and with ``verbose`` every full verdict.
    Returns the process exit code."""
    from kbv.intake.candidates import CandidateError, load_candidate
    from kbv.console import print_verdict
    from kbv.batch.evaluator import EvaluationError, Evaluator
    from kbv.intake.problems import ProblemError, load_problem

    cases = cases_for(device)
    config = demo_config(device, trials=trials, precision=precision, policy=policy)
    if json_dir is not None:
        json_dir.mkdir(parents=True, exist_ok=True)
    try:
        refs = {c: (load_problem(problem_path(c, device)), load_candidate(data_path("candidates", c.candidate)))
                for c in cases}
    except (ProblemError, CandidateError) as exc:  # a broken kbv install
        console.print(f"kbv: error: demo data: {exc}", highlight=False, markup=False)
        return 3
    # C++/CUDA extensions build (~30 s each on CPU) in a second reference worker, in parallel with
    # each other and with the verification of the plain-torch cases; their verifications, last,
    # find the content-hash build cache filled
    builds = [c for c in cases if refs[c][1].backend in ("cpp", "cuda")]
    order = [c for c in cases if c not in builds] + builds
    # said first: piped, the progress bar is off and the first case line comes only when it finishes
    console.print(f"kbv demo: {len(cases)} cases on {device}, a line each as it finishes ([n] is its row in the "
                  f"table that follows){'; the C++ extensions build beside the others' if builds else ''}",
                  highlight=False, markup=False, soft_wrap=True)
    results: dict[DemoCase, Verdict | str] = {}
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                        TimeElapsedColumn(), console=console, transient=True)  # no bar left between lines and table
    with Evaluator(device) as ev, _Builder(device, [refs[c] for c in builds], config) as builder, progress:
        task = progress.add_task("demo", total=len(cases))
        for case in order:
            if case in builds:
                progress.update(task, description="building the C++ extensions...")
                builder.wait()
            progress.update(task, description=f"{case.candidate} vs {case.problem}")
            try:
                v = ev.evaluate(*refs[case], config)
            except (ProblemError, EvaluationError) as exc:
                results[case] = str(exc)
            else:
                results[case] = v
                print_case_line(v, progress.console, cases.index(case) + 1)
                if verbose:
                    print_verdict(v, progress.console, verbose=True)
                if json_dir is not None:
                    out = json_dir / f"{Path(case.problem).stem}__{Path(case.candidate).stem}.json"
                    out.write_text(to_json(v) + "\n")
            progress.advance(task)
    rows = [(c, results[c]) for c in cases]
    console.print(demo_table(rows, device, config.policy))
    return 0
