"""Diagnostics a kernel author asks for (cuda only): compute-sanitizer over the candidate's forward
(``--sanitize``) and Nsight Compute's figures of its kernels beside the reference's (``--profile``).

Each runs in a process of its own under the tool (:mod:`kbv.processes.tool_run`), in kbv's sandbox,
on one input set of the problem's own ``get_inputs()`` under a fresh seed: nothing of the judging
(reference outputs, the other sets' seeds) is in it. The stage runs after the correctness sets,
for the problem's own sizes only (not again for each declared workload).

* **sanitize**: one run per tool, two forward calls each (the first builds and tunes, the second
  runs as the timed calls do). What the reports mean: :mod:`kbv.checks.sanitizer_rules`. A memcheck
  report makes the verification INCORRECT (``Outcome.WRONG``); the run's cost is in the evidence.
* **profile**: the candidate and the reference, two calls each, the second one inside the NVTX range
  :data:`kbv.sandbox.tool_target.PROFILED_RANGE`, the only one ncu profiles
  (:mod:`kbv.checks.ncu_report`). Figures only: nothing of them changes the status.

A tool that is missing, fails or times out is kbv's failure: a WARNING ``sanitize:not-run``, or
``evidence["ncu"]["error"]``, never the candidate's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from kbv.checks import ncu_report
from kbv.checks import sanitizer_rules as sr
from kbv.intake.candidates import build_dir
from kbv.pipeline.context import Context
from kbv.pipeline.outcome import Outcome, Stop
from kbv.processes.tool_run import ToolRunResult, run_tool
from kbv.reference import inputs as inp
from kbv.sandbox.tool_target import PROFILED_RANGE

#: seconds one tool run may take, build and both calls included (kbv choice: memcheck slows a kernel
#: 10-100x, and a Triton candidate builds again in the tool's process).
TOOL_TIMEOUT_S = 600.0
#: forward calls per tool run (module doc).
CALLS = 2
#: compute-sanitizer's options: its report in a log file kbv reads, at most this many reports.
SANITIZER_OPTIONS = ("--log-file", "{log}", "--print-limit", "100", "--error-exitcode", "0")
#: the target's environment under compute-sanitizer: every tensor its own cudaMalloc, so an access
#: past a tensor's end is outside an allocation (torch's caching allocator carves tensors out of
#: 2-20 MiB segments, where such an access lands in valid memory and memcheck sees nothing).
SANITIZER_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
#: ncu's options: CSV of the raw metrics of :data:`kbv.checks.ncu_report.SECTIONS`, the launches of
#: the NVTX range only, at most 100 of them.
NCU_OPTIONS = ("--csv", "--page", "raw", "--log-file", "{log}", "--nvtx", "--nvtx-include", f"{PROFILED_RANGE}/",
               "--launch-count", "100", *(a for s in ncu_report.SECTIONS for a in ("--section", s)))


def tool_path(name: str) -> str | None:
    """``name`` (``compute-sanitizer``, ``ncu``) on PATH, or in the CUDA toolkit's ``bin``."""
    found = shutil.which(name)
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.access(os.path.join(root, "bin", name), os.X_OK):
            return os.path.join(root, "bin", name)
    return None


