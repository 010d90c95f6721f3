"""kbv's own elementwise passes (kbv.reference.passes): host chunks and threads, and the one-pass
comparison figures against whole-tensor float64 arithmetic, finite or not (issue 9: a 1 GiB
verification spent most of its time in these passes)."""

from __future__ import annotations

import math

import pytest
import torch

from kbv.reference import comparison as cmp
from kbv.reference import passes
from kbv.reference import policy as pol
from kbv.reference import vetting
from kbv.reference.mutation import content_digest


def _expected(o: torch.Tensor, r: torch.Tensor, atol: float, rtol: float) -> dict:
    """allclose's figures on whole float64 tensors, element by element as its definition reads."""
    o, r = o.double().reshape(-1), r.double().reshape(-1)
    fin = torch.isfinite(o) & torch.isfinite(r)
    d = torch.where(fin, (o - r).abs(), torch.zeros_like(o))
    nan_bad = int((torch.isnan(o) != torch.isnan(r)).sum())
    inf_bad = int((torch.isinf(r) & (o != r)).sum()) + int((torch.isinf(o) & ~torch.isinf(r)).sum())
    outside = int((fin & (d > atol + rtol * r.abs())).sum())
    rel = torch.where(fin & (r.abs() > atol), d / r.abs(), torch.zeros_like(d))
    tmin = torch.where(fin, d / (1 + r.abs()), torch.zeros_like(d))
    return dict(max_abs=float(d.max()), max_rel=float(rel.max()), bad=outside + nan_bad + inf_bad,
                nonfinite=nan_bad + inf_bad, tmin=float(tmin.max()))


def _cases():
    g = torch.Generator().manual_seed(3)
    r = torch.randn(300, 200, generator=g)
    yield "equal", r.clone(), r
    yield "within", r + 1e-5 * torch.randn(r.shape, generator=g), r
    near = r.clone()
    near.view(-1)[12345] += 2e-3 * (1 + abs(float(r.view(-1)[12345])))
    yield "one-outside", near, r
    yield "many-outside", r + 0.1 * torch.randn(r.shape, generator=g), r
    nans = r.clone()
    nans.view(-1)[[5, 40_000]] = float("nan")
    yield "nan-in-output", nans, r
    rinf = r.clone()
    rinf.view(-1)[[7, 50_001]] = float("inf")
    both = rinf.clone()
    yield "inf-in-both", both, rinf
    yield "inf-only-in-reference", r.clone(), rinf
    big = torch.full((5000,), 1.5e308, dtype=torch.float64)
    flipped = big.clone()
    flipped[10] = -1.5e308  # both finite, their difference is not
    yield "float64-overflowing-difference", flipped, big


@pytest.mark.parametrize("name,o,r", list(_cases()), ids=[c[0] for c in _cases()])
@pytest.mark.parametrize("chunk", [1 << 22, 1000])
def test_compare_gives_the_whole_tensor_figures_in_one_chunked_pass(monkeypatch, name, o, r, chunk):
    monkeypatch.setattr(passes, "CPU_CHUNK_ELEMENTS", chunk)
    c = cmp.compare([o], [r], atol=1e-3, rtol=1e-3)
    e = _expected(o, r, 1e-3, 1e-3)
    assert c.mismatched_elements == e["bad"] and c.nonfinite_mismatches == e["nonfinite"], name
    assert c.passed == (e["bad"] == 0)
    assert c.max_abs_error == pytest.approx(e["max_abs"], rel=1e-12, abs=0)
    assert c.max_rel_error == pytest.approx(e["max_rel"], rel=1e-12, abs=0)
    assert c.min_tolerance == pytest.approx(e["tmin"], rel=1e-12, abs=0)
    assert c.min_tolerance == pytest.approx(pol.min_allclose_tolerance(o, r), rel=1e-12, abs=0)


