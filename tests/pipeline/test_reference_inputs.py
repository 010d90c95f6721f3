"""The reference runs on a copy of every set's inputs, so a reference that writes them (in place on
some sets only, or through ``.data``) never changes the values the candidate and the oracle are
judged on; its first run records an in-place op on an input even where it changed nothing there."""

from __future__ import annotations

import pytest
import torch

from conftest import DATA
from kbv.model.records import Status
from kbv.reference.build import tensor_versions

pytestmark = pytest.mark.e2e  # starts candidate workers


def _verify(problem: str, candidate: str, config):
    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem
    from kbv.pipeline.run import verify
    from kbv.processes.host_environment import collect_environment
    from kbv.reference.build import build_reference

    rp = build_reference(load_problem(DATA / problem), config)
    return rp, verify(rp, load_candidate(DATA / "candidates" / candidate), config, collect_environment("cpu"))


def test_an_in_place_op_that_changed_nothing_on_the_first_set_keeps_the_copies(fast_config):
    rp, v = _verify("reference_inputs/1_Clamp_in_place.py", "clamp_in_place_honest.py", fast_config)
    assert rp.mutates_inputs
    assert v.status in (Status.PASS, Status.SHORTCUT), v.message  # torch's own ops: SHORTCUT
    assert not [r for r in v.input_sets if r.passed is False], v.message
    assert not [r for r in v.input_sets if r.dropped and "in place" in (r.drop_reason or "")]


def test_a_write_on_a_later_set_leaves_the_candidate_judged_on_the_sets_own_values(fast_config):
    """The reference runs on a copy on every set: one that writes its input only on some sets changes
    nothing the candidate or the oracle is judged on."""
    rp, v = _verify("reference_inputs/2_Writes_input_when_large.py", "relu_torch.py", fast_config)
    assert v.status in (Status.PASS, Status.SHORTCUT), v.message
    assert not [r for r in v.input_sets if r.passed is False], v.message


def test_a_write_through_data_that_moves_no_version_counter_still_fails_a_wrong_kernel(fast_config):
    """A red-team helper's reference clamps its input through ``.data`` (no version counter moves, and
    nothing changes on get_inputs()'s values): when the reference ran uncopied on later sets, ``x + x +
    x`` passed against ``2x + clamp(x)``; on copies it is wrong where the clamp bites."""
    rp, v = _verify("reference_inputs/3_Clamp_through_data.py", "triple_wrong.py", fast_config)
    assert v.status is Status.INCORRECT, v.message


def test_inference_tensors_keep_no_versions():
    with torch.inference_mode():
        t = torch.ones(3)
    assert tensor_versions([torch.ones(2), 3.0]) == (0,) and tensor_versions([t]) is None