class Diagnostics:
    """The sanitizer and profiler steps (module doc)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._ref_dir: str | None = None  #: the reference's toolchain caches during a profile

    def _reference_builds(self) -> str:
        if self._ref_dir is None:
            self._ref_dir = tempfile.mkdtemp(prefix="kbv-ref-tool-")
        return self._ref_dir

    def _applies(self) -> bool:
        c = self.ctx.config
        if (c.sanitize or c.ncu_profile) and c.device != "cuda":
            self.ctx.state.evidence["diagnostics"] = f"--sanitize and --profile: not applicable on {c.device}"
            return False
        return (bool(c.sanitize) or c.ncu_profile) and self.ctx.rp.source_text is None

    def _run(self, command: list[str], module_path: str, class_name: str,
             extra_env: dict[str, str] | None = None, has_report=None) -> ToolRunResult:
        """One tool run (:func:`kbv.processes.tool_run.run_tool`) with the target at a uid of its own;
        again at kbv's uid when ``has_report(result)`` says the first left no report (a tool that
        does not run across uids): ``result.own_uid`` tells which ran."""
        first = self._run_once(command, module_path, class_name, extra_env, True)
        if has_report is None or has_report(first) or first.timed_out:
            return first
        return self._run_once(command, module_path, class_name, extra_env, False)

    def _run_once(self, command: list[str], module_path: str, class_name: str,
                  extra_env: dict[str, str] | None, own_uid: bool) -> ToolRunResult:
        ctx = self.ctx
        args = inp.to_device(inp.draw(ctx.rp.module.get_inputs, inp.secret_seed(), "cpu"), "cpu", ctx.config.precision)
        mine = class_name == "ModelNew"
        name = f"kbv_{'candidate' if mine else 'reference'}_{Path(module_path).stem[:40]}"
        # the reference's caches in a directory of its own, not the candidate's (which it can write)
        builds = build_dir(ctx.candidate, ctx.config.device) if mine else Path(self._reference_builds())
        return run_tool(command, device=ctx.config.device, build_dir=builds,
                        module_path=module_path, module_name=name.replace("-", "_").replace(".", "_"),
                        class_name=class_name, init_args=list(ctx.rp.init_args), init_seed=ctx.config.init_seed,
                        precision=ctx.config.precision, inputs=args, calls=CALLS, timeout_s=TOOL_TIMEOUT_S,
                        extra_env=extra_env, own_uid=own_uid)

    def _diagnose(self, already_wrong: bool) -> None:
        """Run what the config asks for. ``already_wrong``: a set failed; a memcheck report is then
        recorded, not raised again.

        Raises:
            Stop: a memcheck report (WRONG), unless ``already_wrong``.
        """
        if not self._applies():
            return
        try:
            if self.ctx.config.sanitize:
                self._sanitize(already_wrong)
            if self.ctx.config.ncu_profile:
                self._profile()
        finally:
            if self._ref_dir is not None:
                shutil.rmtree(self._ref_dir, ignore_errors=True)
                self._ref_dir = None

    def _sanitize(self, already_wrong: bool) -> None:
        ctx = self.ctx
        exe = tool_path("compute-sanitizer")
        evidence: dict = {}
        wrong = None
        for tool in ctx.config.sanitize:
            t0 = time.perf_counter()
            if exe is None:
                run = sr.SanitizerRun(tool, failed="compute-sanitizer not found (PATH, CUDA_HOME/bin)")
                result = None
            else:
                try:
                    result = self._run([exe, "--tool", tool, *SANITIZER_OPTIONS], ctx.candidate.path, "ModelNew",
                                       SANITIZER_ENV, has_report=lambda r: "SUMMARY" in r.report)
                except OSError as exc:
                    run, result = sr.SanitizerRun(tool, failed=f"compute-sanitizer not started: {exc}"), None
                else:
                    run = sr.parse_report(tool, result.report)
                    if result.timed_out:
                        run = sr.SanitizerRun(tool, run.reports, None,
                                              f"timed out after {TOOL_TIMEOUT_S:.0f} s" if not run.reports else None)
            for f in sr.sanitizer_findings(run, bool(result and result.target_raised)):
                ctx._add(f)
            evidence[tool] = {"reports": [r.describe() for r in run.reports[:20]], "count": len(run.reports),
                              "summary_count": run.summary_count, "failed": run.failed, "notes": list(run.notes),
                              "seconds": round(time.perf_counter() - t0, 2),
                              "target_raised": bool(result and result.target_raised),
                              "own_uid": bool(result and result.own_uid)}
            if sr.is_memory_error(run) and wrong is None:
                wrong = run
        ctx.state.evidence["sanitize"] = evidence
        if wrong is not None and not already_wrong:
            raise Stop(Outcome.WRONG, f"{ctx.name}: compute-sanitizer memcheck: {wrong.reports[0].describe()}"
                       + (f" (+{len(wrong.reports) - 1} more)" if len(wrong.reports) > 1 else ""))

    def _profile(self) -> None:
        ctx = self.ctx
        exe = tool_path("ncu")
        t0 = time.perf_counter()
        out: dict = {}
        if exe is None:
            out["error"] = "ncu not found (PATH, CUDA_HOME/bin)"
        else:
            for side, path, cls in (("candidate", ctx.candidate.path, "ModelNew"), ("reference", ctx.rp.ref.path, "Model")):
                try:
                    result = self._run([exe, *NCU_OPTIONS], path, cls, has_report=lambda r: '"ID"' in r.report)
                except OSError as exc:
                    out["error"] = f"ncu not started: {exc}"
                    break
                kernels = ncu_report.parse_csv(result.report)
                out[side] = {**ncu_report.summary(kernels), "kernels": [k.as_dict() for k in kernels[:20]],
                             "own_uid": result.own_uid}
                if not kernels:
                    out[side]["error"] = ("timed out" if result.timed_out else
                                          "no kernel profiled: " + (result.report.strip().splitlines() or ["no output"])[-1][:300])
        out["seconds"] = round(time.perf_counter() - t0, 2)
        ctx.state.evidence["ncu"] = out


__all__ = ["Diagnostics", "tool_path", "TOOL_TIMEOUT_S"]
