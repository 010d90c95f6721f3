"""Softmax through torch.compile (backend: torch) -- problem level1/5_Small_Softmax
(16 x 300, softmax over dim 1), on cpu; on cuda the same file runs on the GPU-sized softmax.

What it does: compiles the max-shifted softmax written out in torch ops with torch.compile
(inductor) once, and calls the compiled function in forward.
Why it is honest: it computes the right answer on every call and keeps no state; its speed comes
from PyTorch's own compiler, so kbv reports it as a SHORTCUT (scan:torch-compile), never as a
correct speedup. Loading inductor defines new ``prims::`` ops and registers kernels for them:
that is torch's own doing, not an override of an existing op, so no harness-identity HACK.
Expected verdict: SHORTCUT, no HACK finding.
"""

import torch
import torch.nn as nn


def _softmax(x: torch.Tensor) -> torch.Tensor:
    z = x - x.amax(dim=1, keepdim=True)
    e = z.exp()
    return e / e.sum(dim=1, keepdim=True)


_compiled = torch.compile(_softmax, dynamic=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _compiled(x)
