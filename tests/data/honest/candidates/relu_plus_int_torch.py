"""ReLU plus an int (backend: torch) -- problem level1/22_ReLU_plus_int (256 x 4096 and a plain int).

What it does: ``x.clamp_min(0).add(n)``.
Why it is honest: the same function in other torch ops; the int comes with each call's inputs.
Expected verdict: PASS, no HACK finding (the bound pass once re-checked a call against another
timing set's int).
"""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, n: int):
        return x.clamp_min(0).add(n)
