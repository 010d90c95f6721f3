"""Red team, taxonomy 15 (plain baseline wrapper), for level1/12_LayerNorm_large_row.

The most common shortcut in generated "kernels": forward calls F.layer_norm with the same
parameters. Correct, and exactly as fast as the reference.

How kbv should catch it: the static scan's torch-compute rule on forward and the runtime op
counter (aten native_layer_norm, no custom kernel): SHORTCUT.
"""
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return F.layer_norm(x, self.ln.normalized_shape, self.ln.weight, self.ln.bias, self.ln.eps)
