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


def test_the_perturbed_probe_changes_the_element_where_the_draws_differ_most(monkeypatch):
    """One element per tensor, at the position where the two draws differ the most (read in chunks of
    3 here), so a stale cached answer is as far off as one element makes it; the value is the other
    draw's at that position (its domain), and the set the probe starts from is not touched."""
    from kbv.reference import mutation

    monkeypatch.setattr(mutation, "chunk_elements", lambda device, n: 3)
    a = torch.tensor([[0.5, 0.1, -0.2], [0.3, 0.0, 0.9]])
    b = torch.tensor([[0.4, 0.2, -0.1], [-2.5, 0.1, 0.8]])  # largest difference at (1, 0): 2.8
    idx = torch.tensor([1, 1, 2])  # integers too, and equal draws: the first position
    out = mutation.perturbed([a, idx], [b, idx.clone()], 11)
    assert out[0][1, 0] == -2.5 and (out[0] != a).sum() == 1 and a[1, 0] == 0.3
    assert torch.equal(out[1], idx)
    c = torch.tensor([1 + 1j, 2 + 0j]), torch.tensor([1 + 1j, 2 + 5j])  # complex: the modulus
    assert mutation.perturbed([c[0]], [c[1]], 3)[0][1] == 2 + 5j
