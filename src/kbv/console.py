"""Rich rendering of verdicts for the terminal (the orchestrator's display; no computation here)."""

from __future__ import annotations

import re

from rich.console import Console
from rich.markup import escape
from rich import box
from rich.table import Table

from kbv.model.findings import name_list
from kbv.model.records import Status, Verdict, VettingReport
from kbv.model.measurements import ratio_text

STATUS_STYLE = {
    Status.PASS: "bold green",
    Status.INCORRECT: "bold red",
    Status.HACK: "bold magenta",
    Status.SHORTCUT: "bold yellow",
    Status.COMPILE_ERROR: "red",
    Status.RUNTIME_ERROR: "red",
    Status.TIMEOUT: "red",
    Status.CRASH: "red",
    Status.EVAL_ERROR: "magenta",
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


#: a compiler diagnostic (gcc/clang ``file:line:col: error:``, nvcc ``error:``, ``fatal error:``).
_COMPILER_ERROR = re.compile(r"(^|[\s:])(fatal )?error( [A-Z]?\d+)?:", re.IGNORECASE)
#: statuses whose cause is in the worker's traceback or build log.
_FAILED = (Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.CRASH, Status.TIMEOUT)


def compiler_errors(text: str, *, errors: int = 3, context: int = 2) -> list[str]:
    """The first ``errors`` compiler ``error:`` lines of a build log or exception text, each with
    the ``context`` lines after it (gcc and nvcc print the source line and a caret there); []
    when there is none. Duplicates (the same diagnostic in the traceback and in the log) once."""
    lines = text.splitlines()
    out: list[str] = []
    seen: set[str] = set()
    for i, line in enumerate(lines):
        if not _COMPILER_ERROR.search(line) or line.startswith(("RuntimeError", "Traceback")):
            continue
        key = line.strip()
        if key in seen or "Error building extension" in line or line.lstrip().startswith("subprocess."):
            continue
        seen.add(key)
        out += [line.rstrip()] + [ln.rstrip() for ln in lines[i + 1:i + 1 + context]
                                  if ln.strip() and not _COMPILER_ERROR.search(ln)]
        if len(seen) >= errors:
            break
    return out


#: the lines that join the tracebacks of a chained exception (``raise ... from``, or one raised while
#: another was handled)
_CHAIN = ("The above exception was the direct cause of the following exception:",
          "During handling of the above exception, another exception occurred:")


def _frames_and_text(lines: list[str]) -> tuple[list[list[str]], list[str]]:
    """One traceback's frames (file line and code lines each) and its exception text."""
    starts = [i for i, ln in enumerate(lines) if ln.startswith('  File "')]
    if not starts:
        return [], [ln for ln in lines if ln.strip() and not ln.startswith("Traceback (")]
    blocks = [lines[s:e] for s, e in zip(starts, starts[1:] + [None])]
    last = blocks[-1]
    # the exception text follows the last frame's code lines (they are indented by 4)
    k = next((j for j, ln in enumerate(last[1:], 1) if not ln.startswith("    ")), len(last))
    blocks[-1] = last[:k]
    return blocks, last[k:]


def exception_summary(tb: str, *, frames: int = 3) -> list[str]:
    """The candidate's last ``frames`` frames (file line and code line) of a Python traceback and
    the final exception's line(s); [] for an empty traceback. A chained traceback gives the frames
    of every link and the last link's exception. kbv's own frames and installed packages' are left
    out (``--verbose`` shows them): where the candidate has none, the exception alone."""
    lines = tb.rstrip().splitlines()
    if not lines:
        return []
    links, cur = [], []
    for ln in lines:
        if ln.strip() in _CHAIN:
            links.append(cur)
            cur = []
        else:
            cur.append(ln)
    links.append(cur)
    blocks: list[list[str]] = []
    exc: list[str] = []
    for link in links:
        bs, exc = _frames_and_text(link)
        blocks += bs
    own = [b for b in blocks if "/kbv/" not in b[0] and "site-packages" not in b[0]]
    body = [ln for b in own[-frames:] for ln in b]
    exc = [ln for ln in exc if ln.strip()]
    if len(exc) > 8:  # a long message (a build log): its start and its end
        exc = exc[:4] + ["  ..."] + exc[-3:]
    return body + exc


def failure_details(v: Verdict, *, verbose: bool = False) -> list[str]:
    """What to show below a failed verdict's message: with ``verbose`` the whole traceback and
    worker log; else the compiler's first error lines, or the exception's last frames, or the
    last lines of the log. [] for a verdict that did not fail (or has no evidence)."""
    if v.status not in _FAILED:
        return []
    tb = str(v.evidence.get("traceback") or "")
    log = str(v.evidence.get("log_tail") or "")
    if verbose:
        out = []
        if tb:
            out += ["traceback:", *tb.rstrip().splitlines()]
        # the worker's log repeats a build's output that the exception message already holds
        shown = {ln.strip() for ln in tb.splitlines() if ln.strip()}
        rest = [ln for ln in log.rstrip().splitlines() if ln.strip() and ln.strip() not in shown]
        if rest:
            out += ["worker log (tail, lines not in the traceback):" if tb else "worker log (tail):", *rest]
        return out
    errors = compiler_errors(tb + "\n" + log)
    if errors:
        return ["compiler errors (--verbose for the whole build log):", *errors]
    summary = exception_summary(tb)
    if summary and not all(ln.strip() in (v.message or "") for ln in summary):  # else the status line said it
        return ["exception (--verbose for the whole traceback):", *summary]
    if summary:
        return []
    tail = [ln for ln in log.splitlines() if ln.strip()][-8:]
    return ["worker log, last lines (--verbose for more):", *tail] if tail else []


def print_status_line(v: Verdict, console: Console) -> None:
    """The verdict's status, styled, and its message as plain text (``[...]`` in a message is no markup)."""
    console.print(f"{status_text(v.status)}  {escape(v.message)}", highlight=False, soft_wrap=True)


def print_verdict(v: Verdict, console: Console | None = None, *, verbose: bool = False) -> None:
    """Verdict, each input set, times, speedups and memory; below a failure its cause
    (:func:`failure_details`, all of it with ``verbose``)."""
    c = console or Console()
    print_status_line(v, c)
    if v.problem_flags:  # right under the answer: the verdict may say little about the kernel (newcomer report)
        names = ", ".join(dict.fromkeys(f.split(":", 1)[0].strip() for f in v.problem_flags))
        c.print(f"  the problem is flagged by vetting ({names}): a verdict on it may say little about the kernel, "
                "and it is left out of aggregate metrics", highlight=False, markup=False, soft_wrap=True)
    for line in failure_details(v, verbose=verbose):
        c.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
    c.print(f"problem {v.problem.path}  candidate {v.candidate.path} ({v.candidate.backend})  "
            f"device {v.config.device}{f' ({v.environment.device_name})' if v.environment.device_name else ''}  "
            f"precision {v.config.precision}",
            highlight=False, soft_wrap=True)
    if v.input_sets:
        t = Table(title=f"Correctness (policy {v.config.policy}; err = normalised error vs the fp64 oracle; "
                        "allclose tol = the least atol = rtol that passes)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        # nine columns in 80: no vertical rules, and every column folds rather than cutting to '…'
        for col, width in (("input set", 9), ("kind", 6), ("transform", 6), ("result", 6), ("err", 7),
                           ("budget", 7), ("baseline err", 7), ("allclose tol", 7), ("compat", 4)):
            t.add_column(col, overflow="fold", min_width=width)
        notes = []
        for r in v.input_sets:
            res = "dropped" if r.dropped else ("[green]pass[/]" if r.passed else "[red]FAIL[/]")
            note = r.drop_reason if r.dropped else r.fault
            if note:
                notes.append((r.name, note))
            base = max(r.baseline_errors.values()) if r.baseline_errors else None
            compat = r.policy_passed.get("kbv-compat")
            compat_text = "-" if compat is None else ("pass" if compat else "[red]fail[/]")
            err = "exact" if r.exact else fmt_err(r.oracle_error)  # equal to eager-fp32's: no oracle run
            t.add_row(r.name, r.kind.value, r.transform, res, err, fmt_err(r.error_budget),
                      fmt_err(base), fmt_err(r.allclose_tolerance), compat_text)
        c.print(t)
        if any(r.exact for r in v.input_sets):
            c.print("  exact: the outputs equal the eager-fp32 reference's value for value, which passes every "
                    "policy, so no fp64 oracle ran (no err, budget or baseline err)", highlight=False, soft_wrap=True)
        for n in group_notes(notes):
            c.print(f"  {n}", highlight=False, markup=False, soft_wrap=True)
        pv = v.policy_verdicts
        if any(x is not None for x in pv.values()):
            def yn(x):
                return "-" if x is None else ("[green]pass[/]" if x else "[red]fail[/]")
            sweep = "  ".join(f"{k} {yn(x)}" for k, x in v.tolerance_sweep.items())
            c.print(f"kbv policy (k={v.config.kbv_k:g}, floor {v.config.kbv_floor_eps:g} eps): {yn(pv.get('kbv'))}   "
                    f"kbv-compat (allclose atol=rtol={v.config.atol:g}, nominal + D1-D4): {yn(pv.get('kbv-compat'))}   "
                    f"allclose sweep: {sweep}", highlight=False, soft_wrap=True)
    workloads = [w for w in v.evidence.get("workloads") or () if isinstance(w, dict)]
    if v.timing:
        at = " at the problem's own sizes" if workloads else ""
        t = Table(title=f"Timing{at} ({next(iter(v.timing.values())).clock}, ms)", title_justify="left")
        for col in ("subject", "median", "IQR", "min", "trials", "speedup of candidate"):
            t.add_column(col)
        own = (workloads[0].get("speedup") or {}) if workloads else v.speedup
        cand_noisy = bool(v.timing.get("candidate") and v.timing["candidate"].noisy)
        for label, m in v.timing.items():
            noisy = " [yellow](noisy)[/]" if m.noisy else ""
            if label == "candidate":
                sp_text = ""
            elif label in v.speedup and label in own:
                sp_text = f"{ratio_text(own[label])}x" + (" ~" if m.noisy or cand_noisy else "")
                ci = (v.evidence.get("speedup_interval_95") or {}).get(label) if not workloads else None
                if ci:
                    sp_text += f" (95% {ratio_text(ci[0])}-{ratio_text(ci[1])})"
            elif label in v.unverified_speedup:
                sp_text = f"[dim]{ratio_text(v.unverified_speedup[label])}x (not credited: {v.status.value})[/]"
            else:
                sp_text = "-"
            t.add_row(label, f"{m.median_ms:.4f}{noisy}", f"{m.iqr_ms:.4f}", f"{m.min_ms:.4f}", str(m.trials), sp_text)
        if any(m.noisy for m in v.timing.values()):
            t.caption = "(noisy), ~: an IQR over 10 % of the median, too noisy to rank on"
            t.caption_justify = "left"
        c.print(t)
        if v.evidence.get("tf32_inert") and "eager-tf32" in v.timing:
            c.print("  eager-tf32 is eager-fp32's times: the reference runs no matmul or convolution, which TF32 "
                    "alone changes", highlight=False, soft_wrap=True)
        elif v.evidence.get("tf32_same_bits_cpu") and "eager-tf32" in v.timing:
            c.print("  eager-tf32 is eager-fp32's times: on this CPU the reference gives the same bits under both "
                    "(no TF32 matmul here)", highlight=False, soft_wrap=True)
    if len(workloads) > 1:
        t = Table(title="Declared workloads (the credited speedup is their geometric mean)", title_justify="left")
        labels = list(v.speedup or v.unverified_speedup or (workloads[0].get("speedup") or {}))
        for col in ("workload", "sizes", "status", *(f"vs {b}" for b in labels)):
            t.add_column(col)
        for w in workloads:
            speed = w.get("speedup") or {}
            t.add_row(str(w.get("name")), ", ".join(f"{k}={x}" for k, x in (w.get("sizes") or {}).items()),
                      status_text(Status(w["status"])) if w.get("status") in Status._value2member_map_ else str(w.get("status")),
                      *(f"{ratio_text(speed[b])}x" if isinstance(speed.get(b), (int, float)) else "-" for b in labels))
        if v.speedup:
            t.add_row("geometric mean", "", "", *(f"{ratio_text(v.speedup[b])}x" if b in v.speedup else "-" for b in labels))
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
    if v.weight_mismatches and v.status is Status.INCORRECT:  # a cause only where wrong
        c.print(f"[yellow]parameters differing from Model's after identical seeding:[/] "
                f"{escape(', '.join(v.weight_mismatches))}")
    unmatched = v.evidence.get("weights_unmatched") if isinstance(v.evidence, dict) else None
    if unmatched and not v.weight_mismatches and v.status is Status.INCORRECT:  # a cause only where wrong
        c.print(f"[yellow]Model's parameters that no ModelNew parameter matches by name or value:[/] "
                f"{escape(', '.join(unmatched))}")
    if v.flag_changes:
        c.print(f"[yellow]candidate changed global numeric flags (reset after every call):[/] "
                f"{escape('; '.join(v.flag_changes))}")
    print_diagnostics(v, c)
    if v.findings:
        t = Table(title="Integrity findings (docs/anti-cheat.md)", title_justify="left")
        for col in ("severity", "taxonomy", "detector", "detail"):
            t.add_column(col, overflow="fold")
        style = {"HACK": "bold magenta", "SHORTCUT": "yellow", "WARNING": "dim"}
        for f in v.findings:
            t.add_row(f"[{style[f.severity.value]}]{f.severity.value}[/]", ", ".join(map(str, f.taxonomy)), f.check,
                      f.detail)
        c.print(t)


def _pct(x: object) -> str:
    return f"{x:.1f}" if isinstance(x, (int, float)) else "-"


def _ms(x: object) -> str:
    return f"{x:.4f}" if isinstance(x, (int, float)) else "-"


def print_diagnostics(v: Verdict, c: Console) -> None:
    """What ``--sanitize`` and ``--profile`` found (``evidence["sanitize"]``, ``evidence["ncu"]``):
    a line per sanitizer tool, and Nsight Compute's figures of the candidate's and the reference's
    longest kernel side by side (:mod:`kbv.pipeline.diagnostics`)."""
    for tool, r in (v.evidence.get("sanitize") or {}).items():
        if r.get("failed"):
            text = f"[yellow]not run[/] ({escape(str(r['failed']))})"
        elif r.get("count"):
            text = f"[red]{r['count']} report(s)[/]: {escape(str(r['reports'][0]))}"
        else:
            text = "[green]clean[/]"
        c.print(f"compute-sanitizer {tool}: {text}  ({r.get('seconds', 0):.1f} s)", highlight=False, soft_wrap=True)
    ncu = v.evidence.get("ncu")
    if not ncu:
        return
    if ncu.get("error"):
        c.print(f"[yellow]ncu: {escape(str(ncu['error']))}[/]", highlight=False, soft_wrap=True)
        return
    t = Table(title=f"Nsight Compute: each side's longest kernel of one call ({ncu.get('seconds', 0):.0f} s)",
              title_justify="left")
    for col in ("subject", "kernels", "total ms", "longest kernel", "ms", "SM %", "DRAM %", "occupancy %",
                "regs", "smem", "top stalls"):
        t.add_column(col, overflow="fold")
    for side in ("candidate", "reference"):
        s = ncu.get(side) or {}
        k = s.get("longest") or {}
        if s.get("error") and not k:
            t.add_row(side, "0", "-", escape(str(s["error"])), "-", "-", "-", "-", "-", "-", "-")
            continue
        stalls = ", ".join(f"{n} {x:.1f}" for n, x in k.get("stalls") or ())
        t.add_row(side, str(s.get("launches", 0)), _ms(s.get("total_ms")), escape(str(k.get("name", "-")))[:60],
                  _ms(k.get("duration_ms")), _pct(k.get("sm_pct")), _pct(k.get("dram_pct")), _pct(k.get("occupancy_pct")),
                  str(k.get("registers") if k.get("registers") is not None else "-"),
                  fmt_bytes(k.get("shared_bytes")), stalls or "-")
    c.print(t)


#: a figure in a note (an error, a budget: a decimal point or an exponent); notes that differ only
#: there are alike. Whole numbers (an output's index, a shape) keep notes apart.
_NUMBER = re.compile(r"\d+\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+")


def group_notes(notes: list[tuple[str, str]]) -> list[str]:
    """``(set name, note)`` pairs as lines, one per kind of note naming every set it applies to: a
    wrong output shape fails all 15 sets with the same message, a wrong constant all 17 with the
    same message but its own figures (newcomer report: 17 such lines buried the summary); alike
    notes are printed once, with the first set's figures (every set's are in the table above)."""
    by_kind: dict[str, list[tuple[str, str]]] = {}
    for name, note in notes:
        by_kind.setdefault(_NUMBER.sub("#", note), []).append((name, note))
    out = []
    for items in by_kind.values():
        names = [n for n, _ in items]
        note = items[0][1]
        who = names[0] if len(names) == 1 else f"{len(names)} sets ({name_list(names)})"
        same = all(n == note for _, n in items)
        out.append(f"{who}: {note}" if same else f"{who}: {note} ({names[0]}'s figures; each set's are in the table)")
    return out


def print_vetting(rep: VettingReport, console: Console | None = None) -> None:
    """One problem's vetting: verdict line, findings, and the reference on each input set."""
    c = console or Console()
    head = "[bold red]FLAGGED[/]" if rep.flagged else "[bold green]OK[/]"
    c.print(f"{head}  {rep.problem.path}", highlight=False, soft_wrap=True)
    for f in rep.findings:
        c.print(f"  [red]{f.flag.value}[/]: {escape(f.reason)}", highlight=False, soft_wrap=True)
    t = Table(title_justify="left", show_edge=False)
    for col in ("input set", "kind", "seed", "reference", "output rms", "fp32 err vs fp64", "zeros pass"):
        t.add_column(col, no_wrap=True)
    for r in rep.sets:
        ref = r.status if r.status == "ok" else f"[yellow]{r.status}[/]"
        zp = "-" if r.zeros_pass is None else ("[yellow]yes[/]" if r.zeros_pass else "no")
        rms = "-" if r.output_rms is None else f"{r.output_rms:.3g}"
        t.add_row(r.name, r.kind.value, str(r.seed), ref, rms, fmt_err(r.baseline_error), zp)
    c.print(t)
    for r in rep.sets:
        if r.detail and r.status != "ok":
            c.print(f"  {r.name}: {r.detail}", highlight=False, markup=False, soft_wrap=True)
        if r.oracle_note:
            c.print(f"  {r.name}: {r.oracle_note}", highlight=False, markup=False, soft_wrap=True)
    for n in rep.notes:
        c.print(f"  note: {n}", highlight=False, markup=False, soft_wrap=True)
