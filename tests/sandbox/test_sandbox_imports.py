"""What sits next to candidate code: a real candidate worker (CPU), after it loaded a candidate and
ran its forward, has only the sandbox side of kbv loaded (``kbv``, ``kbv.sandbox.*``,
``kbv.model.*``; tests/test_imports.py checks the same on the import graph) and none of the
trusted side's third-party packages."""

from __future__ import annotations

import json
import time

import pytest
import torch

#: third-party packages only the trusted side uses (terminal, CLI, store, report, LLM SDKs, Ray).
TRUSTED_ONLY = ("rich", "typer", "sqlite3", "matplotlib", "openai", "anthropic", "ray", "pyarrow")

CANDIDATE = '''
import json
import sys

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        tops = sorted({m.split(".")[0] for m in sys.modules})
        kbv = sorted(m for m in sys.modules if m == "kbv" or m.startswith("kbv."))
        print("KBV_MODULES " + json.dumps({"kbv": kbv, "top": tops}), flush=True)
        return x.clone()
'''


def _modules_line(worker, deadline_s: float = 30.0) -> dict:
    """The JSON the candidate printed, read from the worker's log (drained by a thread)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for line in worker.log_tail().splitlines():
            if line.startswith("KBV_MODULES "):
                return json.loads(line[len("KBV_MODULES "):])
        time.sleep(0.1)
    raise AssertionError(f"no module list in the worker's log: {worker.log_tail()[-2000:]}")


@pytest.mark.e2e
def test_a_candidate_worker_loads_only_the_sandbox_side(tmp_path):
    from kbv.processes.candidate import CandidateProcess
    from kbv.reference.inputs import shared_clone
    from kbv.sandbox import protocol
    from kbv.sandbox.numeric_flags import flags_for

    cand = tmp_path / "lister.py"
    cand.write_text(CANDIDATE)
    (tmp_path / "build").mkdir()
    with CandidateProcess(device="cpu", build_dir=tmp_path / "build") as w:
        loaded = w.call(protocol.Load(str(cand), "kbv_candidate_lister", (), 42, "cpu", "fp32",
                                      flags_for("eager-fp32")), phase="load", timeout=120)
        assert isinstance(loaded, protocol.Loaded), loaded
        out = w.call(protocol.Forward(tuple(shared_clone([torch.ones(8)])), buffers="fresh", probes=True),
                     phase="forward", timeout=120)
        assert isinstance(out, protocol.Outputs), out
        seen = _modules_line(w)
    kbv = seen["kbv"]
    assert "kbv.sandbox.worker" in kbv and "kbv.sandbox.protocol" in kbv  # the list is the worker's own
    outside = [m for m in kbv if m not in ("kbv", "kbv.sandbox", "kbv.model")
               and not m.startswith(("kbv.sandbox.", "kbv.model."))]
    assert not outside, f"kbv modules loaded next to candidate code outside the sandbox side: {outside}"
    trusted = sorted(set(seen["top"]) & set(TRUSTED_ONLY))
    assert not trusted, f"trusted-side packages loaded in the candidate worker: {trusted}"


@pytest.mark.e2e
def test_a_worker_imports_its_candidates_backend_modules_before_the_load(tmp_path):
    """``preload`` (:func:`kbv.intake.candidates.backend_modules`): imported by the worker before any
    candidate code, so a worker started ahead of its job has them when the job loads."""
    from kbv.intake.candidates import backend_modules
    from kbv.processes.candidate import CandidateProcess
    from kbv.reference.inputs import shared_clone
    from kbv.sandbox import protocol
    from kbv.sandbox.numeric_flags import flags_for

    assert backend_modules("cuda") == backend_modules("cpp") == ("torch.utils.cpp_extension",)
    assert "triton" in backend_modules("triton") and backend_modules("torch") == ()
    cand = tmp_path / "lister.py"
    cand.write_text(CANDIDATE)
    (tmp_path / "build").mkdir()
    # a stdlib module nothing of kbv's or torch's imports, and one that does not exist (skipped)
    with CandidateProcess(device="cpu", build_dir=tmp_path / "build", preload=("colorsys", "kbv_no_such_module")) as w:
        loaded = w.call(protocol.Load(str(cand), "kbv_candidate_lister", (), 42, "cpu", "fp32",
                                      flags_for("eager-fp32")), phase="load", timeout=120)
        assert isinstance(loaded, protocol.Loaded), loaded
        w.call(protocol.Forward(tuple(shared_clone([torch.ones(8)])), buffers="fresh", probes=True),
               phase="forward", timeout=120)
        seen = _modules_line(w)
    assert "colorsys" in seen["top"]
