"""kbv's own memory (issue 9): one input set held at a time, the float64 oracle in pieces of the
batch where the model is row-separable, the 4·B + 1 GiB bound on a big input, and out-of-memory
failures of kbv's processes reported as EVAL_ERROR, never against the candidate."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kbv.reference.policy import output_errors
from kbv.processes import footprint as fp
from kbv.reference import distributions
from kbv.reference import inputs as inp
from kbv.reference import oracle as orc
from kbv.model.records import EvalConfig, Status

MEMORY = Path(__file__).resolve().parents[1] / "data" / "memory"
HONEST = Path(__file__).resolve().parents[1] / "data" / "honest" / "candidates"


def _lean_config(**kw) -> EvalConfig:
    """Few sets and few timed calls: the memory of one set is what these tests look at."""
    base = dict(device="cpu", nominal_seeds=1, hidden=("D1", "D4"), distributions=("normal",), trials=4,
                timing_rounds=2, warmup=1, call_timeout_s=300, timing_timeout_s=600)
    return EvalConfig(**(base | kw))


# pure units ---------------------------------------------------------------------------------------

def test_memory_errors_are_recognised_in_every_form_torch_raises_them():
    try:
        torch.empty(1 << 45, dtype=torch.uint8)
    except RuntimeError as exc:  # the CPU allocator's failure is a plain RuntimeError
        assert fp.is_memory_error(exc)
    assert fp.is_memory_error(MemoryError()) and fp.is_memory_error(torch.cuda.OutOfMemoryError("x"))
    assert not fp.is_memory_error(RuntimeError("shape mismatch")) and not fp.is_memory_error(ValueError("x"))


def test_check_fits_names_what_is_needed_and_what_is_free():
    fp.check_fits(1 << 20, 1 << 20, torch.device("cpu"))
    with pytest.raises(fp.DoesNotFit, match=r"needs ~\d.* GiB in host memory .* GiB free"):
        fp.check_fits(1 << 46, 1 << 46, torch.device("cpu"))
    assert fp.bound_bytes(1 << 30, 1 << 30) == 9 << 30  # 4 * 2 GiB + 1 GiB


def test_check_fits_on_cpu_needs_room_for_the_outputs_in_the_candidates_dev_shm(monkeypatch):
    """An output whose slot buffer cannot fit the candidate's /dev/shm is kbv's EVAL_ERROR before
    anything runs, never the candidate's RUNTIME_ERROR when the buffer is shared."""
    monkeypatch.setenv("KBV_CANDIDATE_SHM_BYTES", str(64 << 20))
    fp.check_fits(1 << 20, 16 << 20, torch.device("cpu"))  # 3 x 16 MiB + 1 MiB fits 64 MiB
    with pytest.raises(fp.DoesNotFit, match=r"in the candidate's /dev/shm .* quota is 0.1 GiB"):
        fp.check_fits(1 << 20, 32 << 20, torch.device("cpu"))


def test_input_sets_are_made_when_used_and_dropped_after():
    calls = []

    def get_inputs():
        calls.append(1)
        return [torch.rand(4, 4)]

    sets = inp.nominal_sets(get_inputs, 2) + inp.hidden_sets(get_inputs, ["D1", "D4"]) + \
        inp.randomised_sets(get_inputs, ["normal"])
    assert not calls  # nothing drawn until a set is used
    first = sets[0].args[0].clone()
    sets[0].release()
    assert torch.equal(sets[0].args[0], first)  # made again from its seed: the same values
    assert torch.equal(sets[3].args[0], -sets[2].args[0])  # D4 = -D1 of the same draw


def test_randomised_values_are_made_in_chunks_with_the_same_distribution(monkeypatch):
    get_inputs = lambda: [torch.rand(64, 1000)]  # noqa: E731
    whole = inp.build_set(get_inputs, "heavy-tail", 5).args[0]
    monkeypatch.setattr(distributions, "VALUE_CHUNK_ELEMENTS", 1000)
    chunked = inp.build_set(get_inputs, "heavy-tail", 5).args[0]
    again = inp.build_set(get_inputs, "heavy-tail", 5).args[0]
    assert torch.equal(chunked, again)  # deterministic per seed
    assert chunked.dtype == whole.dtype and chunked.shape == whole.shape
    assert chunked.abs().max() > 10 and whole.abs().max() > 10  # heavy tails both ways


class _Rows(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1) * 3


class _Prefix(torch.nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=0)


class _Suffix(torch.nn.Module):
    def forward(self, x):
        return torch.flip(torch.cumsum(torch.flip(x, [0]), dim=0), [0])


def test_oracle_runs_row_separable_models_in_pieces_with_the_same_answer(monkeypatch):
    x = torch.randn(64, 128)
    whole = orc.Oracle(_Rows(), torch.device("cpu"))(
        [x], None)
    monkeypatch.setattr(orc, "PIECE_BYTES", 4096)
    o = orc.Oracle(_Rows(), torch.device("cpu"))
    ref = [_Rows()(x)]
    pieces = o([x], ref)
    assert o.chunked > 1 and torch.allclose(pieces[0], whole[0], rtol=0, atol=1e-15)
    errs = o.input_rounding_errors([x], pieces, ref)
    whole_oracle = orc.Oracle(_Rows(), torch.device("cpu"))
    full = max(output_errors(whole_oracle.input_rounding([x], None, seed), pieces)[0] for seed in orc.ROUNDING_MOVES)
    assert errs is not None and errs[0] == pytest.approx(full, rel=1e-6)  # the same draw, whole or in pieces


