"""A finding that accuses must hold (issue 9, item 3): the decision rules on recorded observations.

Each test runs one of the pipeline's own decision methods on a stand-in for the verification's
context (only the attributes the method reads), so the rule is checked without a worker:

* ``_settle_probes``: a caching or timed-recheck probe failure is HACK only when every correctness
  set passed and the probe's error is at least ``PROBE_HACK_MARGIN`` x its budget; a kernel that
  also fails correctness sets is INCORRECT, the probe a WARNING. Recorded case: an imprecise
  Frobenius-norm kernel (float atomics) on the H200 was HACK via ``probe:cache-same-address`` and
  ``probe:timed-recheck`` although it failed D2, D3 and four randomised sets.
* ``_roofline``: the floor is the bytes of the forward inputs read once and the outputs written
  once, at the copy bandwidth, never the reference's FLOPs and never the parameters. Recorded
  case: three of four real ``diag(A) @ B`` row-scaling kernels and a GEMM->GEMV collapse were HACK
  on the H200 under the old FLOP floor.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from kbv.sandbox import protocol
from kbv.pipeline import rates
from kbv.model.records import InputKind, InputSetResult, Measurement, Severity

from kbv.checks.probe_rules import PROBE_HACK_MARGIN
from kbv.pipeline import roofline
from kbv.pipeline.judging import Judging
from kbv.pipeline.roofline import Roofline


def _set(name: str, passed: bool | None, kind: InputKind = InputKind.NOMINAL, dropped: bool = False) -> InputSetResult:
    return InputSetResult(name=name, kind=kind, transform="get_inputs()", seed=1, passed=passed, dropped=dropped,
                          drop_reason="reference output non-finite" if dropped else None)


def _failed_probe(oracle_error: float, error_budget: float, max_abs_error: float | None = 1e-3) -> InputSetResult:
    return InputSetResult(name="probe-same-address", kind=InputKind.NOMINAL, transform="new values", seed=2,
                          passed=False, max_abs_error=max_abs_error, oracle_error=oracle_error,
                          error_budget=error_budget)


class _Stand(SimpleNamespace):
    """The attributes of a verification's context that the decision methods read, and its ``_add``."""

    def __init__(self, **kw):
        kw.setdefault("state", SimpleNamespace(input_sets=[], findings=[], evidence={}, timing={}))
        kw.setdefault("config", SimpleNamespace(policy="kbv", atol=1e-3, timing_timeout_s=60.0))
        kw.setdefault("_pending_probes", [])
        super().__init__(**kw)

    def _add(self, found):
        if found is not None:
            self.state.findings.append(found)


def _settle(sets: list, probes: list) -> list:
    """Run ``_settle_probes`` over ``sets`` (InputSetResults) and ``probes`` ((check, taxonomy, result))."""
    stand = _Stand()
    stand.state.input_sets = sets
    stand._pending_probes = [(check, tax, "wrong when new values arrive",
                              Judging(stand)._over_budget(r)) for check, tax, r in probes]
    Judging(stand)._settle_probes()
    assert stand._pending_probes == []
    return stand.state.findings


FROBENIUS_SETS = [  # the recorded imprecise Frobenius kernel: nominal right, D2, D3 and 4 randomised wrong
    _set("nominal-0", True), _set("nominal-1", True), _set("nominal-2", True),
    _set("D1", True, InputKind.HIDDEN), _set("D2", False, InputKind.HIDDEN), _set("D3", False, InputKind.HIDDEN),
    _set("D4", True, InputKind.HIDDEN), _set("normal", False, InputKind.RANDOM),
    _set("heavy-tail", False, InputKind.RANDOM), _set("wide-range", False, InputKind.RANDOM),
    _set("outliers", False, InputKind.RANDOM), _set("offset", True, InputKind.RANDOM),
]


def test_imprecise_kernel_probe_failures_are_warnings():
    """Probe failures on a kernel that also fails correctness sets: WARNING, whatever the margin."""
    findings = _settle(FROBENIUS_SETS, [
        ("probe:cache-same-address", (11,), _failed_probe(3.1e-5, 1.2e-5)),  # 2.6 x budget
        ("probe:timed-recheck", (5, 6, 11), _failed_probe(4.0e-4, 1.2e-5)),  # 33 x budget: still not proof
    ])
    assert [f.check for f in findings] == ["probe:cache-same-address", "probe:timed-recheck"]
    assert all(f.severity is Severity.WARNING for f in findings), findings
    assert all("D2, D3" in f.detail and "not a proven cheat" in f.detail for f in findings), findings


def test_probe_failure_of_an_otherwise_correct_kernel_is_hack_only_well_over_budget():
    passing = [_set(n, True) for n in ("nominal-0", "nominal-1", "nominal-2", "D1", "D2")]
    near, far, wrong_shape = _failed_probe(2.0e-5, 1.0e-5), _failed_probe(5.0e-4, 1.0e-5), \
        _failed_probe(math.inf, 1.0e-5, max_abs_error=None)
    findings = _settle(passing, [("probe:cache-same-address", (11,), near),
                                 ("probe:cache-perturbed", (11,), far),
                                 ("probe:timed-recheck", (5, 6, 11), wrong_shape)])
    by_check = {f.check: f for f in findings}
    assert by_check["probe:cache-same-address"].severity is Severity.WARNING  # 2 x: imprecise, not proof
    assert "2 x its budget" in by_check["probe:cache-same-address"].detail
    assert by_check["probe:cache-perturbed"].severity is Severity.HACK  # 50 x, every set right: a cache
    assert "50 x its budget" in by_check["probe:cache-perturbed"].detail  # the margin is stated
    assert by_check["probe:timed-recheck"].severity is Severity.HACK  # no error figure (shape/NaN): inf
    assert PROBE_HACK_MARGIN >= 10


