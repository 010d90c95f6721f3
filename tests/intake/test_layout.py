"""Finding batch files: both candidate layouts, several runs, problem vetting, hidden tests, planning."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbv.batch.runner import Selection, parse_ids, plan_batch
from kbv.intake.layout import (Layout, LayoutError, detect_layout, discover_candidates, discover_hidden_tests,
    scan_root, vet_problems)
from kbv.batch.evaluator import UNVETTED_BACKEND
from kbv.model.records import EvalConfig, Status

MODEL_NEW = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
PROBLEM = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
           "        return x\n\ndef get_inputs():\n    return [torch.rand(4)]\n\ndef get_init_inputs():\n    return []\n")


def write(path: Path, text: str | bytes = MODEL_NEW) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.fixture
def problems(tmp_path):
    root = tmp_path / "KernelBench"
    write(root / "level1" / "1_Identity.py", PROBLEM)
    write(root / "level1" / "2_Other.py", PROBLEM)
    write(root / "level2" / "1_Fused.py", PROBLEM)
    write(root / "level2" / "7_Broken.py", "class Model: pass\n")  # no get_inputs: fails vetting
    write(root / "hidden_tests" / "level1" / "1_hidden.py", "def get_hidden_inputs():\n    return []\n")
    return root


def test_kernelbench_layout_several_runs(tmp_path):
    runs = tmp_path / "runs"
    write(runs / "gpt" / "level_1_problem_1_sample_0_kernel.py")
    write(runs / "gpt" / "level_1_problem_1_sample_1_kernel.py")
    write(runs / "gpt" / "level_2_problem_1_sample_0_kernel.py")
    write(runs / "gpt" / "level_1_problem_1_sample_0_prompt.txt", "not a candidate")
    write(runs / "gpt" / "helper.py", "x = 1\n")
    write(runs / "claude" / "level_1_problem_2_sample_3_kernel.py")
    assert detect_layout(runs) is Layout.kernelbench
    scan = scan_root(runs)
    assert [f.identity for f in scan.files] == [
        ("claude", 1, 2, 3), ("gpt", 1, 1, 0), ("gpt", 1, 1, 1), ("gpt", 2, 1, 0)]
    assert [p.name for p in scan.ignored] == ["helper.py"]
    # the run folder itself is one run named after it
    one = scan_root(runs / "gpt", Layout.kernelbench)
    assert {f.run for f in one.files} == {"gpt"} and len(one.files) == 3


def test_plain_layout_and_roots_combined(tmp_path):
    plain = tmp_path / "plain"
    write(plain / "modelA" / "level1" / "1" / "0.py")
    write(plain / "modelA" / "1" / "2_Other" / "sample_1.py")  # bare level number, named problem folder
    write(plain / "modelB" / "level_2" / "1" / "sample4.py")
    write(plain / "modelB" / "level_2" / "1" / "notes.py")
    write(plain / "modelC" / "19" / "0.py")  # no level folder: fits no layout, listed (it was dropped silently)
    kb = tmp_path / "runs" / "gpt"
    write(kb / "level_1_problem_1_sample_0_kernel.py")
    assert detect_layout(plain) is Layout.plain
    scan = discover_candidates([plain, kb])
    assert [f.identity for f in scan.files] == [
        ("gpt", 1, 1, 0), ("modelA", 1, 1, 0), ("modelA", 1, 2, 1), ("modelB", 2, 1, 4)]
    assert {f.layout for f in scan.files} == {Layout.plain, Layout.kernelbench}
    assert sorted(str(p.relative_to(plain)) for p in scan.ignored) == ["modelB/level_2/1/notes.py", "modelC/19/0.py"]
    # a single plain run given directly
    assert {f.run for f in scan_root(plain / "modelA").files} == {"modelA"}


def test_layout_errors_name_the_folder(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(LayoutError, match="no candidate files") as err:
        scan_root(empty)
    assert "swapped" not in str(err.value)
    problems = tmp_path / "problems" / "level1"  # a problem folder given as the runs (newcomer report)
    problems.mkdir(parents=True)
    (problems / "19_ReLU.py").write_text("class Model: pass\n")
    with pytest.raises(LayoutError, match="arguments swapped"):
        scan_root(tmp_path / "problems")
    with pytest.raises(LayoutError, match=r"^candidates '.*missing': no such folder \(/"):
        scan_root(tmp_path / "missing")
    (tmp_path / "a_file.py").write_text("x = 1\n")
    with pytest.raises(LayoutError, match="a file, not a folder of candidates"):
        scan_root(tmp_path / "a_file.py")
    # a missing problems folder is named as given and as resolved (a newcomer read "problem:" as a label)
    from kbv.intake.layout import problem_files
    with pytest.raises(LayoutError, match=r"^problems 'nope': no such file or folder \(/"):
        problem_files("nope")
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    write(a / "level_1_problem_1_sample_0_kernel.py")
    write(b / "level_1_problem_1_sample_0_kernel.py")
    with pytest.raises(LayoutError, match="is also"):
        discover_candidates([a, b])


def test_problem_vetting_collects_broken_files_and_skips_hidden_tests(problems):
    scan = vet_problems(problems)
    assert [(p.level, p.problem_id, p.name) for p in scan.problems] == [
        (1, 1, "Identity"), (1, 2, "Other"), (2, 1, "Fused")]
    assert len(scan.errors) == 1 and "7_Broken.py" in str(scan.errors[0])
    assert "get_inputs" in scan.errors[0].fault


def test_hidden_tests_are_discovered(problems):
    found = discover_hidden_tests(problems)
    assert list(found) == [(1, 1)] and found[(1, 1)].name == "1_hidden.py"
    assert discover_hidden_tests(problems / "hidden_tests") == found
    assert discover_hidden_tests(problems / "level1") == {}


def test_parse_ids():
    assert parse_ids("1,2,5-7") == {1, 2, 5, 6, 7}
    for bad in ("x", "3-1", ""):
        with pytest.raises(ValueError):
            parse_ids(bad)


def test_plan_pairs_candidates_filters_and_rejects_statically(problems, tmp_path):
    runs = tmp_path / "runs"
    write(runs / "m" / "level_1_problem_1_sample_0_kernel.py")
    write(runs / "m" / "level_1_problem_2_sample_0_kernel.py", "def broken(:\n")
    write(runs / "m" / "level_2_problem_1_sample_0_kernel.py", b"\xff\xfe not utf-8")
    write(runs / "m" / "level_2_problem_1_sample_1_kernel.py", "x = 1\n")  # no ModelNew
    write(runs / "m" / "level_2_problem_1_sample_2_kernel.py", "# " + "x" * (1 << 20) + "\n")  # huge
    write(runs / "m" / "level_1_problem_9_sample_0_kernel.py")  # no such problem
    write(runs / "n" / "level_1_problem_1_sample_0_kernel.py")
    config = EvalConfig()
    plan = plan_batch(problems, [runs], config)
    assert len(plan.problems) == 3 and [b.key for b in plan.broken_files] == ["level2/7_Broken"]
    assert [o.problem_id for o in plan.orphans] == [9]
    assert list(plan.hidden_tests) == [(1, 1)]
    rejected = [pj for pj in plan.jobs if pj.rejection]
    assert plan.jobs[:len(rejected)] == tuple(rejected)  # static rejections come first
    faults = {(pj.job.level, pj.job.problem_id, pj.job.sample_id): pj.rejection for pj in rejected}
    assert "syntax error" in faults[(1, 2, 0)]
    assert "not UTF-8" in faults[(2, 1, 0)]
    assert "no ModelNew" in faults[(2, 1, 1)]
    assert "byte limit" in faults[(2, 1, 2)]
    assert all(pj.candidate.backend == UNVETTED_BACKEND for pj in rejected)
    assert len({pj.job.key for pj in plan.jobs}) == len(plan.jobs) == 6
    # filters
    only = plan_batch(problems, [runs], config, selection=Selection(levels=frozenset({1}), runs=frozenset({"n"})))
    assert [(pj.job.run, pj.job.problem_id) for pj in only.jobs] == [("n", 1)]
    ids = plan_batch(problems, [runs], config, selection=Selection(problem_ids=frozenset({2})))
    assert {pj.job.problem_id for pj in ids.jobs} == {2} and not ids.orphans


def test_rejection_verdict_is_a_compile_error_with_a_minimal_environment(problems, tmp_path):
    from kbv.batch.evaluator import rejected_candidate, rejection_verdict
    from kbv.intake.problems import load_problem

    path = write(tmp_path / "bad.py", "def f(:\n")
    cand = rejected_candidate(path, run="m", sample_id=0)
    v = rejection_verdict(load_problem(problems / "level1" / "1_Identity.py"), cand, EvalConfig(),
                          f"{path}: syntax error at line 1")
    # named by the file's name, as every other verdict's message (source text's path is a cache path)
    assert v.status is Status.COMPILE_ERROR and v.message == "bad.py: syntax error at line 1"
    assert v.candidate.path == str(path)
    assert v.environment.device == "cpu" and v.environment.device_name is None
    assert v.timing == {} and v.input_sets == () and v.evidence["ran"] is False


def test_a_folder_of_runs_in_both_layouts_scans_each_run_in_its_own(tmp_path):
    """Regression (a newcomer's batch): with ``auto`` the layout was decided once for the folder of runs,
    so a plain run beside a KernelBench one was dropped without a word; and files beside a plain run's
    level folders were neither run nor listed."""
    runs = tmp_path / "runs"
    write(runs / "kb" / "level_1_problem_1_sample_0_kernel.py")
    write(runs / "m" / "level1" / "1" / "0.py")
    write(runs / "m" / "top.py")
    write(runs / "m" / "stray" / "a.py")
    scan = scan_root(runs)
    assert [(f.run, f.layout) for f in sorted(scan.files, key=lambda f: f.run)] == [
        ("kb", Layout.kernelbench), ("m", Layout.plain)]
    assert sorted(str(p.relative_to(runs)) for p in scan.ignored) == ["m/stray/a.py", "m/top.py"]
    # a layout asked for is kept: the plain run's files are then the ones that fit no layout
    forced = scan_root(runs, Layout.kernelbench)
    assert [f.run for f in forced.files] == ["kb"]
    assert "m/level1/1/0.py" in {str(p.relative_to(runs)) for p in forced.ignored}


def test_problem_files_not_named_id_name_are_listed_not_silently_skipped(tmp_path):
    # newcomer report: kbv run said "0 problems" about a folder of softplus_scale.py
    from kbv.intake.layout import unnamed_problem_files

    level = tmp_path / "level1"
    level.mkdir()
    for name in ("19_ReLU.py", "softplus_scale.py", "__init__.py", "19_hidden.py"):
        (level / name).write_text("")
    (tmp_path / "hidden_tests").mkdir()
    (tmp_path / "hidden_tests" / "helper.py").write_text("")
    assert unnamed_problem_files(tmp_path) == [level / "softplus_scale.py"]
    assert unnamed_problem_files(level / "19_ReLU.py") == []


def test_hidden_test_files_are_no_problems_wherever_their_folder_is(tmp_path):
    # newcomer helper (eighteenth session): `kbv run my --hidden-tests my/hidden/` listed
    # my/hidden/level1/7_hidden.py as a broken problem file and the report as an excluded problem
    from kbv.intake.layout import problem_files

    (tmp_path / "level1").mkdir()
    (tmp_path / "hidden" / "level1").mkdir(parents=True)
    (tmp_path / "level1" / "7_Gelu.py").write_text("")
    (tmp_path / "hidden" / "level1" / "7_hidden.py").write_text("")
    assert problem_files(tmp_path) == [tmp_path / "level1" / "7_Gelu.py"]
