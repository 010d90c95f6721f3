"""A Triton candidate's first call made ahead in the build pool (kbv.pipeline.warm_call)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from kbv.intake.problems import load_problem
from kbv.model.records import EvalConfig
from kbv.pipeline.warm_call import compiles_at_first_call, first_call_ahead
from kbv.reference.build import build_reference
from kbv.sandbox import protocol

RELU = Path(__file__).resolve().parents[2] / "src/kbv/data/problems_cpu/level1/1_ReLU.py"


def test_only_triton_on_cuda_compiles_at_its_first_call():
    assert compiles_at_first_call("triton", "cuda")
    assert not compiles_at_first_call("triton", "cpu")  # the interpreter compiles nothing
    assert not any(compiles_at_first_call(b, "cuda") for b in ("torch", "cuda", "cpp"))


@dataclass
class _Worker:
    """What first_call_ahead asks of a candidate worker: the request it sent, the reply it gets."""

    reply: object = None
    raises: Exception | None = None
    sent: list | None = None
    timeout: float | None = None

    def send(self, request, *, phase):
        self.sent = (self.sent or []) + [request]

    def receive(self, *, phase, timeout):
        self.timeout = timeout
        if self.raises is not None:
            raise self.raises
        return self.reply


@pytest.fixture(scope="module")
def relu():
    return build_reference(load_problem(RELU), EvalConfig(device="cpu"))


def test_the_calls_get_fresh_draws_at_the_problems_shape_then_at_a_decoy_without_probes(relu):
    w = _Worker(reply=protocol.Outputs(tensors=(torch.zeros(1),), structure="tensor"))
    assert first_call_ahead(w, relu, EvalConfig(device="cpu", call_timeout_s=5.0)) == "ok; decoy: ok"
    assert [type(r) for r in w.sent] == [protocol.Forward] * 2 and not any(r.probes for r in w.sent)
    (x,), (d,) = w.sent[0].inputs, w.sent[1].inputs
    assert x.shape == (16, 16384) and x.dtype == torch.float32 and x.is_shared()
    # the decoy: each size constant drawn as a secret shape's (odd, a quarter to a half plus one)
    assert 5 <= d.shape[0] <= 9 and 4097 <= d.shape[1] <= 8193 and d.shape[0] % 2 and d.shape[1] % 2
    assert w.timeout == 5.0  # never longer than a checked call may take
    w = _Worker(reply=protocol.Outputs(tensors=(torch.zeros(1),), structure="tensor"))
    assert first_call_ahead(w, relu, EvalConfig(device="cpu"), decoy=False) == "ok" and len(w.sent) == 1


def test_decoy_shapes_are_drawn_afresh_each_time(relu):
    from kbv.pipeline.warm_call import decoy_inputs

    shapes = {tuple(decoy_inputs(relu)[0].shape) for _ in range(6)}
    assert len(shapes) > 1


def test_inputs_over_the_bound_are_not_drawn(relu):
    w = _Worker()
    assert first_call_ahead(w, relu, EvalConfig(device="cpu"), max_bytes=16 * 16384 * 4 - 1).startswith("skipped")
    assert w.sent is None


def test_a_failed_call_is_reported_not_raised(relu):
    cfg = EvalConfig(device="cpu")
    assert first_call_ahead(_Worker(raises=TimeoutError("no reply in 60 s")), relu, cfg) == \
        "TimeoutError: no reply in 60 s"
    raised = protocol.Failed(phase="forward", error_type="RuntimeError", message="boom")
    assert first_call_ahead(_Worker(reply=raised), relu, cfg) == "RuntimeError: boom"


CANDIDATE = '''
import os
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        # the build directory is the one place besides its workdir a worker writes to
        with open(os.path.join(os.environ["TRITON_HOME"], "called"), "a") as f:
            f.write(f"{tuple(x.shape)}\\n")
        return torch.relu(x)
'''


@pytest.mark.e2e  # a real candidate worker
def test_a_real_worker_is_called_at_the_problems_shape_then_at_a_decoy(relu, tmp_path):
    from kbv.processes.candidate import CandidateProcess
    from kbv.sandbox.numeric_flags import flags_for

    cand = tmp_path / "cand.py"
    cand.write_text(CANDIDATE)
    build = Path(tempfile.mkdtemp(dir=tmp_path))
    with CandidateProcess(device="cpu", build_dir=build) as w:
        w.send(protocol.Load(str(cand), "kbv_warm_test", (), 0, "cpu", "fp32", flags_for("eager-fp32")), phase="load")
        assert isinstance(w.receive(phase="load", timeout=300), protocol.Loaded)
        assert first_call_ahead(w, relu, EvalConfig(device="cpu")) == "ok; decoy: ok"
    first, second = (build / "called").read_text().splitlines()
    assert first == "(16, 16384)" and second != first
    assert os.listdir(build)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_triton_candidates_build_on_cuda_leaves_its_kernel_compiled(tmp_path):
    """The pool's build of a Triton candidate (kbv.pipeline.reference_worker._build) calls it once:
    its build directory's Triton cache then holds the compiled kernel the job's workers load."""
    from kbv.intake.candidates import build_dir, load_candidate
    from kbv.pipeline.reference_worker import _build
    from kbv.processes.reference_jobs import BuildPair

    root = Path(__file__).resolve().parents[2]
    src = (root / "src/kbv/data/candidates/softmax_triton.py").read_text()
    path = tmp_path / "softmax_triton_copy.py"
    path.write_text(src + f"\n# {tmp_path.name}: a build directory of its own\n")
    cand = load_candidate(path)
    assert cand.backend == "triton"
    problem = load_problem(root / "src/kbv/data/problems/level1/2_Softmax.py")
    assert _build((BuildPair(problem, cand, None),), EvalConfig(device="cuda")) == {cand.path: "ok"}
    assert list((build_dir(cand, "cuda") / "triton").rglob("*.cubin"))


def test_autotuning_the_calls_ahead_kept_on_disk_is_removed_and_earlier_choices_kept(tmp_path):
    """Regression (red-team helper, 2026-12-06): Triton's autotuner asked to keep its choice on disk
    would keep the one benchmarked in the pool (idle priority, maybe stopped mid-benchmark) for the
    job's timed calls. What the calls ahead wrote or changed is removed; what was there is kept."""
    import time

    from kbv.pipeline.warm_call import autotune_files, drop_new_autotune

    cache = tmp_path / "triton" / "ABC"
    cache.mkdir(parents=True)
    kept, changed = cache / "k1.autotune.json", cache / "k2.autotune.json"
    kept.write_text("{}")
    changed.write_text("{}")
    (cache / "kernel.cubin").write_bytes(b"\0")
    before = autotune_files(tmp_path)
    time.sleep(0.01)
    changed.write_text('{"configs": 1}')
    os.utime(changed, (time.time() + 5, time.time() + 5))
    new = tmp_path / "triton" / "DEF" / "k3.autotune.json"
    new.parent.mkdir()
    new.write_text("{}")
    assert sorted(drop_new_autotune(tmp_path, before)) == sorted([str(changed), str(new)])
    assert kept.exists() and not changed.exists() and not new.exists() and (cache / "kernel.cubin").exists()
