"""The fused cuda error passes (``kbv.reference.fused``) give the torch passes' figures: run under
Triton's interpreter on cpu tensors (``TRITON_INTERPRET=1``, set before Triton is imported, so in a
child process), beside ``kbv.reference.policy.max_error`` and ``kbv.reference.comparison.compare``
on the same tensors (their torch passes: cpu tensors never take the fused path)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

CHILD = textwrap.dedent('''
    import math, torch
    from kbv.reference import comparison, fused, policy

    assert fused.available("cpu", force=True) and not fused.available("cpu")
    g = torch.Generator().manual_seed(0)
    n = 3 * fused.BLOCK + 17  # a partial last block

    def close(a, b):
        return a == b or abs(a - b) <= 1e-15 * max(abs(a), abs(b))

    # max_error against the torch pass: float32 and float16 outputs, errors over several decades
    o = torch.randn(n, generator=g, dtype=torch.float64) * 3
    for dtype, noise in ((torch.float32, 1e-6), (torch.float32, 1e-2), (torch.float16, 1e-3)):
        y = (o * (1 + noise * torch.randn(n, generator=g, dtype=torch.float64))).to(dtype)
        scale = policy.rms_of(o)
        assert close(fused.max_error(y, o, scale), policy.max_error(y, o, scale)), dtype
    y = o.float().clone()
    y[n - 1] = float("nan")
    assert fused.max_error(y, o, 1.0) is None and policy.max_error(y, o, 1.0) == math.inf
    y[n - 1] = float("inf")
    assert fused.max_error(y, o, 1.0) is None
    assert fused.max_error(torch.zeros(0), torch.zeros(0, dtype=torch.float64), 1.0) == 0.0

    # allclose figures against compare(): some elements outside the tolerance, some |r| <= atol
    r = torch.randn(n, generator=g) * torch.where(torch.rand(n, generator=g) < 0.1, 1e-4, 1.0)
    for noise in (1e-5, 3e-3, 1e-1):
        y = r + noise * torch.randn(n, generator=g)
        c = comparison.compare([y], [r], atol=1e-3, rtol=1e-3)
        top, rel, t, count = fused.allclose_figures(y, r, 1e-3, 1e-3)
        assert close(top, c.max_abs_error) and close(rel, c.max_rel_error) and close(t, c.min_tolerance), noise
        assert count == c.mismatched_elements, (noise, count, c.mismatched_elements)
    assert count > 0  # the widest noise puts elements outside
    y = r.clone()
    y[5] = float("nan")
    assert fused.allclose_figures(y, r, 1e-3, 1e-3) is None
    print("ok")
''')


@pytest.mark.e2e  # a child process with Triton's interpreter (~5 s)
def test_fused_passes_give_the_torch_passes_figures():
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


MOVE_CHILD = textwrap.dedent('''
    import torch
    from unittest import mock
    from kbv.reference import fused, rounding_moves

    cpu = torch.device("cpu")
    g = torch.Generator().manual_seed(1)
    n = 2 * fused.BLOCK + 5  # a partial last block
    base = torch.randn(n, generator=g, dtype=torch.float64) * torch.pow(10.0, torch.randint(-30, 30, (n,), generator=g))
    base[:6] = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-300])
    cases = [base.to(dt) for dt in fused.MOVE_DTYPES] + [base[:fused.BLOCK].view(64, -1).float()]
    same = lambda x, y: x.dtype == y.dtype and x.shape == y.shape and bool(  # bits, or both NaN (any payload)
        ((x.view(torch.int64) == y.view(torch.int64)) | (x.isnan() & y.isnan())).all())
    for a in cases:
        for seed, offset in ((None, 0), (0x5EED, 0), (0x5EED, 3 * fused.BLOCK + 11), (7, 2**40)):
            want = rounding_moves.rounded_up(a, cpu, seed, offset)  # the torch pass: cpu never takes the fused one
            got = fused.rounded_move(a, seed, offset)
            assert same(got, want), (a.dtype, seed, offset)
            with mock.patch.object(fused, "available", lambda d, force=False: True):
                assert same(rounding_moves.rounded_up(a, cpu, seed, offset), want)  # the route the oracle takes
    # the draw mixes signs: about half of the elements move down
    up = fused.rounded_move(torch.ones(n), None)
    signed = fused.rounded_move(torch.ones(n), 0x5EED)
    assert bool((up > 1).all()) and 0.4 < float((signed < 1).double().mean()) < 0.6
    print("ok")
''')


@pytest.mark.e2e  # a child process with Triton's interpreter (~5 s)
def test_fused_rounding_move_gives_the_torch_pass_bit_for_bit():
    """``kbv::rounded_move`` (the input-rounding term's moved inputs on cuda, one pass) gives
    ``rounded_up``'s torch values bit for bit: every source dtype, both moves, offsets into a larger
    tensor (a piece's draw), zeros, infinities, NaN and float64 values whose move is subnormal."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", MOVE_CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


@pytest.mark.cuda
def test_fused_rounding_move_on_the_device_gives_the_torch_pass_bit_for_bit():
    """On a GPU (compiled, not interpreted; fused multiply-add off): the oracle's cuda route gives
    the cpu torch pass's moved values bit for bit, both moves, a piece's offset."""
    import torch

    from kbv.reference import fused, rounding_moves

    g = torch.Generator().manual_seed(2)
    n = 3 * fused.BLOCK + 7
    a = torch.randn(n, generator=g) * torch.pow(10.0, torch.randint(-20, 20, (n,), generator=g).float())
    for seed, offset in ((None, 0), (0x5EED, 0), (0x5EED, 12345)):
        want = rounding_moves.rounded_up(a, torch.device("cpu"), seed, offset)
        got = rounding_moves.rounded_up(a.cuda(), torch.device("cuda"), seed, offset).cpu()
        assert torch.equal(got.view(torch.int64), want.view(torch.int64)), (seed, offset)
