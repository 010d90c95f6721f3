"""Static vetting of problem and candidate files: every fault is one line naming the file."""

from __future__ import annotations

import pytest

from kbv.intake.candidates import CandidateError, detect_backend, load_candidate
from kbv.intake.problems import MAX_SOURCE_BYTES, ProblemError, identify, load_problem
from conftest import DATA

GOOD_PROBLEM = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x
def get_inputs():
    return [torch.rand(4)]
def get_init_inputs():
    return []
"""


def write(tmp_path, name, text: str | bytes):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    (p.write_bytes if isinstance(text, bytes) else p.write_text)(text)
    return p


def one_line(exc: Exception) -> str:
    msg = str(exc)
    assert "\n" not in msg
    return msg


def test_good_problem_identity(tmp_path):
    p = write(tmp_path, "level2/66_Matmul_Dropout_Softmax.py", GOOD_PROBLEM)
    ref = load_problem(p)
    assert (ref.level, ref.problem_id, ref.name) == (2, 66, "Matmul_Dropout_Softmax")
    assert len(ref.sha256) == 64


@pytest.mark.parametrize("path, expected", [
    ("level1/19_ReLU.py", (1, 19, "ReLU")),
    ("level_3/5_MinGPT.py", (3, 5, "MinGPT")),
    ("elsewhere/my_problem.py", (None, None, "my_problem")),
])
def test_identify(tmp_path, path, expected):
    from pathlib import Path

    assert identify(Path(path)) == expected


@pytest.mark.parametrize("missing", ["Model", "get_inputs", "get_init_inputs"])
def test_missing_name_is_named(tmp_path, missing):
    text = GOOD_PROBLEM.replace(f"class {missing}", "class Other").replace(f"def {missing}", "def other")
    p = write(tmp_path, "1_Bad.py", text)
    with pytest.raises(ProblemError) as e:
        load_problem(p)
    msg = one_line(e.value)
    assert str(p) in msg and missing in msg


def test_a_candidate_given_as_the_problem_asks_whether_the_arguments_are_swapped(tmp_path):
    """``kbv eval cand.py problem.py`` named only the missing names (newcomer report)."""
    p = write(tmp_path, "1_Cand.py", "import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n")
    with pytest.raises(ProblemError) as e:
        load_problem(p)
    assert "arguments swapped? the problem comes first" in one_line(e.value)


def test_syntax_error_names_the_line(tmp_path):
    p = write(tmp_path, "1_Bad.py", "import torch\ndef get_inputs(:\n")
    with pytest.raises(ProblemError) as e:
        load_problem(p)
    assert "syntax error at line 2" in one_line(e.value) and str(p) in str(e.value)


def test_non_utf8_file(tmp_path):
    p = write(tmp_path, "1_Bad.py", b"# \xff\xfe latin-1 junk\n")
    with pytest.raises(ProblemError) as e:
        load_problem(p)
    assert "not UTF-8" in one_line(e.value)


def test_huge_file_refused_without_reading(tmp_path):
    p = tmp_path / "1_Huge.py"
    with open(p, "wb") as f:
        f.truncate(MAX_SOURCE_BYTES + 1)
    with pytest.raises(ProblemError) as e:
        load_problem(p)
    assert "limit" in one_line(e.value)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ProblemError, match="no such file"):
        load_problem(tmp_path / "nope.py")
    with pytest.raises(ProblemError, match="not a regular file"):
        load_problem(tmp_path)


def test_discover_sorts_by_level_and_id():
    from kbv.intake.layout import vet_problems

    refs = vet_problems(DATA / "problems").problems
    keys = [(r.level, r.problem_id) for r in refs]
    assert keys == sorted(keys) and len(refs) >= 4


def test_candidate_without_model_new(tmp_path):
    p = write(tmp_path, "cand.py", "import torch\nclass Model: pass\n")
    with pytest.raises(CandidateError) as e:
        load_candidate(p)
    assert "no ModelNew" in one_line(e.value) and str(p) in str(e.value)


def test_candidate_model_new_by_assignment_or_import(tmp_path):
    assert load_candidate(write(tmp_path, "a.py", "from x import Foo\nModelNew = Foo\n")).backend == "torch"
    assert load_candidate(write(tmp_path, "b.py", "from somewhere import ModelNew\n"))


@pytest.mark.parametrize("source, backend", [
    ("from torch.utils.cpp_extension import load_inline\nm = load_inline(name='a', cpp_sources='', cuda_sources='x')", "cuda"),
    ("from torch.utils.cpp_extension import load_inline\nm = load_inline(name='a', cpp_sources='x')", "cpp"),
    ("import triton\nimport triton.language as tl\n@triton.jit\ndef k(x):\n    pass", "triton"),
    ("import torch\nx = torch.relu", "torch"),
])
def test_backend_detection(source, backend):
    import ast

    assert detect_backend(ast.parse(source)) == backend


def test_demo_candidates_backends():
    from kbv.demo import data_path

    got = {n: load_candidate(data_path("candidates", n)).backend for n in
           ("relu_cpp.py", "relu_cuda.py", "softmax_triton.py", "relu_hack.py")}
    assert got == {"relu_cpp.py": "cpp", "relu_cuda.py": "cuda", "softmax_triton.py": "triton", "relu_hack.py": "torch"}


def test_a_problem_given_as_the_candidate_asks_whether_the_arguments_are_swapped(tmp_path):
    """A self-contained file (Model, get_inputs and ModelNew) passed as the problem left the real
    problem in the candidate's place with only "no ModelNew" (helper report, seventh session)."""
    from kbv.intake.candidates import CandidateError, load_candidate

    p = write(tmp_path, "1_Prob.py", GOOD_PROBLEM)
    with pytest.raises(CandidateError) as e:
        load_candidate(p)
    assert "arguments swapped? the problem comes first" in one_line(e.value)
