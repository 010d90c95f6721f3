"""A CUDA tool's run over one forward (kbv.processes.tool_run, kbv.sandbox.tool_target) on cpu, with
``sh`` standing in for the tool: the target's sandbox, its environment, its exit codes, its time
limit, and what it cannot reach."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import torch

from kbv.processes.tool_run import run_tool

pytestmark = pytest.mark.e2e  # each case starts a sandboxed target process

#: a tool that writes a one-line report to its log and runs the target (as compute-sanitizer does).
SH_TOOL = ["sh", "-c", 'echo "========= ERROR SUMMARY: 0 errors" > {log}; exec "$@"', "tool"]


def _run(tmp_path, body: str, **kw):
    cand = tmp_path / "cand.py"
    cand.write_text("import os, signal, time, torch\nclass ModelNew(torch.nn.Module):\n"
                    "    def forward(self, x):\n" + "".join(f"        {line}\n" for line in body.splitlines())
                    + "        return torch.relu(x)\n")
    args = dict(device="cpu", build_dir=Path(tempfile.mkdtemp(dir=tmp_path)), module_path=str(cand),
                module_name="kbv_tool_test_cand", class_name="ModelNew", init_args=(), init_seed=42,
                precision="fp32", inputs=[torch.randn(4, 8)], calls=2, timeout_s=60)
    args.update(kw)
    return run_tool(SH_TOOL, **args)


def test_the_target_runs_every_call_and_the_report_comes_back(tmp_path):
    r = _run(tmp_path, "print('called', tuple(x.shape))")
    assert r.returncode == 0 and not r.timed_out and not r.target_raised
    assert r.report == "========= ERROR SUMMARY: 0 errors\n"
    assert r.target_output.count("called (4, 8)") == 2 and "kbv-tool-target: done" in r.target_output


def test_a_candidate_that_raises_exits_3_with_its_traceback(tmp_path):
    r = _run(tmp_path, "raise ValueError('mine')")
    assert r.target_raised and "ValueError: mine" in r.target_output


def test_nothing_of_kbvs_environment_reaches_the_target(tmp_path, monkeypatch):
    monkeypatch.setenv("KBV_TEST_SECRET_TOKEN", "s3cr3t-value")
    r = _run(tmp_path, "print('environ', open('/proc/self/environ', 'rb').read().count(b's3cr3t'), "
                       "'s3cr3t' in str(dict(os.environ)))")
    assert "environ 0 False" in r.target_output, r.target_output


@pytest.mark.skipif(os.geteuid() != 0, reason="a uid of the target's own needs root")
def test_the_target_cannot_signal_the_tool_or_kbv(tmp_path):
    """At a uid of its own the target's kill() of its parent (the tool's host process) and of kbv's
    process fails: the tool's report survives."""
    body = (f"for p in (os.getppid(), {os.getpid()}):\n"
            "    try:\n        os.kill(p, signal.SIGKILL); print('killed', p)\n"
            "    except OSError as e:\n        print('refused', p, e.errno)")
    r = _run(tmp_path, body)
    assert r.own_uid and r.returncode == 0, r
    assert r.target_output.count("refused") == 4 and "killed" not in r.target_output, r.target_output


def test_a_run_past_its_time_is_killed_with_everything_it_started(tmp_path):
    r = _run(tmp_path, "import subprocess; subprocess.Popen(['sleep', '300']); time.sleep(300)", timeout_s=5)
    assert r.timed_out and r.returncode is None and r.seconds < 30
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == b"sleep\x00300\x00"]


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""
