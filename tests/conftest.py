"""Shared fixtures: one build cache for the whole session, one CPU evaluator, the cuda marker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"

# One content-hash build cache for every test (compiled candidates are built once per machine).
os.environ.setdefault("KBV_CACHE_DIR", str(ROOT / ".kbv-cache"))


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (run on the GPU host, see docs/gpu-runs.md)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cpu_evaluator():
    from kbv.orchestrator import Evaluator

    with Evaluator("cpu") as ev:
        yield ev


@pytest.fixture(scope="module")
def gpu_evaluator():
    """One CUDA evaluator per GPU test module (tests/test_gpu*.py)."""
    from kbv.orchestrator import Evaluator

    with Evaluator("cuda") as ev:
        yield ev


@pytest.fixture
def fast_config():
    """A CPU config with few trials: correctness is what these tests look at."""
    from kbv.records import EvalConfig

    return EvalConfig(device="cpu", trials=6, timing_rounds=2, warmup=1, call_timeout_s=60)


def problem(name: str):
    from kbv.problems import load_problem

    return load_problem(DATA / "problems" / name)


def candidate(name: str):
    from kbv.candidates import load_candidate

    return load_candidate(DATA / "candidates" / name)


def demo_problem(name: str):
    from kbv.demo import data_path
    from kbv.problems import load_problem

    return load_problem(data_path("problems", name))


def demo_candidate(name: str):
    from kbv.candidates import load_candidate
    from kbv.demo import data_path

    return load_candidate(data_path("candidates", name))
