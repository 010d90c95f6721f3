"""Shared fixtures: one build cache for the whole session, one CPU evaluator, the cuda marker, and
the ``e2e`` marking of the fast tier (``python -m pytest -m "not e2e"``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
#: the red-team candidates: cheats of every taxonomy entry (docs/hack-taxonomy.md), a folder of their own.
EXPLOITS = ROOT / "exploits"
# the suite's helper modules (verdict_factory, llm_server) for tests in the package folders
sys.path.insert(0, str(Path(__file__).resolve().parent))


def data_file(rel: str) -> Path:
    """A test input by its short name: ``redteam/<file>`` under :data:`EXPLOITS`, anything else
    under :data:`DATA`."""
    return EXPLOITS / rel.removeprefix("redteam/") if rel.startswith("redteam/") else DATA / rel

# One content-hash build cache for every test (compiled candidates are built once per machine).
os.environ.setdefault("KBV_CACHE_DIR", str(ROOT / ".kbv-cache"))


#: fixtures that start kbv's workers: a test using one (even through another fixture) is ``e2e``;
#: so is one using any fixture named ``*_evaluator`` (a module's own evaluator, e.g. test_honest's).
E2E_FIXTURES = frozenset({"cpu_evaluator", "gpu_evaluator"})
#: markers that imply ``e2e`` (a compile, a long evaluation, a GPU run: all start workers).
E2E_MARKERS = ("slow", "cuda")


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the marks added here count
def pytest_collection_modifyitems(config, items):
    e2e = pytest.mark.e2e
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if (E2E_FIXTURES & fixtures or any(f.endswith("_evaluator") for f in fixtures)
                or any(m in item.keywords for m in E2E_MARKERS)):
            item.add_marker(e2e)
    # the README's command runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``):
    # the GPU tests stay on one of them, one after another, so no two time kernels on one GPU
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(pytest.mark.xdist_group("cuda"))
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (run on the GPU host, see docs/gpu-runs.md)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_worker(request, monkeypatch):
    """In the fast tier (``-m "not e2e"``), a test that starts a kbv worker fails at once, naming
    the fix, instead of making the tier slow: mark it ``e2e`` (or use an evaluator fixture)."""
    if "not e2e" not in (request.config.option.markexpr or "") or "e2e" in request.keywords:
        return
    from kbv.processes.candidate import CandidateProcess
    from kbv.processes.reference import ReferenceProcess

    def refuse(self, *args, **kwargs):  # noqa: ARG001
        pytest.fail(f"{request.node.nodeid} starts a kbv worker ({type(self).__name__}): mark it "
                    "@pytest.mark.e2e (the fast tier, -m 'not e2e', starts none)", pytrace=False)

    monkeypatch.setattr(CandidateProcess, "__init__", refuse)
    monkeypatch.setattr(ReferenceProcess, "__init__", refuse)


@pytest.fixture(scope="session")
def cpu_evaluator():
    from kbv.batch.evaluator import Evaluator

    with Evaluator("cpu") as ev:
        yield ev


@pytest.fixture(scope="module")
def gpu_evaluator():
    """One CUDA evaluator per GPU test module (tests/test_gpu*.py)."""
    from kbv.batch.evaluator import Evaluator

    with Evaluator("cuda") as ev:
        yield ev


@pytest.fixture
def fast_config():
    """A CPU config with few trials: correctness is what these tests look at."""
    from kbv.model.records import EvalConfig

    return EvalConfig(device="cpu", trials=6, timing_rounds=2, warmup=1, call_timeout_s=60)


def problem(name: str):
    from kbv.intake.problems import load_problem

    return load_problem(DATA / "problems" / name)


def candidate(name: str):
    from kbv.intake.candidates import load_candidate

    return load_candidate(DATA / "candidates" / name)


def demo_problem(name: str):
    from kbv.demo import data_path
    from kbv.intake.problems import load_problem

    return load_problem(data_path("problems", name))


def demo_candidate(name: str):
    from kbv.intake.candidates import load_candidate
    from kbv.demo import data_path

    return load_candidate(data_path("candidates", name))
