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
