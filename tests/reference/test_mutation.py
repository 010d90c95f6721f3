"""kbv.reference.mutation: per-call input changes, those that keep a declared structure included."""

from __future__ import annotations

import pytest
import torch

from kbv.reference.mutation import apply_mutation, perturbed, structured_change, timed_mutation


def _sym(n, g, batch=()):
    a = torch.rand(*batch, n, n, generator=g)
    return (a + a.transpose(-1, -2)) / 2


def _spd(n, g):
    a = torch.randn(n, n, generator=g, dtype=torch.float64)
    m = a @ a.T + n * torch.eye(n, dtype=torch.float64)
    return (m + m.T) / 2


@pytest.mark.parametrize("seed", range(5))
def test_structured_inputs_change_every_call_and_keep_their_domain(seed):
    """A timed call's inputs declared symmetric, spd or probability differ from their timing set
    and stay in their domain (an exact-content memo on a symmetric matmul was PASS 6.2x while they
    were left alone: red-team helper, 2026-12-04)."""
    g = torch.Generator().manual_seed(seed)
    sym, sym2 = _sym(8, g, (3,)), _sym(8, g, (3,))
    spd, spd2 = _spd(6, g), _spd(6, g)
    p = torch.rand(4, 5, generator=g)
    p, p2 = p / p.sum(-1, keepdim=True), torch.softmax(torch.randn(4, 5, generator=g), -1)
    args, spare = [sym, spd, p], [sym2, spd2, p2]
    kinds = {0: "symmetric", 1: "spd", 2: "probability"}
    changes = timed_mutation(args, spare, torch.Generator().manual_seed(100 + seed), (0, 1, 2), kinds)
    got = apply_mutation(args, changes)
    assert {ai for ai, _, _ in changes} == {0, 1, 2}
    assert not torch.equal(got[0], sym) and torch.equal(got[0], got[0].transpose(-1, -2))
    assert not torch.equal(got[1], spd) and torch.equal(got[1], got[1].T)
    assert torch.linalg.cholesky_ex(got[1]).info == 0  # still positive definite
    assert not torch.equal(got[2], p) and torch.allclose(got[2].sum(-1), p.sum(-1)) and (got[2] >= 0).all()
    assert torch.equal(args[0], sym)  # the timing set itself is not touched


def test_a_fixed_input_and_an_unstructured_one():
    g = torch.Generator().manual_seed(0)
    idx, x = torch.arange(6), torch.rand(6, generator=g)
    changes = timed_mutation([idx, x], [idx.flip(0), torch.rand(6, generator=g)], g, (0,), {0: "fixed"})
    assert [ai for ai, _, _ in changes] == [1]  # the fixed input is left as it is
    assert structured_change(torch.rand(3), torch.rand(3), "symmetric", g) == []  # not square: nothing


def test_the_perturbed_probe_keeps_a_declared_symmetry():
    g = torch.Generator().manual_seed(3)
    a, b = _sym(5, g), _sym(5, g)
    out = perturbed([a], [b], 7, (0,), {0: "symmetric"})
    assert not torch.equal(out[0], a) and torch.equal(out[0], out[0].T) and torch.equal(a, a.T)


def test_index_is_torch_unravel_index_in_plain_integers():
    """``_index`` agrees with ``torch.unravel_index`` at the ends, inside and for size-1 dims."""
    from kbv.reference.mutation import _index

    for shape in ((7,), (3, 5), (2, 1, 4, 3), (1,), (4, 1)):
        n = 1
        for s in shape:
            n *= s
        for flat in sorted({0, 1 % n, n // 2, n - 1}):
            want = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape))
            assert _index(flat, shape) == want, (flat, shape)
    assert _index(0, ()) == ()
