"""kbv.reference.inputs: seeding and drawing."""

import traceback

import torch

from kbv.reference import inputs as inp


def test_seed_torch_draws_what_torch_manual_seed_draws():
    torch.manual_seed(1234)
    want = (torch.rand(64), torch.randn(3, 5), torch.randint(0, 100, (7,)))
    torch.manual_seed(99)
    inp.seed_torch(1234)
    got = (torch.rand(64), torch.randn(3, 5), torch.randint(0, 100, (7,)))
    assert all(torch.equal(a, b) for a, b in zip(want, got))


def test_draw_seeds_without_capturing_a_stack(monkeypatch):
    """torch.manual_seed's XPU seeding captured the caller's stack at every draw (76 a cuda job)."""
    calls = []
    monkeypatch.setattr(traceback, "format_stack", lambda *a, **k: calls.append(1) or [])
    a = inp.draw(lambda: [torch.rand(8)], 5)
    b = inp.draw(lambda: [torch.rand(8)], 5)
    assert torch.equal(a[0], b[0]) and calls == []