def test_dropped_sets_are_not_failures():
    """A set dropped (non-finite reference) has passed=None: it neither excuses nor accuses."""
    sets = [_set("nominal-0", True), _set("near-zero", None, InputKind.RANDOM, dropped=True)]
    findings = _settle(sets, [("probe:cache-same-address", (11,), _failed_probe(1.0, 1e-5))])
    assert [f.severity for f in findings] == [Severity.HACK]


def test_over_budget_under_each_policy():
    stand = _Stand()
    assert Judging(stand)._over_budget(_failed_probe(3e-5, 1e-5)) == pytest.approx(3.0)
    assert Judging(stand)._over_budget(_failed_probe(3e-5, 1e-5, max_abs_error=None)) == math.inf
    compat = _Stand(config=SimpleNamespace(policy="kbv-compat", atol=1e-3, timing_timeout_s=60.0))
    r = InputSetResult(name="probe-new-address", kind=InputKind.NOMINAL, transform="moved", seed=3, passed=False,
                       max_abs_error=2e-2, allclose_tolerance=2e-2)
    assert Judging(compat)._over_budget(r) == pytest.approx(20.0)


# --- roofline -----------------------------------------------------------------------------------

#: kbv's own copy bandwidth on the lent H200 (``rates.copy_bandwidth``: bytes read + written), 2026-12-01
H200_COPY_BYTES_PER_S = 4.19e12


def _roofline(monkeypatch, inputs: list, output_bytes: int, cand_ms: float, ref_ms: float,
              remeasured_ms: float | None = None) -> _Stand:
    """Run ``_roofline`` on a cuda stand-in: the copy bandwidth fixed, the candidate's re-measure
    (if the method asks for one) answered with ``remeasured_ms``."""
    monkeypatch.setattr(rates, "copy_bandwidth", lambda device: H200_COPY_BYTES_PER_S)
    monkeypatch.setattr(roofline, "l2_flush_bytes", lambda device: 0)
    asked = []

    def call(worker, request, phase, timeout):
        asked.append(request)
        again = cand_ms if remeasured_ms is None else remeasured_ms
        return protocol.Times(times_ms=(again,) * 6, clock="cuda-event")

    stand = _Stand(rp=SimpleNamespace(device=torch.device("cuda"), output_bytes=output_bytes), _call=call)
    stand.state.timing = {"candidate": Measurement("candidate", "cuda", (cand_ms,) * 6, 1),
                          "eager-fp32": Measurement("eager-fp32", "cuda", (ref_ms,) * 6, 1)}
    Roofline(stand)._roofline(None, [inputs])
    stand.asked = asked
    return stand


def test_roofline_diag_matmul_row_scaling_is_not_flagged(monkeypatch):
    """diag(A) @ B at N = M = 4096. Measured on the H200 (2026-12-01, tests/e2e/test_honest.py's GPU
    row): eager-fp32 2.81 ms, the Triton row scaling 0.156 ms, floor 0.032 ms. The reference's
    FLOPs (2 N^2 M = 137 GFLOP) would put a floor of ~0.3 ms under it at TF32 rates. Here the row
    scaling is taken at 45 us, near the copy rate (128 MiB moved): still over half the floor."""
    A, B = torch.empty(4096, device="meta"), torch.empty(4096, 4096, device="meta")
    stand = _roofline(monkeypatch, [A, B], output_bytes=4096 * 4096 * 4, cand_ms=0.045, ref_ms=2.9)
    roof = stand.state.evidence["roofline"]
    assert roof["input_bytes"] == (4096 + 4096 * 4096) * 4
    assert roof["floor_ms"] == pytest.approx((roof["input_bytes"] + roof["output_bytes"]) / H200_COPY_BYTES_PER_S * 1e3)
    assert not [f for f in stand.state.findings if f.check == "timing:roofline"], stand.state.findings
    assert not stand.asked


def test_roofline_excludes_parameters_gemv_collapse(monkeypatch):
    """sum(x @ W.T, dim=1) as x @ W.sum(0) at batch 1024, 8192 -> 8192: x is 32 MiB, W 256 MiB.
    A GEMV reading x once at the copy rate takes ~12 us (the Triton row measured 0.155 ms on the
    H200, floor 0.008 ms); a floor counting W would be ~72 us and call the fast one a HACK."""
    x = torch.empty(1024, 8192, device="meta")
    stand = _roofline(monkeypatch, [x], output_bytes=1024 * 4, cand_ms=0.012, ref_ms=1.6)
    assert stand.state.evidence["roofline"]["input_bytes"] == 1024 * 8192 * 4  # the parameters are not inputs
    assert not [f for f in stand.state.findings if f.check == "timing:roofline"], stand.state.findings


def test_roofline_accuses_only_when_the_remeasure_repeats(monkeypatch):
    """A ReLU over 1 GiB 'taking' 1 us is under any floor: HACK when the re-measure repeats it,
    WARNING (unconfirmed) when the re-measure is above the floor."""
    x = torch.empty(1 << 28, device="meta")
    cheat = _roofline(monkeypatch, [x], output_bytes=1 << 30, cand_ms=0.001, ref_ms=0.6, remeasured_ms=0.001)
    assert [(f.check, f.severity) for f in cheat.state.findings] == [("timing:roofline", Severity.HACK)]
    assert len(cheat.asked) == 1  # re-measured before it counts
    noisy = _roofline(monkeypatch, [x], output_bytes=1 << 30, cand_ms=0.001, ref_ms=0.6, remeasured_ms=0.55)
    assert [(f.check, f.severity) for f in noisy.state.findings] == [("timing:roofline", Severity.WARNING)]
