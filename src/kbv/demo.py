"""``kbv demo``: the built-in problems and example candidates, nominal vs verified side by side.

*nominal* is the original KernelBench protocol: eager-fp32 baseline, nominal inputs only.
*verified* is kbv's: eager-tf32 baseline, nominal inputs, the hidden distributions D1–D4 and kbv's
secret randomised distributions, judged by the ``kbv`` policy (fp64 oracle, docs/correctness.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kbv.records import EvalConfig, Status, Verdict, to_json


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


def cases_for(device: str) -> list[DemoCase]:
    return [c for c in CASES if device in c.devices]


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def demo_table(rows: list[tuple[DemoCase, Verdict | str]], device: str) -> Table:
    """Nominal vs verified status and speedup per case, with geomeans over the passing cases."""
    t = Table(title=f"kbv demo on {device}", title_justify="left",
              caption="nominal = KernelBench protocol (eager-fp32 baseline, nominal inputs only); "
                      "verified = kbv (eager-tf32 baseline, nominal + D1-D4 + randomised distributions, fp64-oracle policy). "
                      "x = baseline median / candidate median, timed side by side in one run; ~ = noisy (IQR over 10 % of a median), do not rank on it.",
              caption_justify="left")
    for col in ("problem", "candidate", "nominal", "x fp32", "verified", "x tf32", "mem", "expected"):
        t.add_column(col, no_wrap=True)
    nominal_sp, verified_sp = [], []
    for case, v in rows:
        pname = Path(case.problem).stem
        if isinstance(v, str):
            t.add_row(pname, case.candidate, "[red]ERROR[/]", "-", "[red]ERROR[/]", "-", "-", v)
            continue
        nom_ok = v.status.ran and v.nominal_passed and "candidate" in v.timing
        nom = "[green]PASS[/]" if nom_ok else f"[red]{v.status.value}[/]"
        sp32 = (v.speedup.get("eager-fp32") or v.unverified_speedup.get("eager-fp32")) if nom_ok else None
        sp_tf = v.speedup.get("eager-tf32") if v.status is Status.PASS else None
        if sp32:
            nominal_sp.append(sp32)
        if sp_tf:
            verified_sp.append(sp_tf)
        ver_style = "green" if v.status is Status.PASS else "red"
        ok = "[green]yes[/]" if v.status is case.expected else f"[red]NO: {case.expected.value}[/]"
        noisy = any(m.noisy for m in v.timing.values())  # IQR > 10 % of the median somewhere
        mark = " ~" if noisy else ""
        t.add_row(pname, case.candidate, nom, _fmt(sp32) + (mark if sp32 else ""),
                  f"[{ver_style}]{v.status.value}[/]", _fmt(sp_tf) + (mark if sp_tf else ""),
                  _fmt(v.memory_efficiency), ok)
    n = len(rows)
    t.add_section()
    t.add_row("geomean", f"{n} cases", f"{len(nominal_sp)}/{n}", _fmt(_geomean(nominal_sp)),
              f"{len(verified_sp)}/{n}", _fmt(_geomean(verified_sp)), "", "")
    return t


def run_demo(device: str, console: Console, *, json_dir: Path | None = None, trials: int = 30) -> int:
    """Evaluate every demo case for ``device``; print the table. Returns the process exit code."""
    from kbv.candidates import load_candidate
    from kbv.console import print_verdict  # noqa: F401  (kept for --verbose users of the API)
    from kbv.orchestrator import EvaluationError, Evaluator
    from kbv.problems import ProblemError, load_problem

    cases = cases_for(device)
    rows: list[tuple[DemoCase, Verdict | str]] = []
    tol = EvalConfig.default_tolerance("fp32")
    config = EvalConfig(device=device, trials=trials, atol=tol, rtol=tol)
    if json_dir is not None:
        json_dir.mkdir(parents=True, exist_ok=True)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                        TimeElapsedColumn(), console=console)
    with Evaluator(device) as ev, progress:
        task = progress.add_task("demo", total=len(cases))
        for case in cases:
            progress.update(task, description=f"{case.candidate} vs {case.problem}")
            try:
                pref = load_problem(data_path("problems", case.problem))
                cref = load_candidate(data_path("candidates", case.candidate))
                v = ev.evaluate(pref, cref, config)
            except (ProblemError, EvaluationError) as exc:
                rows.append((case, str(exc)))
            else:
                rows.append((case, v))
                progress.console.print(f"{v.status.value:<10} {v.message}", highlight=False, markup=False)
                if json_dir is not None:
                    out = json_dir / f"{Path(case.problem).stem}__{Path(case.candidate).stem}.json"
                    out.write_text(to_json(v) + "\n")
            progress.advance(task)
    console.print(demo_table(rows, device))
    for case, v in rows:
        if not isinstance(v, str) and v.status is not Status.PASS:
            console.print(v.message, highlight=False, markup=False, soft_wrap=True)
    return 0
