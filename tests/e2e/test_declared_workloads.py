"""Declared workloads end to end on CPU (issue 23): a problem that names several shapes gets one
verdict over all of them, through the real worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbv.model.records import Status

DATA = Path(__file__).resolve().parents[1] / "data" / "workloads"


def _eval(evaluator, config, candidate: str, problem: Path = DATA / "level1" / "1_Leaky_ReLU_workloads.py"):
    """``candidate`` verified against ``problem`` with two randomised distributions (each workload
    is a whole verification: these tests look at how the workloads' verdicts combine)."""
    import dataclasses

    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem

    config = dataclasses.replace(config, distributions=("fresh", "sign-flip"))
    return evaluator.evaluate(load_problem(problem), load_candidate(DATA / "candidates" / candidate), config)


def test_an_honest_kernel_for_any_shape_passes_every_workload(cpu_evaluator, fast_config):
    v = _eval(cpu_evaluator, fast_config, "leaky_any_shape.py")
    assert v.status is Status.PASS, v.message
    work = v.evidence["workloads"]
    assert [(w["name"], w["status"], w["sizes"]) for w in work] == [
        ("nominal", "PASS", {"batch_size": 64, "dim": 512}), ("tall", "PASS", {"batch_size": 256}),
        ("wide", "PASS", {"dim": 1536})]
    # the credited speedup is the geometric mean of the three workloads' own
    for b in ("eager-fp32", "eager-tf32"):
        each = [w["speedup"][b] for w in work]
        assert v.speedup[b] == pytest.approx((each[0] * each[1] * each[2]) ** (1 / 3))
    # each workload was checked and timed at its own sizes: its sets and its own timing
    assert {r.name.split(":")[0] for r in v.input_sets if ":" in r.name} == {"tall", "wide"}
    assert all(w["timing"]["candidate"]["times_ms"] for w in work)
    assert all(w["memory_footprint"]["bound_bytes"] for w in work)  # the memory bound of each shape


def test_a_kernel_written_for_the_nominal_width_is_incorrect_at_the_wide_workload(cpu_evaluator, fast_config):
    """Right at dim 512 and at every smaller shape (the secret shape is smaller, and passes): only
    the declared workload ``wide`` (dim 1536) shows it."""
    v = _eval(cpu_evaluator, fast_config, "leaky_first_512_columns.py")
    assert v.status is Status.INCORRECT, v.message
    assert v.message.startswith("workload wide: ")
    assert "inputs:shape-specialised" in {f.check for f in v.findings}
    assert [w["status"] for w in v.evidence["workloads"]] == ["PASS", "PASS", "INCORRECT"]
    assert v.speedup == {}


def test_a_workload_the_reference_refuses_is_the_problems_error(cpu_evaluator, fast_config, tmp_path):
    from kbv.intake.problems import ProblemError

    text = (DATA / "level1" / "1_Leaky_ReLU_workloads.py").read_text().replace(
        "        return torch.where(x > 0, x, 0.1 * x)",
        "        assert x.shape[1] <= 1024, 'dim over 1024'\n        return torch.where(x > 0, x, 0.1 * x)")
    (tmp_path / "level1").mkdir()
    path = tmp_path / "level1" / "1_Leaky_ReLU_workloads.py"
    path.write_text(text)
    with pytest.raises(ProblemError, match="workload 'wide'"):
        _eval(cpu_evaluator, fast_config, "leaky_any_shape.py", path)


def test_a_problems_own_settings_apply_under_the_users(cpu_evaluator):
    """KBV_METADATA["config"]: kbv's defaults < the problem file < what the user set."""
    from kbv.api import make_config
    from kbv.model.records import InputKind

    problem = DATA / "level1" / "2_Leaky_ReLU_settings.py"
    base = {"device": "cpu", "trials": 6, "timing_rounds": 2, "warmup": 1, "secret_shapes": 0}
    v = _eval(cpu_evaluator, make_config(base), "leaky_any_shape.py", problem)
    assert v.status is Status.PASS, v.message
    assert (v.config.nominal_seeds, v.config.atol, v.config.rtol) == (5, 1e-2, 1e-2)
    assert len(v.sets(InputKind.NOMINAL)) == 5
    assert v.evidence["problem_config"] == {"nominal_seeds": 5, "atol": 1e-2, "rtol": 1e-2}
    mine = _eval(cpu_evaluator, make_config({**base, "nominal_seeds": 2}), "leaky_any_shape.py", problem)
    assert (mine.config.nominal_seeds, mine.config.atol) == (2, 1e-2)  # the user's seeds, the problem's atol
    assert len(mine.sets(InputKind.NOMINAL)) == 2
    assert mine.evidence["problem_config"] == {"atol": 1e-2, "rtol": 1e-2}


def test_a_bad_problem_setting_is_the_problems_error(cpu_evaluator, fast_config, tmp_path):
    from kbv.intake.problems import ProblemError

    text = (DATA / "level1" / "2_Leaky_ReLU_settings.py").read_text()
    (tmp_path / "level1").mkdir()
    for bad, fault in (('"trials": 3', "a problem may set atol, rtol"), ('"nominal_seeds": 0', "nominal_seeds must be >= 1")):
        path = tmp_path / "level1" / "2_Leaky_ReLU_settings.py"
        path.write_text(text.replace('"nominal_seeds": 5', bad))
        with pytest.raises(ProblemError, match=fault):
            _eval(cpu_evaluator, fast_config, "leaky_any_shape.py", path)


def test_a_kernel_tiled_for_the_declared_sizes_is_incorrect_between_them(cpu_evaluator, fast_config):
    """Right at dim 512 and 1536 (a multiple of its tile), wrong at any odd width between: the
    workload ``wide``'s secret shape is drawn there, so every verification sees it."""
    v = _eval(cpu_evaluator, fast_config, "leaky_tiles_of_512.py")
    assert v.status is Status.INCORRECT, v.message
    assert v.message.startswith("workload wide: ")
    assert [w["status"] for w in v.evidence["workloads"]] == ["PASS", "PASS", "INCORRECT"]
    failed = [r for r in v.input_sets if r.passed is False]
    assert failed and all(r.name.startswith("wide:shape-") for r in failed), [r.name for r in failed]
    dim = int(failed[0].transform.split("dim=")[1].split(",")[0])
    assert 512 < dim < 1536 and dim % 2, failed[0].transform


@pytest.mark.cuda
def test_triton_kernels_on_declared_workloads_on_gpu(gpu_evaluator):
    """The cuda rows of the two tests above: an honest Triton kernel for any shape PASSes every
    workload; one whose rows are a constant 512 wide is INCORRECT at ``wide`` with the finding."""
    from kbv.model.records import EvalConfig

    config = EvalConfig(device="cuda", trials=10, timing_rounds=2, warmup=3)
    honest = _eval(gpu_evaluator, config, "leaky_any_shape_triton.py")
    assert honest.status is Status.PASS, (honest.message, [f.describe() for f in honest.findings])
    assert [w["status"] for w in honest.evidence["workloads"]] == ["PASS"] * 3
    assert not [f for f in honest.findings if f.check == "inputs:shape-specialised"]
    fixed = _eval(gpu_evaluator, config, "leaky_first_512_columns_triton.py")
    assert fixed.status is Status.INCORRECT, (fixed.message, [f.describe() for f in fixed.findings])
    assert fixed.message.startswith("workload wide: ")
    assert "inputs:shape-specialised" in {f.check for f in fixed.findings}
