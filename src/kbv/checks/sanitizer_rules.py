"""compute-sanitizer's report on the candidate's forward (``--sanitize``, :mod:`kbv.pipeline.diagnostics`):
the report read into records, and what each record means for the verdict.

The text is compute-sanitizer's own ``--log-file`` (written by the tool's host process, which runs at
kbv's side of the sandbox; the candidate's process cannot write it). Its shape (CUDA 12-13)::

    ========= COMPUTE-SANITIZER
    ========= Invalid __global__ read of size 4 bytes
    =========     at _tile_kernel+0x1b0 in /scratch/kernel.cu:42
    =========     by thread (31,0,0) in block (2047,0,0)
    =========     Address 0x7f2c4a000000 is out of bounds
    =========     and is 1 bytes after the nearest allocation at 0x7f2c48000000 of size 8388608 bytes
    ...
    ========= ERROR SUMMARY: 1 error

A report is a header line (``=========`` and one space) followed by its detail lines (more
indentation). What each tool's reports mean (kbv choices):

* **memcheck**: an access outside any allocation, misaligned, or a hardware exception: the kernel
  reads or writes memory it does not own. Its outputs may still match on kbv's inputs (the stray
  read landed in valid memory); it is a correctness failure all the same: the verification is
  INCORRECT (``sanitize:memcheck``, a WARNING that names the kernel, the access and the source line).
  memcheck's leak reports (``--leak-check``) are not asked for: the caching allocator holds memory
  past the process's end by design.
* **racecheck**: a shared-memory hazard between threads of a block: a WARNING (``sanitize:racecheck``);
  the outputs are what kbv judges, and a hazard the hardware orders today may not be ordered on the
  next GPU.
* **initcheck**: a read of device memory nothing wrote: a WARNING (``sanitize:initcheck``; reading the
  padding of an uninitialised output is common and often harmless).
* **synccheck**: a barrier not every thread reaches, or an invalid one: a WARNING (``sanitize:synccheck``).

A run that produced no report (the tool failed to start, timed out, or was killed) is kbv's failure,
never the candidate's: a WARNING ``sanitize:not-run`` saying why, and nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kbv.model.config import SANITIZER_TOOLS as TOOLS
from kbv.model.findings import finding
from kbv.model.records import Finding, Severity
#: reports listed in one finding's detail.
LISTED = 3
#: a report header: the marker, one space, then the text (detail lines have more spaces).
_HEADER = re.compile(r"^========= (?! )(?P<text>\S.*)$")
_DETAIL = re.compile(r"^=========\s{2,}(?P<text>\S.*)$")
_SUMMARY = re.compile(r"^(?:ERROR|RACECHECK) SUMMARY: (?P<n>\d+) (?:error|hazard)", re.IGNORECASE)
#: ``at <kernel>+0x... in <file>:<line>`` or ``at 0x... in <kernel>(...)`` (the forms compute-sanitizer prints).
_AT_SOURCE = re.compile(r"\bat (?P<kernel>[^\s+]+)\+0x[0-9a-f]+ in (?P<file>[^\s:]+):(?P<line>\d+)")
_AT_KERNEL = re.compile(r"^at (?:0x[0-9a-f]+|[^\s+]+\+0x[0-9a-f]+) in (?P<kernel>.+?)\s*$")
#: the headers that are reports, per tool (compute-sanitizer's manual); any other header is the tool's
#: own note (``Error: process didn't terminate successfully`` when the target exits non-zero, ``Program
#: hit cudaError...`` after a report, warnings) and is kept in :attr:`SanitizerRun.notes`, never a report.
REPORT_HEADERS = {
    "memcheck": re.compile(r"^(Invalid (__global__|__shared__|__local__|__generic__|global|shared|local|generic)? ?"
                           r"(read|write|atomic)|Misaligned |Out-of-range |Warp (Illegal|Misaligned|Out-of-range|"
                           r"Hardware|Assert|Invalid PC)|Illegal (Instruction|Address)|Hardware exception|"
                           r"Malloc/Free error|Invalid PC|Device-side assert|Stack overflow|Cuda barrier error)"),
    "racecheck": re.compile(r"^(Error|Warning): (Race reported|Potential .*hazard)"),
    "initcheck": re.compile(r"^Uninitialized "),
    "synccheck": re.compile(r"^(Barrier error|Invalid arguments|Divergent thread)"),
}
#: headers that say the tool itself failed to run the target.
_TOOL_FAILED = ("Error: Target application terminated before first instrumented API call",
                "Error: No attachable process found", "Internal Sanitizer Error", "Error: Device not supported",
                "Error: Failed to")


@dataclass(frozen=True)
class SanitizerReport:
    """One report: its header (``Invalid __global__ read of size 4 bytes``), the kernel it names,
    the source location when the kernel carries line info (``file:line``), and its detail lines."""

    header: str
    kernel: str | None = None
    source: str | None = None
    details: tuple[str, ...] = ()

    def describe(self) -> str:
        where = f" in {self.kernel}" if self.kernel else ""
        line = f" at {self.source}" if self.source else ""
        address = next((d for d in self.details if d.startswith("Address ")), "")
        return f"{self.header}{where}{line}" + (f" ({address})" if address else "")


@dataclass(frozen=True)
class SanitizerRun:
    """What one tool found: its reports, the summary count it printed (None: no summary, the run
    did not finish), and why there is no report when the tool itself failed (``failed``)."""

    tool: str
    reports: tuple[SanitizerReport, ...] = ()
    summary_count: int | None = None
    failed: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)  #: headers that are not reports (the tool's own)


def parse_report(tool: str, text: str) -> SanitizerRun:
    """``text`` (compute-sanitizer's log, module doc) read into a :class:`SanitizerRun` for ``tool``."""
    reports: list[SanitizerReport] = []
    header: str | None = None
    details: list[str] = []
    summary = None
    failed = None
    notes: list[str] = []
    is_report = REPORT_HEADERS[tool].match

    def close() -> None:
        if header is None:
            return
        kernel = source = None
        for d in (header, *details):
            m = _AT_SOURCE.search(d)
            if m:
                kernel, source = m["kernel"], f"{m['file']}:{m['line']}"
                break
            m = _AT_KERNEL.match(d)
            if m and d is not header:
                kernel = m["kernel"]
                break
        reports.append(SanitizerReport(header, kernel, source, tuple(details)))

    for raw in text.splitlines():
        m = _HEADER.match(raw.rstrip())
        if m:
            close()
            header, details = None, []
            line = m["text"]
            s = _SUMMARY.match(line)
            if s:
                summary = int(s["n"]) + (summary or 0)
            elif line.startswith(_TOOL_FAILED):
                failed = failed or line
            elif is_report(line):
                header = line
            elif line != "COMPUTE-SANITIZER":
                notes.append(line)
            continue
        m = _DETAIL.match(raw.rstrip())
        if m and header is not None:
            details.append(m["text"])
    close()
    return SanitizerRun(tool, tuple(reports), summary, failed, tuple(notes[:20]))


def sanitizer_findings(run: SanitizerRun, target_raised: bool = False) -> list[Finding]:
    """The findings of one tool's run (module doc): one per tool that reported, naming at most
    :data:`LISTED` reports; ``sanitize:not-run`` when the tool produced no report, or when the
    candidate's forward raised under the tool (``target_raised``) before any report: its calls were
    not all checked (a candidate may raise there on purpose; nothing is proved by it)."""
    if run.failed is not None or (run.summary_count is None and not run.reports):
        why = run.failed or "no summary in the tool's log (it did not finish)"
        return [finding("sanitize:not-run", (), Severity.WARNING,
                        f"compute-sanitizer {run.tool} did not check the forward: {why}; kbv's failure, not the candidate's")]
    if not run.reports:
        return [finding("sanitize:not-run", (), Severity.WARNING,
                        f"compute-sanitizer {run.tool}: the candidate's forward raised under the tool (its "
                        "calls there did not all run): not checked")] if target_raised else []
    listed = "; ".join(r.describe() for r in run.reports[:LISTED])
    more = f" (+{len(run.reports) - LISTED} more)" if len(run.reports) > LISTED else ""
    what = {"memcheck": "memory access errors: the kernel touches memory it does not own",
            "racecheck": "shared-memory hazards between threads of a block",
            "initcheck": "reads of device memory nothing wrote",
            "synccheck": "invalid or divergent barriers"}[run.tool]
    return [finding(f"sanitize:{run.tool}", (), Severity.WARNING, f"{len(run.reports)} {what}: {listed}{more}")]


def is_memory_error(run: SanitizerRun) -> bool:
    """Whether ``run`` makes the verification INCORRECT (module doc: memcheck reports only)."""
    return run.tool == "memcheck" and run.failed is None and bool(run.reports)


def parse_tools(text: str) -> tuple[str, ...]:
    """``memcheck,racecheck`` (the ``--sanitize`` option) as a tuple in :data:`TOOLS` order.

    Raises:
        ValueError: an empty list or a name outside :data:`TOOLS`.
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise ValueError(f"--sanitize: unknown tool(s) {', '.join(map(repr, unknown))}; it takes a comma-separated "
                         f"list of {', '.join(TOOLS)}")
    if not names:
        raise ValueError(f"--sanitize takes a comma-separated list of {', '.join(TOOLS)}; got {text!r}")
    return tuple(t for t in TOOLS if t in names)


__all__ = ["TOOLS", "SanitizerReport", "SanitizerRun", "parse_report", "sanitizer_findings", "is_memory_error",
           "parse_tools"]
