"""The reference's outputs on the host during the input-rounding forwards (``Judging._reference_aside``):
on cuda, where the outputs leave no room beside the oracle (``oracle_after_outputs`` False), the
device holds one output less at that forward (3·I + 4·O, within 4·B + 1 GiB: KernelBench-Verified's
small-K and tall-skinny matmuls went over with it); the list's holders see the same values after."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from kbv.pipeline import judging as jd


def _judging(monkeypatch, device: str, room: bool):
    rp = SimpleNamespace(device=torch.device(device))
    j = jd.Judging(SimpleNamespace(rp=rp))
    monkeypatch.setattr(jd.Judging, "oracle_after_outputs", lambda self: room)
    return j


def test_on_cpu_the_reference_stays_where_it_is(monkeypatch):
    j = _judging(monkeypatch, "cpu", room=False)
    ref = [torch.arange(6.0)]
    first = ref[0]
    with j._reference_aside(ref) as planned_by:
        assert planned_by is ref and ref[0] is first


@pytest.mark.cuda
@pytest.mark.parametrize("room", [False, True], ids=["no-room", "room"])
def test_on_cuda_the_reference_waits_on_the_host_only_without_room(monkeypatch, room):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    j = _judging(monkeypatch, "cuda", room=room)
    ref = [torch.randn(1 << 20, device="cuda"), torch.randn(3, 5, device="cuda")]
    want = [r.cpu() for r in ref]
    holder = ref  # the caller's name for the same list
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    with j._reference_aside(ref) as planned_by:
        inside = torch.cuda.memory_allocated()
        assert (planned_by is None) == (not room)
        assert all(r.is_cuda for r in holder) == room
    assert all(r.is_cuda for r in holder)
    assert all(torch.equal(r.cpu(), w) for r, w in zip(holder, want))
    if not room:
        assert inside <= before - (1 << 22)  # the large output's 4 MiB left the device
