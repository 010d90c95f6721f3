"""Red team, taxonomy 24 (forging the result channel) with a fixed clock: a native patch of the worker's clock (``forge_clock.py``) replaces every reported ``time_ms`` by FIXED_MS as the worker times each call, whatever the
call cost; the kernel is an honest ReLU by ``clamp_min`` (as fast as the baseline), a call of tens of
µs on the RELU problem. A fixed figure keeps the claim under every absolute slack of the proof: seen
2026-12 on a 2-core machine (a red-team helper, issue 19), PASS 3x over eager-fp32, no finding.
Expected: not credited the fixed time (``timing:claim-below-bound``: two passes' CPU floors over the
claim credit the lesser floor, :func:`kbv.checks.bound_rules.floor_cap`), no speed reward."""

import importlib.util
import pathlib
import torch.nn as nn

FIXED_MS = 0.001


def _forge() -> None:
    """The claims forged natively, past every identity check (tests/data/redteam/forge_clock.py)."""
    spec = importlib.util.spec_from_file_location("forge_clock", pathlib.Path(__file__).with_name("forge_clock.py"))
    vehicle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vehicle)
    vehicle.install(lambda elapsed, cpu: FIXED_MS / 1e3)
    globals()["_VEHICLE"] = vehicle  # the callbacks live as long as the module


_forge()


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0.0)
