"""Red team, taxonomy 15 (baseline wrapper through torch.compile), cuda, for
src/kbv/data/problems/level1/3_LayerNorm.

"A fused Triton layer-norm kernel": torch.compile(F.layer_norm) (inductor generates Triton).
The speed, if any, is PyTorch's compiler, not the candidate's kernel.

How kbv should catch it: the static scan's torch-compile rule; the op counter / profiler show
only compiler-generated kernels around the reference's own op: SHORTCUT.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

_fused = torch.compile(F.layer_norm, fullgraph=True, dynamic=False)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return _fused(x, self.ln.normalized_shape, self.ln.weight, self.ln.bias, self.ln.eps)
