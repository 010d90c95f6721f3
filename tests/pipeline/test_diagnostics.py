"""The diagnostics stage (kbv.pipeline.diagnostics) through its real tool run on cpu: a stand-in for
compute-sanitizer (a shell script that writes a canned report to ``--log-file`` and runs the target,
as the tool does) over the real sandboxed target process (kbv.sandbox.tool_target)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from conftest import problem
from kbv.intake.candidates import load_candidate
from kbv.model.records import Environment, EvalConfig
from kbv.pipeline.context import Context
from kbv.pipeline.diagnostics import Diagnostics
from kbv.pipeline.outcome import Outcome, Stop
from kbv.reference.build import build_reference

pytestmark = pytest.mark.e2e  # each case starts a sandboxed target process

FAKE_TOOL = """#!/bin/sh
log=""
while [ $# -gt 0 ]; do
  case "$1" in
    --log-file) log="$2"; shift 2;;
    --tool|--print-limit|--error-exitcode) shift 2;;
    *) break;;
  esac
done
cat {report} > "$log"
exec "$@"
"""

OOB = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at _relu+0x70 in relu.py:12
=========     Address 0x7f0000000000 is out of bounds
========= ERROR SUMMARY: 1 error
"""


def _stage(tmp_path, monkeypatch, report: str, candidate: str = "candidates/relu_torch.py", tools=("memcheck",)):
    (tmp_path / "report.txt").write_text(report)
    tool = tmp_path / "bin" / "compute-sanitizer"
    tool.parent.mkdir()
    tool.write_text(FAKE_TOOL.format(report=tmp_path / "report.txt"))
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    config = EvalConfig(device="cpu", sanitize=tools)
    rp = build_reference(problem("level1/1_Small_ReLU.py"), config)
    data = Path(__file__).resolve().parents[1] / "data"
    ctx = Context(rp, load_candidate(data / candidate), config, Environment("0", "3", "2", "cpu"))
    return ctx, Diagnostics(ctx)


def test_a_memcheck_report_makes_the_verification_wrong(tmp_path, monkeypatch):
    ctx, stage = _stage(tmp_path, monkeypatch, OOB)
    with pytest.raises(Stop) as stop:
        stage._sanitize(already_wrong=False)
    assert stop.value.outcome is Outcome.WRONG
    assert "Invalid __global__ read of size 4 bytes in _relu at relu.py:12" in stop.value.message
    (f,) = [f for f in ctx.state.findings if f.check == "sanitize:memcheck"]
    ev = ctx.state.evidence["sanitize"]["memcheck"]
    assert ev["count"] == 1 and ev["failed"] is None and not ev["target_raised"] and ev["seconds"] > 0


def test_a_candidate_wrong_already_keeps_the_report_without_a_second_stop(tmp_path, monkeypatch):
    ctx, stage = _stage(tmp_path, monkeypatch, OOB)
    stage._sanitize(already_wrong=True)
    assert [f.check for f in ctx.state.findings] == ["sanitize:memcheck"]


def test_a_clean_report_and_a_race_leave_the_status_alone(tmp_path, monkeypatch):
    race = ("========= Error: Race reported between Write access at k+0x10 in a.cu:3\n"
            "=========     and Read access at k+0x20 in a.cu:4 [32 hazards]\n"
            "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n")
    ctx, stage = _stage(tmp_path, monkeypatch, race, tools=("racecheck",))
    stage._sanitize(already_wrong=False)
    assert [f.check for f in ctx.state.findings] == ["sanitize:racecheck"]


def test_a_target_that_raises_is_said_and_a_report_missing_is_kbvs_failure(tmp_path, monkeypatch):
    """No summary in the log (the tool did not finish): ``sanitize:not-run``, no Stop; the target's
    own exception is recorded."""
    ctx, stage = _stage(tmp_path, monkeypatch, "", candidate="candidates/relu_raises.py")
    stage._sanitize(already_wrong=False)
    assert [f.check for f in ctx.state.findings] == ["sanitize:not-run"]
    assert ctx.state.evidence["sanitize"]["memcheck"]["target_raised"]


def test_the_stage_is_not_applicable_on_cpu(tmp_path, monkeypatch):
    ctx, stage = _stage(tmp_path, monkeypatch, OOB)
    stage._diagnose(already_wrong=False)  # the config asks, the device is cpu: nothing runs
    assert not ctx.state.findings and "not applicable on cpu" in ctx.state.evidence["diagnostics"]


def test_a_memcheck_report_folds_into_an_incorrect_verdict_with_every_set_passed(tmp_path, monkeypatch):
    """The stage's Stop(WRONG) becomes a verdict: INCORRECT though every input set passed (on the H200
    of 2026-12-05 the verdict's own check refused it, "INCORRECT needs a failed input set", and the
    verification ended EVAL_ERROR)."""
    from kbv.pipeline.judging import Judging
    from kbv.pipeline.verdict import VerdictStage
    from kbv.model.records import InputKind, InputSetResult, Status

    ctx, stage = _stage(tmp_path, monkeypatch, OOB)
    with pytest.raises(Stop) as stop:
        stage._sanitize(already_wrong=False)
    ctx.state.input_sets.append(InputSetResult(name="nominal-0", kind=InputKind.NOMINAL, transform="get_inputs()",
                                               seed=1, passed=True, policy_passed={"kbv": True}))
    v = VerdictStage(ctx, Judging(ctx))._verdict(stop.value.outcome, stop.value.message, None)
    assert v.status is Status.INCORRECT and "compute-sanitizer memcheck" in v.message
    assert "sanitize:memcheck" in {f.check for f in v.findings}
