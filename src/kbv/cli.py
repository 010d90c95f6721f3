"""Command-line interface (typer). Exit codes: 0 the command ran (whatever the verdicts),
2 bad usage or a bad problem/candidate file (one line on stderr naming the file and the fault),
3 kbv itself failed."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from kbv import __version__

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="kbv — KernelBench-Verified: honest verdicts on generated GPU kernels.")
# Piped output (CI logs, files) gets a fixed width wide enough for the tables instead of 80 columns.
console = Console() if Console().is_terminal else Console(width=140)
err_console = Console(stderr=True)


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class Precision(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"


def fail(message: str, code: int = 2) -> None:
    err_console.print(f"kbv: error: {message}", highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(code)


def resolve_device(device: Device) -> str:
    import torch

    if device is Device.auto:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device is Device.cuda and not torch.cuda.is_available():
        fail("--device cuda: CUDA is not available on this machine (torch "
             f"{torch.__version__}); use --device cpu")
    return device.value


def make_config(device: str, precision: str, seeds: int, trials: int, warmup: int, timeout: float | None):
    from kbv.records import EvalConfig

    tol = EvalConfig.default_tolerance(precision)
    kw = dict(device=device, precision=precision, nominal_seeds=seeds, trials=trials, warmup=warmup,
              atol=tol, rtol=tol)
    if timeout is not None:
        kw.update(call_timeout_s=timeout, timing_timeout_s=max(timeout, 60.0))
    try:
        return EvalConfig(**kw)
    except ValueError as exc:
        fail(str(exc))


@app.command("eval")
def eval_cmd(
    problem: Path = typer.Argument(..., help="KernelBench-format problem file (Model, get_inputs, get_init_inputs)."),
    candidate: Path = typer.Argument(..., help="Candidate file defining ModelNew."),
    device: Device = typer.Option(Device.auto, help="Where to run: cpu, cuda, or auto (cuda when available)."),
    precision: Precision = typer.Option(Precision.fp32, help="dtype of models and floating-point inputs."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the full verdict record here."),
    seeds: int = typer.Option(3, min=1, help="Nominal input sets (fresh secret seeds)."),
    trials: int = typer.Option(30, min=1, help="Timed calls per subject."),
    warmup: int = typer.Option(5, min=0, help="Untimed calls before each timing round."),
    timeout: Optional[float] = typer.Option(None, min=1.0, help="Seconds allowed per forward call (default 120)."),
) -> None:
    """Verify one candidate against one problem: correctness (nominal + D1–D4), speed vs eager-fp32
    and eager-tf32, and peak memory."""
    from kbv.candidates import CandidateError, load_candidate
    from kbv.console import print_verdict
    from kbv.orchestrator import EvaluationError, Evaluator
    from kbv.problems import ProblemError, load_problem
    from kbv.records import to_json

    try:
        pref = load_problem(problem)
        cref = load_candidate(candidate)
    except (ProblemError, CandidateError) as exc:
        fail(str(exc))
    dev = resolve_device(device)
    config = make_config(dev, precision.value, seeds, trials, warmup, timeout)
    with console.status(f"verifying {candidate.name} against {problem.name} on {dev}..."):
        try:
            with Evaluator(dev) as ev:
                verdict = ev.evaluate(pref, cref, config)
        except ProblemError as exc:
            fail(str(exc))
        except EvaluationError as exc:
            fail(f"internal error: {exc}", code=3)
    print_verdict(verdict, console)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(to_json(verdict) + "\n")
        console.print(f"verdict record written to {json_out}")


@app.command("demo")
def demo_cmd(
    device: Device = typer.Option(Device.auto, help="cpu, cuda, or auto (cuda when available)."),
    json_dir: Optional[Path] = typer.Option(None, help="Also write each verdict record to this folder."),
    trials: int = typer.Option(30, min=1, help="Timed calls per subject."),
) -> None:
    """Evaluate the built-in problems and example candidates (honest and hacked) and show the
    protocol's effect: nominal (FP32 baseline, nominal inputs) vs verified (TF32 baseline, D1–D4)."""
    from kbv.demo import run_demo

    dev = resolve_device(device)
    code = run_demo(dev, console, json_dir=json_dir, trials=trials)
    raise typer.Exit(code)


@app.command("version")
def version_cmd() -> None:
    """Print kbv's version."""
    console.print(f"kbv {__version__}")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("kbv: interrupted")
        sys.exit(130)