def test_the_count_of_elements_outside_is_exact_just_past_the_tolerance():
    r = torch.linspace(-3, 3, 1 << 16, dtype=torch.float64)
    o = r + 1e-3 * (1 + r.abs()) * (1 + 1e-6)  # every element just outside, by a millionth
    assert cmp.compare([o], [r], atol=1e-3, rtol=1e-3).mismatched_elements == r.numel()
    o = r + 1e-3 * (1 + r.abs()) * (1 - 1e-6)  # every element just inside
    c = cmp.compare([o], [r], atol=1e-3, rtol=1e-3)
    assert c.passed and c.mismatched_elements == 0
    # atol != rtol: the count is not skipped for figures over min(atol, rtol)
    o = r + 5e-4 + 2e-3 * r.abs()
    assert cmp.compare([o], [r], atol=1e-3, rtol=1e-3).mismatched_elements == int((r.abs() > 0.5).sum())


@pytest.mark.parametrize("chunk", [1 << 22, 999])
def test_the_normalised_error_and_rms_match_whole_tensor_arithmetic(monkeypatch, chunk):
    monkeypatch.setattr(passes, "CPU_CHUNK_ELEMENTS", chunk)
    g = torch.Generator().manual_seed(5)
    o = torch.randn(300, 500, generator=g, dtype=torch.float64)
    y = (o + 1e-6 * torch.randn(o.shape, generator=g, dtype=torch.float64)).float()
    rms = float(o.pow(2).mean().sqrt())
    whole = float(((y.double() - o).abs() / (o.abs() + rms)).max())
    assert pol.normalised_error(y, o.clone()) == pytest.approx(whole, rel=1e-12)
    bad = y.clone()
    bad.view(-1)[77_777] = float("inf")
    assert pol.normalised_error(bad, o.clone()) == math.inf
    holes = o.clone()
    holes.view(-1)[[3, 90_000]] = float("nan")  # skipped where the oracle is not finite
    fin = torch.isfinite(holes)
    rms_h = float(holes[fin].pow(2).mean().sqrt())
    assert pol.rms_of(holes) == pytest.approx(rms_h, rel=1e-12)
    want = float(torch.where(fin, (y.double() - holes).abs() / (holes.abs() + rms_h), 0.0).max())
    assert pol.normalised_error(y, holes) == pytest.approx(want, rel=1e-12)


def test_finiteness_summaries_and_digests_read_in_chunks(monkeypatch):
    monkeypatch.setattr(passes, "CPU_CHUNK_ELEMENTS", 1000)
    t = torch.randn(4096, 3)
    assert passes.all_finite(t) and passes.all_finite(torch.ones(5, dtype=torch.int64))
    t[4000, 2] = float("nan")
    assert not passes.all_finite(t) and not cmp.reference_is_finite([t])
    for bad in (float("inf"), -float("inf")):
        t[4000, 2] = bad
        assert not passes.all_finite(t)
    # finite values whose sum overflows: the chunk's sum is infinite, the elements are not
    big = torch.full((3000,), 3e38)
    assert not bool(torch.isfinite(big[:1000].sum())) and passes.all_finite(big)
    assert not passes.all_finite(torch.tensor([1.0, float("inf"), -float("inf")] * 400))
    s = vetting.summarise([torch.full((5000,), 2.0)], 1e-3, 1e-3)
    assert s.sums == (10000.0,) and s.rms == pytest.approx(2.0) and not s.zeros_pass
    assert vetting.summarise([torch.full((5000,), 1e-4)], 1e-3, 1e-3).zeros_pass
    x = torch.randn(10_001)
    monkeypatch.setattr(passes, "CPU_CHUNK_ELEMENTS", 1 << 18)
    whole = content_digest(x)
    monkeypatch.setattr(passes, "CPU_CHUNK_ELEMENTS", 777)
    assert content_digest(x) == whole  # the same digest whatever the chunk
    y = x.clone()
    y[5000] = -y[5000]
    assert content_digest(y) != whole


