"""The reference runs on a set's own inputs, not a copy, once it is seen not to write them (issue 21:
a read and a write of the inputs a set); an in-place op on an input on its first run, even one that
changed nothing there, keeps the copies; a write on a later set drops that set (its values are gone)
instead of judging the candidate on values the reference changed."""

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


def test_a_write_on_a_later_set_drops_that_set_and_the_honest_candidate_passes(fast_config):
    rp, v = _verify("reference_inputs/2_Writes_input_when_large.py", "relu_torch.py", fast_config)
    dropped = [r.name for r in v.input_sets if r.dropped and "changed its inputs in place" in (r.drop_reason or "")]
    assert dropped and rp.mutates_inputs
    assert v.status in (Status.PASS, Status.SHORTCUT), v.message
    assert not [r for r in v.input_sets if r.passed is False], v.message


def test_inference_tensors_keep_no_versions():
    with torch.inference_mode():
        t = torch.ones(3)
    assert tensor_versions([torch.ones(2), 3.0]) == (0,) and tensor_versions([t]) is None