@pytest.mark.parametrize("model", [_Prefix(), _Suffix()], ids=["prefix-scan", "suffix-scan"])
def test_a_scan_along_the_batch_is_not_split(monkeypatch, model):
    monkeypatch.setattr(orc, "PIECE_BYTES", 4096)
    x = torch.randn(64, 128)
    o = orc.Oracle(model, torch.device("cpu"))
    out = o([x], [model(x)])
    assert o.chunked == 0
    assert torch.allclose(out[0], model(x.double()), atol=1e-12)


# end to end ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def big_relu_verdict(cpu_evaluator):
    """One verification of the 256 MiB ReLU for the tests below (xdist group ``big-relu``: one
    worker runs them all, so the fixture runs once)."""
    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem

    return cpu_evaluator.evaluate(load_problem(MEMORY / "level1" / "1_ReLU_256MiB.py"),
                                  load_candidate(HONEST / "relu_clamp_min_torch.py"), _lean_config())


BIG_RELU_BYTES = 2 * 4096 * 16384 * 4  # inputs and outputs of one call


@pytest.mark.slow
@pytest.mark.xdist_group("big-relu")
def test_an_honest_relu_on_a_256_mib_input_passes_and_its_checks_stay_within_the_bound(big_relu_verdict):
    v = big_relu_verdict
    assert v.status is Status.PASS, v.message
    m = v.evidence["memory_footprint"]
    assert m["bound_bytes"] == fp.bound_bytes(BIG_RELU_BYTES // 2, BIG_RELU_BYTES // 2)
    for phase in ("load", "correctness", "vetting"):
        assert m["phase_peaks"][phase] <= m["bound_bytes"], (phase, m)
    assert m["candidate_host_peak_bytes"] <= m["bound_bytes"], m


@pytest.mark.slow
@pytest.mark.xdist_group("big-relu")
def test_the_whole_verification_of_a_256_mib_relu_stays_within_the_bound(big_relu_verdict):
    m = big_relu_verdict.evidence["memory_footprint"]
    assert m["reference_host_peak_bytes"] <= m["bound_bytes"], m


@pytest.mark.slow
def test_the_reference_running_out_of_memory_is_kbvs_failure(cpu_evaluator, fast_config):
    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem

    v = cpu_evaluator.evaluate(load_problem(MEMORY / "level1" / "2_Reference_OOM.py"),
                               load_candidate(HONEST / "relu_clamp_min_torch.py"), fast_config)
    assert v.status is Status.EVAL_ERROR, v.message
    assert "out of memory" in v.message and "taxonomy" not in v.message and not v.findings


@pytest.mark.slow
def test_a_problem_that_cannot_fit_is_refused_before_anything_runs(cpu_evaluator, fast_config):
    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem

    v = cpu_evaluator.evaluate(load_problem(MEMORY / "level1" / "3_Too_Big.py"),
                               load_candidate(HONEST / "relu_clamp_min_torch.py"), fast_config)
    assert v.status is Status.EVAL_ERROR and "does not fit" in v.message and "GiB free" in v.message, v.message
    assert not v.input_sets and "load_seconds" not in v.evidence


def test_the_worker_says_out_of_memory_as_a_kind_read_off_the_exception():
    """What crosses to the trusted side is :attr:`kbv.sandbox.protocol.Failed.kind`, read where the
    exception is caught; no reply's text is matched."""
    from kbv.sandbox import protocol
    from kbv.sandbox.peak_memory import is_out_of_memory

    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8"))
    assert is_out_of_memory(MemoryError()) and not is_out_of_memory(ValueError("out of memory"))
    # cuBLAS / cuDNN failing to allocate their workspace on a full device (red-team helper: a reference
    # that failed so on a hidden set was a dropped set, not kbv's EVAL_ERROR)
    assert is_out_of_memory(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"))
    assert is_out_of_memory(RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED"))
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert protocol.Failed("forward", "RuntimeError", "x").kind == protocol.RAISED


@pytest.mark.parametrize("name, leaks", [("memory/candidates/relu_leak_per_call.py", True),
                                         ("honest/candidates/relu_clamp_min_torch.py", False)])
def test_a_per_call_leak_is_a_warning_with_its_rate_and_an_honest_kernel_has_none(cpu_evaluator, name, leaks):
    from conftest import DATA, problem
    from kbv.intake.candidates import load_candidate

    v = cpu_evaluator.evaluate(problem("level1/1_Small_ReLU.py"), load_candidate(DATA / name),
                               _lean_config(trials=24, timing_rounds=4))
    growth = [f for f in v.findings if f.check == "memory:growth"]
    assert v.status is Status.PASS, v.message
    assert bool(growth) is leaks, (growth, v.evidence.get("memory_growth"))
