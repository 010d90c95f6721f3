"""The secret shape's load beside the candidate's own (kbv.pipeline.secret_shapes): the shape's
worker is sent its load before the candidate's own sets are judged (shape after) or the candidate's
own worker its load before the shape's sets (shape before); either way the loads keep their order,
and a ModelNew that cannot be built at the secret shape is INCORRECT on both sides of the coin (with
the shape after, such a build once left no shape set at all: PASS)."""

from __future__ import annotations

import pytest

from conftest import DATA
from kbv.model.records import InputKind, Status

pytestmark = pytest.mark.e2e  # starts candidate workers


def _verify(monkeypatch, candidate: str, config, first: bool):
    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem
    from kbv.pipeline import secret_shapes
    from kbv.pipeline.run import verify
    from kbv.processes.host_environment import collect_environment
    from kbv.reference.build import build_reference

    def coin(self):
        self._shape_before = first
        return first

    monkeypatch.setattr(secret_shapes.SecretShapes, "_shape_first", coin)
    rp = build_reference(load_problem(DATA / "problems" / "level1" / "2_Small_Linear.py"), config)
    return verify(rp, load_candidate(DATA / "candidates" / candidate), config, collect_environment("cpu"))


@pytest.mark.parametrize("first", [True, False], ids=["shape-before", "shape-after"])
def test_a_model_that_cannot_be_built_at_the_secret_shape_is_incorrect(monkeypatch, fast_config, first):
    v = _verify(monkeypatch, "linear_nominal_only.py", fast_config, first)
    assert v.status is Status.INCORRECT, v.message
    shapes = v.sets(InputKind.SHAPE)
    assert [r.name for r in shapes] == ["shape-1"] and shapes[0].passed is False
    assert "built for 64 x 48 only" in shapes[0].fault


@pytest.mark.parametrize("first", [True, False], ids=["shape-before", "shape-after"])
def test_an_honest_model_passes_at_the_shape_on_both_sides(monkeypatch, fast_config, first):
    v = _verify(monkeypatch, "linear_honest.py", fast_config, first)
    assert v.status in (Status.PASS, Status.SHORTCUT), v.message  # torch.addmm: the reference's own op
    note = v.evidence["secret_shape"]
    assert note["before_load"] is first
    shapes = [r for r in v.sets(InputKind.SHAPE) if r.name != "shape-late"]
    assert len(shapes) == note["judged_sets"] and all(r.passed for r in shapes)


def test_with_the_shape_after_its_worker_is_closed_once_the_candidates_own_sets_fail(monkeypatch, fast_config):
    """A candidate wrong at the problem's own sizes: the shape's worker, sent its load ahead, is
    closed unjudged before the rest of the verification runs (not left beside the timing stage),
    and no kbv build lock is left held."""
    from kbv.pipeline import secret_shapes
    from kbv.processes import buildlock

    closed_at = []
    release = secret_shapes.SecretShapes.release

    def spy(self):
        begun = getattr(self, "_begun", None)
        if begun is not None:
            closed_at.append(begun[0].proc.pid)
        release(self)

    monkeypatch.setattr(secret_shapes.SecretShapes, "release", spy)
    v = _verify(monkeypatch, "linear_reinit.py", fast_config, first=False)
    assert v.status is Status.INCORRECT, v.message
    assert closed_at, "the begun shape was never released"
    assert not buildlock._HELD


def test_a_declared_workloads_verification_leaves_no_shape_worker(monkeypatch, fast_config):
    """A workload's verification is run without ``verify``'s own clean-up: its begun shape (the
    shape after, the candidate wrong at the workload) is closed by the verification itself."""
    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem
    from kbv.pipeline import secret_shapes
    from kbv.pipeline.run import verify
    from kbv.processes import buildlock
    from kbv.processes import candidate as cand
    from kbv.processes.host_environment import collect_environment
    from kbv.reference.build import build_reference

    def coin(self):
        self._shape_before = False
        return False

    monkeypatch.setattr(secret_shapes.SecretShapes, "_shape_first", coin)
    root = DATA / "workloads"
    rp = build_reference(load_problem(root / "level1" / "1_Leaky_ReLU_workloads.py"), fast_config)
    v = verify(rp, load_candidate(root / "candidates" / "leaky_first_512_columns.py"), fast_config,
               collect_environment("cpu"))
    assert v.status is Status.INCORRECT, v.message
    assert not cand._OPEN and not buildlock._HELD
