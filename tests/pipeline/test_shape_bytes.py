"""At a secret shape the judging state's call bytes are the shape's (kbv.pipeline.secret_shapes
.SecretShapes._at_shape): a device out-of-memory failure there is weighed against the shape's B,
not the larger nominal one (red-team helper, eighteenth session), and restored after."""

from __future__ import annotations

import types

import torch

from kbv.pipeline import secret_shapes as ss
from kbv.pipeline.load import call_input_bytes


def _rp(n: int):
    module = types.SimpleNamespace(get_inputs=lambda: [torch.rand(n, 256), torch.randint(0, 4, (n,)), 3])
    return types.SimpleNamespace(module=module, model=torch.nn.Identity(), device=torch.device("cpu"))


def test_call_input_bytes_reads_a_meta_draw_at_the_precision():
    assert call_input_bytes(_rp(64), "fp32") == (64 * 256 * 4 + 64 * 8, 64 * 256 * 4)
    assert call_input_bytes(_rp(64), "fp16") == (64 * 256 * 2 + 64 * 8, 64 * 256 * 2)
    needs_real = types.SimpleNamespace(module=types.SimpleNamespace(get_inputs=lambda: [torch.rand(2).numpy()]))
    assert call_input_bytes(needs_real, "fp32") is None


def test_the_shapes_input_bytes_hold_inside_the_block_only():
    nominal = _rp(1024)
    ctx = types.SimpleNamespace(rp=nominal, oracle=types.SimpleNamespace(release=lambda: None),
                                _input_bytes=1024 * 256 * 4 + 1024 * 8,
                                config=types.SimpleNamespace(precision="fp32"))
    shapes = ss.SecretShapes.__new__(ss.SecretShapes)
    shapes.ctx = ctx
    with shapes._at_shape(_rp(256)):
        assert ctx._input_bytes == 256 * 256 * 4 + 256 * 8 and ctx.rp is not nominal
    assert ctx._input_bytes == 1024 * 256 * 4 + 1024 * 8 and ctx.rp is nominal


def test_a_reference_memory_failure_at_the_shape_is_read_at_the_shape():
    """The reference worker's out-of-memory failure inside the shape's block is weighed there, with
    the shape's B, before the nominal state comes back (red-team helper, eighteenth session); other
    exceptions are not read."""
    import pytest

    seen = []
    ctx = types.SimpleNamespace(rp=_rp(1024), oracle=types.SimpleNamespace(release=lambda: None),
                                _input_bytes=1024 * 256 * 4 + 1024 * 8, _oom_fit=None,
                                config=types.SimpleNamespace(precision="fp32"),
                                _trusted_oom_fit=lambda exc: seen.append(ctx._input_bytes) or "device full")
    shapes = ss.SecretShapes.__new__(ss.SecretShapes)
    shapes.ctx = ctx
    oom = MemoryError()
    with pytest.raises(MemoryError):
        with shapes._at_shape(_rp(256)):
            raise oom
    assert seen == [256 * 256 * 4 + 256 * 8] and ctx._oom_fit == (oom, "device full")
    assert ctx._input_bytes == 1024 * 256 * 4 + 1024 * 8
    with pytest.raises(ValueError):
        with shapes._at_shape(_rp(256)):
            raise ValueError("not a memory failure")
    assert len(seen) == 1
