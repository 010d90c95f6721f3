"""Per-set output summaries made full only while the constant-output rule can still fire
(kbv.reference.vetting.needs_full_summary): the same findings as with every summary full."""

import torch

from kbv.reference import vetting


def _findings(outputs: dict, nominal: list, cut: bool) -> tuple:
    summaries = {}
    for name, out in outputs.items():
        full = (not cut) or name in nominal or vetting.needs_full_summary(summaries)
        summaries[name] = vetting.summarise([out], 1e-3, 1e-3, full=full)
    found, notes = vetting.findings_from(summaries, nominal, difference=None, nominal_failures=0,
                                         nominal_total=len(nominal), atol=1e-3)
    return sorted(f.flag.value for f in found), notes, summaries


def _cases() -> list:
    g = torch.Generator().manual_seed(3)
    r = lambda: torch.randn(3000, generator=g)  # noqa: E731
    const = torch.full((3000,), 0.5)
    tiny = torch.full((3000,), 1e-5)
    return [
        {"nominal-0": r(), "nominal-1": r(), "D1": r(), "normal": tiny},  # inputs matter; zeros pass elsewhere
        {"nominal-0": const, "nominal-1": const.clone(), "D1": const.clone(), "normal": const.clone()},  # constant
        {"nominal-0": const, "nominal-1": const.clone(), "D1": r(), "normal": tiny},  # differs late
        {"nominal-0": tiny, "nominal-1": tiny * 2, "D1": r(), "normal": r()},  # under tolerance on nominal
    ]


def test_the_cut_gives_the_same_findings_and_notes():
    for outputs in _cases():
        nominal = [n for n in outputs if n.startswith("nominal")]
        assert _findings(outputs, nominal, cut=True)[:2] == _findings(outputs, nominal, cut=False)[:2], outputs.keys()


def test_summaries_after_a_difference_hold_the_zeros_test_only():
    outputs = _cases()[0]
    _, _, summaries = _findings(outputs, ["nominal-0", "nominal-1"], cut=True)
    assert summaries["nominal-1"].full and not summaries["D1"].full and not summaries["normal"].full
    assert summaries["normal"].zeros_pass and summaries["normal"].sums == () and summaries["normal"].samples == ()
    constant = _cases()[1]
    _, _, summaries = _findings(constant, ["nominal-0", "nominal-1"], cut=True)
    assert all(s.full for s in summaries.values())  # the constant rule needs them all


def test_an_integer_output_summarised_without_the_upcast_still_tests_zeros():
    s = vetting.summarise([torch.tensor([0, 0, 0], dtype=torch.int64)], 1e-3, 1e-3, full=False)
    assert s.zeros_pass and not s.full
    assert not vetting.summarise([torch.tensor([0, 5], dtype=torch.int32)], 1e-3, 1e-3, full=False).zeros_pass


def test_the_summary_says_whether_every_output_is_finite_as_the_reference_check_does():
    """``OutputSummary.finite`` (from the extremes the zeros-pass test reads) agrees with
    ``reference_is_finite`` on every dtype and place of a NaN or an infinity, full or not, so the
    correctness sets drop a non-finite reference without a pass of their own (issue 21)."""
    from kbv.reference.comparison import reference_is_finite

    cases = [[torch.arange(10.0)], [torch.zeros(0)], [torch.tensor([1, 2], dtype=torch.int32)],
             [torch.arange(10.0), torch.tensor([True, False])], [torch.arange(4.0).to(torch.complex64)]]
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        for bad in (float("nan"), float("inf"), -float("inf")):
            for where in (0, 5000, 9999):
                t = torch.ones(10000, dtype=dtype)
                t[where] = bad
                cases.append([t])
                cases.append([torch.ones(3), t])
    c = torch.ones(8, dtype=torch.complex64)
    c[3] = complex(float("nan"), 0.0)
    cases.append([c])
    assert not reference_is_finite([c])  # a complex NaN once passed as finite (all_finite read real dtypes only)
    for outputs in cases:
        want = reference_is_finite(outputs)
        for full in (True, False):
            assert vetting.summarise(outputs, 1e-3, 1e-3, full=full).finite == want, (outputs, full)


def test_complex_outputs_that_differ_in_their_imaginary_parts_have_different_samples():
    """A complex output's samples hold its real and imaginary parts (a float64 cast kept the real
    parts alone, so 1 and 1j + 0 differing in phase only looked the same to the constant-output
    rule; magnitudes alone would too)."""
    a = torch.complex(torch.ones(1000), torch.zeros(1000))
    b = torch.complex(torch.zeros(1000), torch.ones(1000))
    c = torch.complex(torch.ones(1000), torch.zeros(1000)) * torch.complex(torch.zeros(1000), torch.ones(1000))
    sa, sb, sc = (vetting.summarise([x], 1e-3, 1e-3) for x in (a, b, c))
    assert sa.samples[0].numel() == 2 * min(1000, vetting.SAMPLE_ELEMENTS)
    assert not vetting.same_output(sa, sb) and vetting.same_output(sb, sc)


def test_a_complex_output_with_finite_parts_whose_magnitude_overflows_is_finite():
    """Red-team: both parts 3e38 are finite, their magnitude is not in float32; the set was dropped
    as "reference output has NaN/Inf" and a correct kernel ended EVAL_ERROR."""
    big = torch.full((100,), 3e38)
    assert vetting.summarise([torch.complex(big, big)], 1e-3, 1e-3).finite
    assert not vetting.summarise([torch.complex(big, torch.full((100,), float("nan")))], 1e-3, 1e-3).finite
