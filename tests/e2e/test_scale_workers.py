"""Issue 12 with real workers (e2e): the next job's candidate worker started early (same verdicts,
used by the next job, never killed by the current one's jail), the adaptive stop of the timing
rounds, and a lane's timing flag acknowledged by a build pauser."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbv.batch.runner import plan_batch, run_batch
from kbv.batch.store import Store
from kbv.model.records import EvalConfig

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
PROBLEM = DATA / "problems" / "level1" / "1_Small_ReLU.py"
#: a lean verification (one nominal seed, D1, one randomised set): these tests compare the verdicts and
#: the scheduling of batches, not the breadth of the checks (tests/e2e/test_honest.py, tests/e2e/test_redteam.py)
CONFIG = EvalConfig(device="cpu", nominal_seeds=1, hidden=("D1",), distributions=("normal",), trials=6,
                    timing_rounds=2, warmup=1, call_timeout_s=120)
HONEST = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.clamp_min(x, 0.0)\n"


def _batch(tmp_path: Path, n: int) -> Path:
    probs = tmp_path / "problems" / "level1"
    probs.mkdir(parents=True)
    probs.joinpath(PROBLEM.name).write_text(PROBLEM.read_text())
    run = tmp_path / "runs" / "m"
    run.mkdir(parents=True)
    for s in range(n - 1):
        (run / f"level_1_problem_1_sample_{s}_kernel.py").write_text(HONEST + f"# sample {s}\n")
    (run / f"level_1_problem_1_sample_{n - 1}_kernel.py").write_text((DATA / "candidates" / "relu_raises.py").read_text())
    return tmp_path / "runs"


def test_early_workers_give_the_same_verdicts_and_are_used(tmp_path):
    """Three jobs in one lane with and without early workers: the same status per job; with them,
    every job after the first loads into a worker started during the job before."""
    runs = _batch(tmp_path, 3)
    plan = plan_batch(tmp_path / "problems", [runs], CONFIG)
    out = {}
    for prestart in (False, True):
        with Store(tmp_path / f"{prestart}.db") as st:
            outcome = run_batch(plan, st, prestart=prestart)
            assert not outcome.internal_errors and outcome.lanes == 1 and outcome.lane_busy_s > 0
            out[prestart] = {v.candidate.sample_id: v for v in st.verdicts()}
    assert {k: v.status.value for k, v in out[True].items()} == {k: v.status.value for k, v in out[False].items()} \
        == {0: "PASS", 1: "PASS", 2: "RUNTIME_ERROR"}
    assert [out[True][s].evidence["worker_started_early"] for s in range(3)] == [False, True, True]
    # the secret shape's own worker too (kbv.pipeline.prestart: two workers for the next job)
    assert [out[True][s].evidence["secret_shape"]["worker_started_early"] for s in range(2)] == [False, True]
    assert not any(v.evidence.get("secret_shape", {}).get("worker_started_early") for v in out[False].values())
    assert not any(v.evidence["worker_started_early"] for v in out[False].values())
    assert all(len(v.evidence["kbv_source"]) == 64 for v in out[True].values())
    # every worker, early or not, forked from the lane's zygote (kbv.processes.zygote)
    assert {v.evidence["worker_start"] for d in out.values() for v in d.values()} == {"zygote"}


def test_a_worker_opened_beside_another_outlives_the_first_ones_close(tmp_path):
    """Each jail kills what its own worker started: closing the current job's worker leaves the
    next job's (started while it was open) running and answering."""
    from kbv.processes.candidate import CandidateProcess
    from kbv.sandbox import protocol

    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    first = CandidateProcess(device="cpu", build_dir=tmp_path / "a")
    second = CandidateProcess(device="cpu", build_dir=tmp_path / "b")
    try:
        assert isinstance(first.call(protocol.Ping(), phase="ping", timeout=300), protocol.Pong)
        first.close()
        assert second.proc.is_alive()
        assert isinstance(second.call(protocol.Ping(), phase="ping", timeout=300), protocol.Pong)
    finally:
        first.close()
        second.close()


def _verify(tmp_path: Path, config: EvalConfig, quiet_dir: str | None = None):
    from kbv.batch.evaluator import Evaluator
    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem

    path = tmp_path / "relu_clamp.py"
    path.write_text(HONEST)
    with Evaluator("cpu") as ev:
        return ev.evaluate(load_problem(PROBLEM), load_candidate(path), config, quiet_dir=quiet_dir)


def test_the_adaptive_stop_runs_to_its_cap_or_stops_when_narrow_enough(tmp_path):
    import dataclasses

    from kbv.batch.metrics import speedup_interval

    v = _verify(tmp_path, dataclasses.replace(CONFIG, interval_half_width=1e-6, max_timing_rounds=4))
    assert v.evidence["timing_stop"]["reason"] == "rounds" and v.evidence["timing_stop"]["rounds"] == 4
    assert len(v.evidence["timed_calls_per_round"]) == 4 and v.timing["candidate"].trials == 12
    v = _verify(tmp_path, dataclasses.replace(CONFIG, interval_half_width=0.5))
    stop = v.evidence["timing_stop"]
    assert stop["reason"] in ("interval", "rounds") and 2 <= stop["rounds"] == len(v.evidence["timed_calls_per_round"])
    # the interval judged is the quoted one less its rerun floor (which no further round narrows)
    from kbv.model.intervals import interval_seed, ratio_interval

    base, cand = v.timing["eager-fp32"].times_ms, v.timing["candidate"].times_ms
    jlo, jhi = ratio_interval(base, cand, interval_seed(v.problem.sha256, v.candidate.sha256, "eager-fp32"),
                              blocks=v.evidence["timed_calls_per_round"])
    width = (jhi - jlo) / 2 / v.speedup["eager-fp32"]
    assert width == pytest.approx(stop["half_width"]["eager-fp32"], abs=1e-4)
    assert (width <= 0.5) == (stop["reason"] == "interval")
    lo, hi = speedup_interval(v, "eager-fp32")
    assert lo <= jlo and hi >= jhi
    v = _verify(tmp_path, CONFIG)  # on cpu the default is the planned rounds only
    assert v.evidence["timing_stop"]["reason"] == "fixed" and v.timing["candidate"].trials == 6


def test_a_lane_times_with_the_builds_stopped(tmp_path):
    """A verification given a pauser's directory waits for the pauser's acknowledgement and says
    so; the stand-in build (a busy process) runs again afterwards."""
    from kbv.processes.quiet import BuildPauser

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with BuildPauser(tmp_path / "q", lambda: [busy.pid]) as pauser:
            v = _verify(tmp_path, CONFIG, quiet_dir=str(tmp_path / "q"))
            assert v.evidence["builds_during_timing"] == "stopped"
            assert pauser.pauses >= 1 and pauser.paused_s > 0
        time.sleep(0.2)
        with open(f"/proc/{busy.pid}/stat", "rb") as f:
            assert f.read().rsplit(b")", 1)[1].split()[0] in (b"R", b"S")
    finally:
        busy.kill()
        busy.wait()