def test_host_passes_use_one_thread_on_a_loaded_machine_and_restore_torchs_setting(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(passes.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(passes.os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    assert passes.idle_threads(2) == 1
    with passes.host_threads("cpu"):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    monkeypatch.setattr(passes.os, "getloadavg", lambda: (0.2, 0.2, 0.2))
    assert passes.idle_threads(2) == 2 and passes.idle_threads(8) == 2
    monkeypatch.setattr(passes.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(passes.os, "getloadavg", lambda: (40.0, 0, 0))
    assert passes.idle_threads(64) == 25
    assert passes.chunk_elements("cpu", 1 << 22) == passes.CPU_CHUNK_ELEMENTS
    assert passes.chunk_elements("cpu", 100) == 100
    assert passes.chunk_elements("meta", 1 << 22) == 1 << 22  # a device keeps the caller's chunk


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_poisoned_elements_counts_the_same_in_chunks_across_their_edges(monkeypatch, dtype):
    from kbv.checks import outputs as co
    from kbv.sandbox.call_probes import POISON_INT32

    t = torch.randn(1000).to(dtype)
    ref = t.clone()
    if dtype == torch.float32:
        bits = t.view(torch.int32)
        bits[[0, 6, 7, 13, 999]] = POISON_INT32
        ref.view(torch.int32)[13] = POISON_INT32  # equal to the reference there: not counted
    else:  # the two halves of the 32-bit pattern side by side, straddling chunk edges (7, 14, ...)
        bits = t.view(torch.int16)
        hi, lo = (POISON_INT32 >> 16) & 0xFFFF, POISON_INT32 & 0xFFFF
        for at in (6, 13, 500):
            bits[at], bits[at + 1] = co._signed(lo, 2), co._signed(hi, 2)
        bits[300] = co._signed(hi, 2)  # a half alone is not a poison word
    whole = co.poisoned_elements(t, ref)
    monkeypatch.setattr(co, "POISON_CHUNK_ELEMENTS", 7)
    assert co.poisoned_elements(t, ref) == whole == (4 if dtype == torch.float32 else 6)


def test_drop_view_unmaps_a_shared_tensor_and_its_values_read_the_same():
    from kbv.processes import footprint as fp

    t = torch.empty(32 << 20, dtype=torch.uint8).share_memory_()
    t.fill_(7)
    before = fp.host_rss_bytes()
    assert fp.drop_view(t)
    assert fp.host_rss_bytes() < before - (24 << 20)
    assert int(t[::4096].to(torch.int64).sum()) == 7 * t[::4096].numel()
    assert not fp.drop_view(torch.ones(10)) and not fp.drop_view(t[:0]) and not fp.drop_view("x")


def test_input_rounding_leaves_float64_inputs_as_they_were(monkeypatch):
    """The moved copy of a float64 input is a new tensor: the chunked move once ran in place on a
    view of the caller's float64 tensor (``.to(float64)`` returns the tensor itself)."""
    from kbv.reference import oracle as orc

    monkeypatch.setattr(orc, "PIECE_BYTES", 4096)  # the piecewise path as well
    x = torch.randn(64, 50, dtype=torch.float64)
    before = x.clone()
    o = orc.Oracle(torch.nn.Softmax(dim=1), torch.device("cpu"))
    out = o([x], [torch.softmax(x, dim=1)])
    assert orc.Oracle(torch.nn.Softmax(dim=1), torch.device("cpu")).input_rounding([x]) is not None
    assert torch.equal(x, before)
    assert o.input_rounding_errors([x], out, [torch.softmax(x, dim=1)]) is not None and torch.equal(x, before)


_FAULTS = """
import resource, sys, torch
torch.set_num_threads(1)
if sys.argv[1] == "1":
    from kbv.processes.footprint import reuse_small_blocks
    assert reuse_small_blocks()
from kbv.reference import comparison as cmp
x = torch.rand(1024, 16384)
ref = [torch.relu(x)]
out = [ref[0].clone()]
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
cmp.compare(out, ref, atol=1e-3, rtol=1e-3)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


def test_the_reference_workers_malloc_reuses_the_passes_temporaries_instead_of_faulting_them_in_again():
    """kbv.processes.footprint.reuse_small_blocks (called at the reference worker's start): a
    comparison's chunk temporaries come from reused heap, not from new pages each chunk."""
    import subprocess
    import sys

    def faults(tuned: str) -> int:
        out = subprocess.run([sys.executable, "-c", _FAULTS, tuned], capture_output=True, text=True, check=True)
        return int(out.stdout.split()[-1])

    untuned, tuned = faults("0"), faults("1")
    assert tuned < untuned, (tuned, untuned)  # measured 4K-6K against 12K-180K


def test_summarise_reads_the_extremes_in_the_outputs_own_dtype():
    """``zeros_pass`` from the extremes (``aminmax``, before the float64 upcast): a NaN fails it, an
    integer or boolean output is summarised too, and the sums and RMS are the float64 ones."""
    import math

    from kbv.reference import vetting

    x = torch.tensor([3.0, -4.0] * 1000)
    s = vetting.summarise([x], 1e-3, 1e-3)
    assert s.sums == (-1000.0,) and math.isclose(s.rms, math.sqrt(12.5), rel_tol=1e-12) and not s.zeros_pass
    assert not vetting.summarise([torch.tensor([0.0, float("nan")])], 1e-3, 1e-3).zeros_pass
    assert vetting.summarise([torch.tensor([-1e-4, 1e-4])], 1e-3, 1e-3).zeros_pass  # |min| counts as |max| does
    assert not vetting.summarise([torch.tensor([-0.5, 1e-4])], 1e-3, 1e-3).zeros_pass
    b = vetting.summarise([torch.tensor([True, False])], 1e-3, 1e-3)
    assert b.sums == (1.0,) and not b.zeros_pass
    # integers: an int8 minimum whose |.| does not fit int8, and uint16 (no cpu aminmax), both
    # summarised after the upcast (red-team helper, 2026-12-05)
    assert not vetting.summarise([torch.tensor([-128, 0], dtype=torch.int8)], 1e-3, 1e-3).zeros_pass
    u = vetting.summarise([torch.tensor([0, 7], dtype=torch.uint16)], 1e-3, 1e-3)
    assert u.sums == (7.0,) and not u.zeros_pass


def test_shared_clone_makes_each_cpu_tensor_once_in_shared_memory():
    from kbv.reference.inputs import shared_clone

    a = torch.arange(12.0).reshape(3, 4).t()  # not contiguous: the copy is, with the same values
    out = shared_clone([a, 7, torch.zeros(0)])
    assert out[0].is_shared() and out[0].is_contiguous() and torch.equal(out[0], a)
    assert out[1] == 7 and out[2].numel() == 0 and out[2].is_shared()
    out[0][0, 0] = 100.0
    assert a[0, 0] == 0.0  # a copy, not a view


def test_under_tolerance_says_why_zeros_pass_where_the_reference_is_zero():
    """An all-zero reference makes zeros right under every policy; the finding says so instead of
    claiming the kbv policy still rejects them (newcomer, 2026-12-05)."""
    from kbv.model.records import VetFlag
    from kbv.reference import vetting

    zero = {"nominal-0": vetting.summarise([torch.zeros(64)], 1e-3, 1e-3)}
    small = {"nominal-0": vetting.summarise([torch.full((64,), 1e-4)], 1e-3, 1e-3)}
    for summaries, says in ((zero, "right under every policy"), (small, "still rejects zeros")):
        findings, _ = vetting.findings_from(summaries, ["nominal-0"], difference=None, nominal_failures=0,
                                            nominal_total=1, atol=1e-3)
        (f,) = [f for f in findings if f.flag is VetFlag.UNDER_TOLERANCE]
        assert says in f.reason
