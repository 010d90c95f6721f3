"""Red team, taxonomy 15 (baseline wrapper: ModelNew is the reference), for
level1/11_Softmax_rows.

Copies the reference Model into the file and declares ModelNew(Model) with a "fused" docstring
and nothing else: every call is torch.softmax, so any measured "speedup" is noise.

How kbv should catch it: the static scan's inherits-model rule, and the runtime op counter sees
the reference's own compute op (aten softmax) and no custom kernel: SHORTCUT, never a speedup
credited as a kernel's.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class ModelNew(Model):
    """Fused row softmax (single pass, numerically stable)."""
