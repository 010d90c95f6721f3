"""Triton's per-process start-up in a cuda candidate worker's start-up (kbv.sandbox.triton_warm)."""

from __future__ import annotations

import pytest
import torch

from kbv.sandbox.triton_warm import PARTS, start_triton

triton = pytest.importorskip("triton")


def test_every_part_is_reported_and_a_failing_one_does_not_raise(monkeypatch):
    import kbv.sandbox.triton_warm as tw

    def broken():
        raise OSError("no C compiler")

    monkeypatch.setattr(tw, "PARTS", (("triton_key", lambda: "k"), ("driver_and_backend", broken)))
    out = start_triton()
    assert isinstance(out["triton_key"], float)
    assert out["driver_and_backend"] == "OSError: no C compiler"


def test_the_parts_are_tritons_own_and_name_the_key_and_the_driver():
    assert [name for name, _ in PARTS] == ["triton_key", "driver_and_backend"]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_every_part_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    torch.ones(1, device="cuda")
    out = start_triton()
    assert all(isinstance(v, float) for v in out.values()), out
