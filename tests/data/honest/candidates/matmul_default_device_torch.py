"""Honest control for level1/10_Large_K_matmul and the worker's mode shield
(``kbv.sandbox.torch_state.ModeShield``): ``torch.set_default_device`` at import leaves torch's own device
context on the mode stack for good, and ``forward`` enters a function mode of its own (a call
counter) and leaves it before returning. Neither is taken for a mode left on by the candidate.
The product is a broadcast-and-sum, its own ops.

Expected verdict: PASS."""
import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

torch.set_default_device("cpu")


class _Count(TorchFunctionMode):
    calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        _Count.calls += 1
        return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def forward(self, A, B):
        with _Count():
            return (A.unsqueeze(2) * B.unsqueeze(0)).sum(1)
