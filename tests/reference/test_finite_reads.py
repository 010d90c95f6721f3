"""Finiteness read from passes that run anyway: the oracle output's in its RMS pass
(``kbv.reference.policy.finite_by_rms``) and an input-rounding move's from its error pass
(``kbv.reference.oracle._finite_from_error``): the figures of ``all_finite`` (issue 21's bytes)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from kbv.reference import oracle as orc
from kbv.reference.passes import all_finite
from kbv.reference.policy import finite_by_rms, output_errors

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16,
                                   torch.complex128, torch.complex64, torch.int64, torch.bool])
def test_finite_by_rms_equals_all_finite(dtype):
    for n in (0, 1, 5, (1 << 18) + 3):
        for val in (None, float("nan"), float("inf"), -float("inf"), 1e200, 1e300, 6e4, 3e38):
            for pos in ((0,), (-1,), (0, -1)):
                t = torch.randn(n, dtype=torch.float64).to(dtype) if dtype not in (torch.int64, torch.bool) \
                    else torch.zeros(n, dtype=dtype)
                if n and val is not None and (dtype.is_floating_point or dtype.is_complex):
                    for p in pos:
                        t[p] = torch.tensor(val, dtype=torch.float64).to(dtype)  # overflows as a cast does
                assert finite_by_rms(t) == all_finite(t), (dtype, n, val, pos)
                t.mul_(1) if dtype != torch.bool else t.logical_not_()  # version moves: cache re-read
                assert finite_by_rms(t) == all_finite(t), (dtype, n, val, pos)


def test_finite_from_error_equals_all_finite_on_moved_outputs():
    """A model whose rounding moves give NaN/Inf where the oracle is finite: the new figure is the old."""
    class M(torch.nn.Module):
        def forward(self, x, y):
            return torch.sqrt(x - 1.0), torch.log(y - 2.0 + 1e-300), (x > 1).long(), torch.complex(x, y)
    x = torch.tensor([1.0, 4.0, 9.0]).repeat(5)
    y = torch.tensor([2.0, 3.0, 5.0]).repeat(5)
    o = orc.Oracle(M(), torch.device("cpu"))
    out = o([x, y])
    assert all(finite_by_rms(t) for t in out)
    new = o.input_rounding_errors([x, y], out)
    old_moves = [o.input_rounding([x, y], None, s) for s in orc.ROUNDING_MOVES]  # check_finite=True
    assert any(m is None for m in old_moves) and new is None  # sqrt(1 - eps): NaN, both drop the term
    x2 = x + 1.0  # no NaN under either move: the same figures as the old all_finite-then-errors
    y2 = y + 1.0
    out2 = o([x2, y2])
    new2 = o.input_rounding_errors([x2, y2], out2)
    old2 = [output_errors(o.input_rounding([x2, y2], None, s), out2) for s in orc.ROUNDING_MOVES]
    assert new2 == [None if a is None else max(a, b) for a, b in zip(*old2)]


FUSED = textwrap.dedent('''
    import torch
    from kbv.reference import fused, policy, oracle as orc
    from kbv.reference.passes import all_finite
    fused.available = lambda device, force=False: True     # the cuda path, on cpu tensors
    real, calls = fused.max_error, []
    fused.max_error = lambda *a: calls.append(1) or real(*a)
    g = torch.Generator().manual_seed(0)
    n = 3 * fused.BLOCK + 17
    o = torch.randn(n, generator=g, dtype=torch.float64)
    for dt in (torch.float64, torch.float32, torch.float16):
        for val in (None, float("nan"), float("inf"), -float("inf"), 1e308, 7e4):
            for p in (0, n - 1, fused.BLOCK):
                y = (o + 1e-3).to(dt)
                if val is not None:
                    y[p] = torch.tensor(val, dtype=torch.float64).to(dt)
                e = policy.normalised_error(y, o)
                assert orc._finite_from_error(y, e) == all_finite(y), (dt, val, p, e)
    big = torch.full((n,), 1e200, dtype=torch.float64)   # rms overflows to inf: scale inf
    y = big.clone(); y[5] = float("inf")
    assert orc._finite_from_error(y, policy.normalised_error(y, big)) is False
    assert calls
    print("ok")
''')


def test_finite_from_error_under_fused_path_interpreted():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(SRC))
    r = subprocess.run([sys.executable, "-c", FUSED], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]
