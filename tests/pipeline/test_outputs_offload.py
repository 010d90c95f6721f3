"""Correctness sets where memory leaves no room for the candidate's outputs beside the oracle
(``Judging.oracle_after_outputs`` False): on cuda the outputs are compared with the reference's first
all the same and held on the host while the oracle runs (``Judging.offloads_outputs``). Forced here on
cpu, where the host is the device: the same statuses and the same per-set judgements as the oracle
first, for an exact, an inexact honest and a wrong candidate; exact outputs need no oracle."""

from __future__ import annotations

import pytest

from conftest import DATA

pytestmark = pytest.mark.e2e  # starts candidate workers

CASES = [("level1/1_Small_ReLU.py", "relu_torch.py"), ("level1/3_Small_Log.py", "log_honest.py"),
         ("level1/1_Small_ReLU.py", "relu_abs_wrong.py")]


def _verify(problem: str, candidate: str, config):
    from kbv.intake.candidates import load_candidate
    from kbv.intake.problems import load_problem
    from kbv.pipeline.run import verify
    from kbv.processes.host_environment import collect_environment
    from kbv.reference.build import build_reference

    rp = build_reference(load_problem(DATA / "problems" / problem), config)
    return verify(rp, load_candidate(DATA / "candidates" / candidate), config, collect_environment("cpu"))


def _sets(v) -> list:
    return [(r.name, r.passed, r.dropped, r.exact) for r in v.input_sets]


@pytest.mark.parametrize("problem,candidate", CASES)
def test_outputs_held_apart_give_the_judgements_of_the_oracle_first(monkeypatch, problem, candidate, fast_config):
    from kbv.pipeline.judging import Judging

    monkeypatch.setattr(Judging, "oracle_after_outputs", lambda self: False)
    monkeypatch.setattr(Judging, "offloads_outputs", lambda self: False)
    first = _verify(problem, candidate, fast_config)
    oracle_runs = []
    side = Judging._oracle_side
    monkeypatch.setattr(Judging, "offloads_outputs", lambda self: True)
    monkeypatch.setattr(Judging, "_oracle_side", lambda self, s, *a, **k: oracle_runs.append(s.name) or side(self, s, *a, **k))
    held = _verify(problem, candidate, fast_config)
    assert held.status == first.status, (held.message, first.message)
    a = {n: (p, d) for n, p, d, _ in _sets(first) if not n.startswith("shape")}
    b = {n: (p, d) for n, p, d, _ in _sets(held) if not n.startswith("shape")}
    assert a == b
    exact = {n for n, p, d, e in _sets(held) if e}
    if candidate == "relu_torch.py":  # equal outputs: no oracle on any correctness set
        assert exact and not exact & set(oracle_runs)
