"""Rich rendering of verdicts for the terminal (the orchestrator's display; no computation here)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from kbv.records import Status, Verdict

STATUS_STYLE = {
    Status.PASS: "bold green",
    Status.INCORRECT: "bold red",
    Status.HACK: "bold magenta",
    Status.SHORTCUT: "bold yellow",
    Status.COMPILE_ERROR: "red",
    Status.RUNTIME_ERROR: "red",
    Status.TIMEOUT: "red",
    Status.CRASH: "red",
}


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def fmt_err(x: float | None) -> str:
    return "-" if x is None else f"{x:.2e}"


def status_text(status: Status) -> str:
    return f"[{STATUS_STYLE[status]}]{status.value}[/]"


def print_verdict(v: Verdict, console: Console | None = None) -> None:
    """Verdict, each input set, times, speedups and memory."""
    c = console or Console()
    c.print(f"{status_text(v.status)}  {v.message}", highlight=False, soft_wrap=True)
    c.print(f"problem {v.problem.path}  candidate {v.candidate.path} ({v.candidate.backend})  "
            f"device {v.environment.device_name or v.config.device}  precision {v.config.precision}",
            highlight=False, soft_wrap=True)
    if v.input_sets:
        t = Table(title="Correctness", title_justify="left")
        for col in ("input set", "kind", "transform", "result", "max abs err", "max rel err"):
            t.add_column(col, no_wrap=True)
        notes = []
        for r in v.input_sets:
            res = "dropped" if r.dropped else ("[green]pass[/]" if r.passed else "[red]FAIL[/]")
            note = r.drop_reason if r.dropped else r.fault
            if note:
                notes.append(f"{r.name}: {note}")
            t.add_row(r.name, r.kind.value, r.transform, res, fmt_err(r.max_abs_error), fmt_err(r.max_rel_error))
        c.print(t)
        for n in notes:
            c.print(f"  {n}", highlight=False, markup=False, soft_wrap=True)
    if v.timing:
        t = Table(title=f"Timing ({next(iter(v.timing.values())).clock}, ms)", title_justify="left")
        for col in ("subject", "median", "IQR", "min", "trials", "speedup of candidate"):
            t.add_column(col)
        for label, m in v.timing.items():
            noisy = " [yellow](noisy)[/]" if m.noisy else ""
            if label == "candidate":
                sp_text = ""
            elif label in v.speedup:
                sp_text = f"{v.speedup[label]:.2f}x"
            elif label in v.unverified_speedup:
                sp_text = f"[dim]{v.unverified_speedup[label]:.2f}x (not credited: {v.status.value})[/]"
            else:
                sp_text = "-"
            t.add_row(label, f"{m.median_ms:.4f}{noisy}", f"{m.iqr_ms:.4f}", f"{m.min_ms:.4f}", str(m.trials), sp_text)
        c.print(t)
    if v.memory:
        t = Table(title="Peak memory of one forward call", title_justify="left")
        for col in ("subject", "peak", "forward extra", "model", "inputs"):
            t.add_column(col)
        for label, m in v.memory.items():
            t.add_row(label, fmt_bytes(m.peak_bytes), fmt_bytes(m.forward_peak_bytes), fmt_bytes(m.model_bytes),
                      fmt_bytes(m.input_bytes))
        c.print(t)
        if v.memory_efficiency:
            c.print(f"memory efficiency (reference peak / candidate peak): {v.memory_efficiency:.2f}x")
    elif v.timing:
        c.print("peak memory: not applicable on cpu")
    if v.weight_mismatches:
        c.print(f"[yellow]parameters differing from Model's after identical seeding:[/] "
                f"{', '.join(v.weight_mismatches)}")
    if v.flag_changes:
        c.print(f"[yellow]candidate changed global numeric flags (reset after every call):[/] "
                f"{'; '.join(v.flag_changes)}")
