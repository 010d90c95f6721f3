"""kbv.pipeline.context.Context._phase_peak: each phase's host peak, the highest where a phase is
marked more than once (the bound pass's re-check is marked once per pass)."""

import types

import torch

from kbv.pipeline import context as ctx_mod


def test_a_phase_marked_twice_keeps_its_highest_host_peak(monkeypatch):
    readings = iter([5 << 30, 3 << 30, 2 << 30])
    monkeypatch.setattr(ctx_mod.fp, "host_peak_bytes", lambda: next(readings))
    monkeypatch.setattr(ctx_mod.fp, "reset_host_peak", lambda: None)
    c = types.SimpleNamespace(rp=types.SimpleNamespace(device=torch.device("cpu")),
                              state=types.SimpleNamespace(evidence={}))
    ctx_mod.Context._phase_peak(c, "bound-recheck")
    ctx_mod.Context._phase_peak(c, "bound-recheck")
    ctx_mod.Context._phase_peak(c, "bound-pass")
    assert c.state.evidence["phase_host_peaks"] == {"bound-recheck": 5 << 30, "bound-pass": 2 << 30}
    assert c._peak == 5 << 30
